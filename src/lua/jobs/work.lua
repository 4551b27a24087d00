-- job_queue::run (one call per round of the runner).
-- KEYS: layout job (src/lua/layouts/job.lua), then result keys (KEYS[K_FIRST_RESULT..]).
-- ARGV: 1 now_ms, 2 worker, 3 how many jobs to claim, 4 job.finish
-- channel, 5 idle slots offered for hand-off when the queue runs dry (-1:
-- none, the worker has no taker entry; 0: none, its entry goes), 6 how
-- long an offer lasts (ms), then per finished job id, token, result key
-- index in KEYS (0: none), result. Finishes those jobs as jobs/finish.lua does, then,
-- while the worker's registration is alive, claims up to n jobs for it as
-- jobs/claim.lua does (recorded under the worker), so a runner finishes a
-- job and takes the next in one round trip. Returns {alive (1 or 0: the
-- registration lapsed or was failed, nothing claimed: register again), m,
-- the m finish statuses, then claim_jobs' reply (empty when n is 0)}.
-- When the line runs short, the hand-offs to job_queue handles that
-- lapsed unconfirmed go back and are claimed too (reclaim_handed).
--- @include "includes/claim_control"
--- @include "includes/claims"
--- @include "includes/clock"
--- @include "includes/finish"
--- @include "includes/hand_off"
--- @include "includes/job_queue"
--- @include "includes/numbers"
--- @include "includes/workers"
local e = open_claim('result_ttl_ms') if e then return e end
local now, worker, want = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local m = (#ARGV - 6) / 4
local st = finish_jobs(ARGV[4], 7, m, conf_int(Q.conf[5], 300000, 1))
local srv = server_ms()
local alive = worker_alive(worker, srv)
local out = {alive and 1 or 0, m}
for j = 1, m do out[j + 2] = st[j] end
local got, dry = 0, false
if alive and want > 0 then
  local c = claim_jobs(now, want, worker)
  if #c % 4 == 1 then
    c = cold.reclaim_handed(c, now, want, worker, srv, 'feed.wake:' .. string.sub(ARGV[4], 12))
  end
  for i = 1, #c do out[m + 2 + i] = c[i] end
  got, dry = math.floor(#c / 4), #c % 4 == 1
end
offer_slots(worker, alive and tonumber(ARGV[5]) or 0, got, dry, srv, tonumber(ARGV[6]), '')
return out
