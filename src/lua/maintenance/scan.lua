-- job maintenance: find unaccounted jobs.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 cursor, 2 count. One HSCAN step over feed.items; returns
-- {next cursor, ids that are neither claimed nor stalled...}.
--- @include "includes/feed_config"
local e = open_feed('job') if e then return e end
local r = redis.call('HSCAN', K_ITEMS, ARGV[1], 'COUNT', tonumber(ARGV[2]))
local out = {r[1]}
local kv = r[2]
for i = 1, #kv, 2 do
  local id = kv[i]
  if not redis.call('ZSCORE', K_CLAIMED, id) and redis.call('SISMEMBER', K_STALLED, id) == 0 then
    out[#out + 1] = id
  end
end
return out
