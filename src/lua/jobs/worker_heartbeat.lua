-- layout: job (src/lua/layouts/job.lua). job_queue::run: a worker's heartbeat (spec 003 keepWorkerAlive).
-- KEYS: the job layout, then the dead-letter queue's (as jobs/fail.lua).
-- ARGV: 1 worker, 2 ttl_ms, 3 now_ms (the claims' new time, the claimer's
-- clock as at claim), 4 wake channel, 5 dead-letter queue name as the
-- caller knows it, 6 its wake channel. While the registration is alive:
-- renews it to server time + ttl and renews the lease of every claim the
-- worker holds; a recorded claim that is no longer current (lapsed and
-- reclaimed, aborted, released, finished by another client) is dropped
-- from the record and reported. Returns {'ok', lapses_at, id, token, ...
-- of the claims lost}. When the registration lapsed (or was failed), the
-- worker is failed now (its claims returned, as fail_worker) and must
-- register again: {'lapsed', requeued, dead-lettered}. {'dlq', name} as
-- jobs/fail.lua.
local e = open_job() or check_publish(ARGV[4]) if e then return e end
local dle, changed = use_dlq(ARGV[5], ARGV[6])
if dle then return dle end
if changed then return {'dlq', changed} end
local w, now = ARGV[1], server_ms()
if not worker_alive(w, now) then
  local rq, dl = fail_worker(w, now)
  wake_woken(ARGV[4])
  return {'lapsed', rq, dl}
end
local exp = now + tonumber(ARGV[2])
redis.call('ZADD', K_WORKERS, 'XX', exp, w)
local out = {'ok', exp}
local cs = worker_claims(w)
for i = 1, #cs do
  local c = cs[i]
  if claim_current(c[1], c[2]) then
    redis.call('ZADD', K_CLAIMED, 'XX', ARGV[3], c[1])
  else
    redis.call('ZREM', K_WORKER_CLAIMS, c[3])
    out[#out + 1] = c[1]
    out[#out + 1] = c[2]
  end
end
return out
