-- job_queue::run: a runner gives back the claims it never learnt of (docs/jobs.md "Hand-off").
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 worker (or a job_queue handle's taker name), 2 wake channel,
-- 3 '1' when the taker leaves for good (a handle's close: the records of
-- the claims it knows go too, the claims stay with their holders; '0'
-- keeps them), then id, token pairs of every claim the taker knows. Each
-- claim recorded under the taker that it does not know (a hand-off message
-- lost while its subscriber reconnected, a round whose reply was lost)
-- loses its record, and goes back to the front of the line with no
-- failure counted if it is still current. Returns how many went back.
--- @include "includes/acl"
--- @include "includes/give_back"
--- @include "includes/job_queue"
--- @include "includes/workers"
local e = open_job() or check_publish(ARGV[2]) if e then return e end
local known = {}
for i = 4, #ARGV - 1, 2 do known[ARGV[i]] = ARGV[i + 1] end
local leaving = ARGV[3] == '1'
local unknown, gone = {}, {}
local cs = worker_claims(ARGV[1])
for i = 1, #cs do
  local c = cs[i]
  if leaving and known[c[1]] == c[2] then
    gone[#gone + 1] = c[1]
  elseif known[c[1]] ~= c[2] then
    unknown[#unknown + 1] = c
    gone[#gone + 1] = c[1]
  end
end
if #gone > 0 then redis.call('HDEL', K_WORKER_JOBS, unpack(gone)) end
return give_back(unknown, ARGV[2])
