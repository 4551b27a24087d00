-- job_queue: which hand-offs a handle still holds (docs/jobs.md "Hand-off to claim()").
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 the handle's taker name, then id, token pairs of jobs it
-- received by hand-off. Returns the ids among them whose claim record is
-- no longer `taker\0token`: their claims ended (finished, failed or given
-- back through another handle or process), so the handle forgets them.
-- Reads only.
--- @include "includes/job_queue"
--- @include "includes/workers"
local e = open_job() if e then return e end
local n = (#ARGV - 1) / 2
if n < 1 then return {} end
local ids = {}
for i = 1, n do ids[i] = ARGV[2 * i] end
local recs = redis.call('HMGET', K_WORKER_JOBS, unpack(ids))
local out = {}
for i = 1, n do
  if recs[i] ~= worker_record(ARGV[1], ARGV[2 * i + 1]) then out[#out + 1] = ids[i] end
end
return out
