-- queue::get (coalesced getters).
-- KEYS: layout queue (src/lua/layouts/queue.lua)
-- ARGV: 1 n. Pops up to n ids (next out first), takes their items.
-- Returns {id1, item1, id2, item2, ...}. Marks sleepers when short.
--- @include "includes/feed_config"
local e = open_feed('queue') if e then return e end
local n = tonumber(ARGV[1])
local popped = redis.call('RPOP', K_IDS, n)
if not popped then redis.call('SET', K_SLEEPERS, '1') return {} end
if #popped < n then redis.call('SET', K_SLEEPERS, '1') end
local items = redis.call('HMGET', K_ITEMS, unpack(popped))
redis.call('HDEL', K_ITEMS, unpack(popped))
local out, seen = {}, {}
for i = 1, #popped do
  local id = popped[i]
  if items[i] and not seen[id] then
    seen[id] = true
    out[#out + 1] = id
    out[#out + 1] = items[i]
  end
end
return out
