-- job_queue::get_job, get_jobs.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: the ids to read; none: every job (feed.items and
-- feed.scheduled_items). Returns 14 values per job that exists
-- (includes/describe.lua describe), in one atomic snapshot. Read-only.
--- @include "includes/describe"
--- @include "includes/feed_config"
local e = open_feed('job') if e then return e end
local ids = ARGV
if #ids == 0 then
  ids = redis.call('HKEYS', K_ITEMS)
  local s = redis.call('HKEYS', K_SCHED_ITEMS)
  for i = 1, #s do ids[#ids + 1] = s[i] end
end
local out = {}
for i = 1, #ids do describe(ids[i], out) end
return out
