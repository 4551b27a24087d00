-- job_queue::run: a worker registers (worker liveness).
-- KEYS: layout job (src/lua/layouts/job.lua), then the dead-letter queue's (as jobs/fail.lua).
-- ARGV: 1 worker, 2 ttl_ms, 3 description (JSON, from the worker), 4 wake
-- channel, 5 dead-letter queue name as the caller knows it, 6 its wake
-- channel. Registers the worker until server time + ttl. A registration
-- that is still alive is refused ('worker_exists': another worker uses
-- the name); one that lapsed is failed first (fail_worker: the claims it
-- still holds are returned), so a name used again never hides a dead
-- worker's jobs. Returns {lapses_at (server ms), requeued, dead-lettered},
-- or {'dlq', name} as jobs/fail.lua.
--- @include "includes/acl"
--- @include "includes/clock"
--- @include "includes/dead_letter"
--- @include "includes/errors"
--- @include "includes/job_queue"
--- @include "includes/lapse"
--- @include "includes/tokens"
--- @include "includes/workers"
local e = open_job() or check_publish(ARGV[4]) if e then return e end
local dle, changed = use_dlq(ARGV[5], ARGV[6])
if dle then return dle end
if changed then return {'dlq', changed} end
local w, now = ARGV[1], server_ms()
if worker_alive(w, now) then
  return fail('worker_exists', 'a live worker is registered under this name')
end
local rq, dl = 0, 0
if redis.call('ZSCORE', K_WORKERS, w) then rq, dl = fail_worker(w, now) end
local exp = now + tonumber(ARGV[2])
redis.call('ZADD', K_WORKERS, exp, w)
redis.call('HSET', K_WORKER_INFO, w, ARGV[3])
redis.call('HSET', K_WORKER_JOBS, KEEP_FIELD, KEEP_VALUE)
wake_woken(ARGV[4])
return {exp, rq, dl}
