-- layout: job (src/lua/layouts/job.lua). job_queue::run: a runner gives back the claims it never learnt of (docs/jobs.md "Hand-off").
-- ARGV: 1 worker, 2 wake channel, then id, token pairs of every claim the
-- runner knows. Each claim recorded under the worker that the runner does
-- not know (a hand-off message lost while its subscriber reconnected, a
-- round whose reply was lost) loses its record, and goes back to the
-- front of the line with no failure counted if it is still current.
-- Returns how many went back.
local e = open_job() or check_publish(ARGV[2]) if e then return e end
local known = {}
for i = 3, #ARGV - 1, 2 do known[ARGV[i]] = ARGV[i + 1] end
local unknown, gone = {}, {}
local cs = worker_claims(ARGV[1])
for i = 1, #cs do
  local c = cs[i]
  if known[c[1]] ~= c[2] then
    unknown[#unknown + 1] = c
    gone[#gone + 1] = c[1]
  end
end
if #gone > 0 then redis.call('HDEL', K_WORKER_JOBS, unpack(gone)) end
return give_back(unknown, ARGV[2])
