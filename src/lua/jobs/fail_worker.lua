-- job_queue::fail_worker, and maintenance's dead workers.
-- KEYS: layout job (src/lua/layouts/job.lua), then the dead-letter queue's (as jobs/fail.lua).
-- ARGV: 1 batch, 2 wake channel, 3 dead-letter queue name as the caller
-- knows it, 4 its wake channel, 5 worker (absent: every worker whose
-- registration lapsed, up to `batch` of them). Fails each such worker
-- (worker liveness, fail_worker in includes/lapse.lua): the
-- claims it still holds end as lapses, a stall counted (requeued, or dead
-- letters past max_stalls), at once rather than when each lease lapses;
-- then the queue's claimers are woken. Returns {workers failed, requeued,
-- dead-lettered}, or {'dlq', name} as jobs/fail.lua.
--- @include "includes/acl"
--- @include "includes/clock"
--- @include "includes/dead_letter"
--- @include "includes/job_queue"
--- @include "includes/lapse"
--- @include "includes/numbers"
local e = open_job() or check_publish(ARGV[2]) if e then return e end
local dle, changed = use_dlq(ARGV[3], ARGV[4])
if dle then return dle end
if changed then return {'dlq', changed} end
local now = server_ms()
local ws
if ARGV[5] then
  ws = {}
  if redis.call('ZSCORE', K_WORKERS, ARGV[5]) then ws[1] = ARGV[5] end
else
  ws = redis.call('ZRANGEBYSCORE', K_WORKERS, '-inf', '(' .. int(now), 'LIMIT', 0, tonumber(ARGV[1]))
end
local rq, dl = 0, 0
for _, w in ipairs(ws) do
  local a, b = fail_worker(w, now)
  rq, dl = rq + a, dl + b
end
wake_woken(ARGV[2])
return {#ws, rq, dl}
