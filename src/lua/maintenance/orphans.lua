-- job maintenance: orphaned extension state.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 cursor, 2 count, 3 'attempts' | 'jobmeta'. One HSCAN step over
-- feed.attempts (tokens) or feed.jobmeta (job records), removing the
-- entries of jobs that no longer exist (finished or retracted with plain
-- commands). A scheduled job exists too (its item is in
-- feed.scheduled_items): its token must outlive the wait, or a stale
-- worker's token would be handed out again. Returns {next cursor, removed}.
--- @include "includes/feed_config"
local e = open_feed('job') if e then return e end
local key = K_ATTEMPTS
if ARGV[3] == 'jobmeta' then key = K_META end
local r = redis.call('HSCAN', key, ARGV[1], 'COUNT', tonumber(ARGV[2]))
local kv = r[2]
local gone = {}
for i = 1, #kv, 2 do
  local id = kv[i]
  if string.byte(id, 1) ~= 0 and redis.call('HEXISTS', K_ITEMS, id) == 0
     and redis.call('HEXISTS', K_SCHED_ITEMS, id) == 0 then
    gone[#gone + 1] = id
  end
end
if #gone > 0 then redis.call('HDEL', key, unpack(gone)) end
return {r[1], #gone}
