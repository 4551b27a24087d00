-- layout: job (src/lua/layouts/job.lua). job_queue::run (one call per round of the runner).
-- KEYS: the job layout, then result keys (KEYS[K_FIRST_RESULT..]).
-- ARGV: 1 now_ms, 2 worker, 3 how many jobs to claim, 4 job.finish
-- channel, then per finished job id, token, result key index in KEYS
-- (0: none), result. Finishes those jobs as jobs/finish.lua does, then,
-- while the worker's registration is alive, claims up to n jobs for it as
-- jobs/claim.lua does (recorded under the worker), so a runner finishes a
-- job and takes the next in one round trip. Returns {alive (1 or 0: the
-- registration lapsed or was failed, nothing claimed: register again), m,
-- the m finish statuses, then claim_jobs' reply (empty when n is 0)}.
local e = open_claim('result_ttl_ms') if e then return e end
local now, worker, want = tonumber(ARGV[1]), ARGV[2], tonumber(ARGV[3])
local m = (#ARGV - 4) / 4
local st = finish_jobs(ARGV[4], 5, m, conf_int(Q.conf[5], 300000, 1), worker)
local alive = worker_alive(worker, server_ms())
local out = {alive and 1 or 0, m}
for j = 1, m do out[j + 2] = st[j] end
if alive and want > 0 then
  local c = claim_jobs(now, want, worker)
  for i = 1, #c do out[m + 2 + i] = c[i] end
end
return out
