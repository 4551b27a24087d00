-- job_queue: a handle confirms the hand-offs that reached it (docs/jobs.md "Hand-off to claim()").
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: id, token pairs of jobs the handle received by hand-off. Their
-- entries leave feed.handed (the put's record, includes/hand_off.lua), so the
-- claims stay with the handle's callers under the queue's lease. A claim
-- that was given back meanwhile (its entry lapsed first) is not restored:
-- its holder's finish gets lost_claim. Returns how many entries went.
--- @include "includes/job_queue"
local e = open_job() if e then return e end
local m = {}
for i = 1, #ARGV - 1, 2 do m[#m + 1] = ARGV[i] .. '\0' .. ARGV[i + 1] end
if #m == 0 then return 0 end
return redis.call('ZREM', K_HANDED, unpack(m))
