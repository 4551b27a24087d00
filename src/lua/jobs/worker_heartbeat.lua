-- job_queue::run: a worker's heartbeat (worker liveness).
-- KEYS: layout job (src/lua/layouts/job.lua), then the dead-letter queue's (as jobs/fail.lua).
-- ARGV: 1 worker, 2 ttl_ms, 3 now_ms (the claims' new time, the claimer's
-- clock as at claim), 4 wake channel, 5 dead-letter queue name as the
-- caller knows it, 6 its wake channel, then the claims the worker holds as
-- id, token pairs. While the registration is alive: renews it to server
-- time + ttl and renews the lease of each named claim that is still
-- current; one that is not (lapsed and reclaimed, aborted, released,
-- finished by another client) is reported, and its record goes if it is
-- still this worker's. Returns {'ok', lapses_at, id, token, ... of the
-- claims lost}. When the registration lapsed (or was failed), the worker
-- is failed now (its recorded claims returned, as fail_worker) and must
-- register again: {'lapsed', requeued, dead-lettered}. {'dlq', name} as
-- jobs/fail.lua.
--- @include "includes/acl"
--- @include "includes/clock"
--- @include "includes/dead_letter"
--- @include "includes/job_queue"
--- @include "includes/lapse"
--- @include "includes/tokens"
--- @include "includes/workers"
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
local renew, lost = {}, {}
for i = 7, #ARGV - 1, 2 do
  local id, token = ARGV[i], ARGV[i + 1]
  if claim_current(id, token) then
    renew[#renew + 1] = ARGV[3]
    renew[#renew + 1] = id
  else
    out[#out + 1] = id
    out[#out + 1] = token
    lost[#lost + 1] = id
    lost[#lost + 1] = token
  end
end
if #renew > 0 then redis.call('ZADD', K_CLAIMED, 'XX', unpack(renew)) end
for i = 1, #lost, 2 do
  if redis.call('HGET', K_WORKER_JOBS, lost[i]) == worker_record(w, lost[i + 1]) then
    redis.call('HDEL', K_WORKER_JOBS, lost[i])
  end
end
return out
