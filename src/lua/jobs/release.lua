-- job_queue: claims made for waiters that went away.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 wake channel, then id, token pairs in claim order. Un-claims
-- jobs claimed for waiters that went away: back to the front of the line,
-- no failure counted; a put held for one of them is applied then.
-- Returns how many.
--- @include "includes/give_back"
--- @include "includes/job_queue"
local e = open_job() if e then return e end
local cs = {}
for j = 1, (#ARGV - 1) / 2 do cs[j] = {ARGV[2 * j], ARGV[2 * j + 1]} end
return give_back(cs, ARGV[1])
