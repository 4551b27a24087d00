-- job_queue::get_scheduled, get_dead_letters.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 'scheduled' | 'stalled', 2 cursor ('' or '0': the start),
-- 3 count. Returns {next cursor ('' at the end), then 14 values per job
-- (includes/describe.lua describe)}: scheduled jobs by rank in run_at order, dead
-- letters by SSCAN of feed.stalled. Read-only.
--- @include "includes/describe"
--- @include "includes/feed_config"
--- @include "includes/schedule"
local e = open_feed('job') if e then return e end
local count = tonumber(ARGV[3])
local out = {''}
local ids = {}
if ARGV[1] == 'scheduled' then
  local from = tonumber(ARGV[2]) or 0
  local ms = redis.call('ZRANGE', K_SCHEDULED, from, from + count - 1)
  for i = 1, #ms do ids[i] = string.sub(ms[i], SEQ_WIDTH + 1) end
  if #ms == count and redis.call('ZCARD', K_SCHEDULED) > from + count then
    out[1] = tostring(from + count)
  end
else
  local cur = ARGV[2]
  if cur == '' then cur = '0' end
  local r = redis.call('SSCAN', K_STALLED, cur, 'COUNT', count)
  if r[1] ~= '0' then out[1] = r[1] end
  ids = r[2]
end
for i = 1, #ids do describe(ids[i], out) end
return out
