-- feed::get_all, sorted_feed::get_all.
-- KEYS: layout feed (src/lua/layouts/feed.lua)
-- Get All (the contract's "Get IDs" + "Get Items" as one snapshot).
-- ARGV[1] expected type: 'feed' (zset, oldest first) or 'sorted_feed' (list).
--- @include "includes/feed_config"
local err = open_feed(ARGV[1])
if err then return err end
local ids
if ARGV[1] == 'feed' then
  ids = redis.call('ZRANGE', K_IDS, 0, -1)
else
  ids = redis.call('LRANGE', K_IDS, 0, -1)
end
local out = {}
-- HMGET in chunks: unpack() has a stack limit.
for i = 1, #ids, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #ids) do chunk[#chunk + 1] = ids[j] end
  local items = redis.call('HMGET', K_ITEMS, unpack(chunk))
  for j = 1, #chunk do
    if items[j] then
      out[#out + 1] = chunk[j]
      out[#out + 1] = items[j]
    end
  end
end
return out
