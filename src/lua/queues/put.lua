-- queue::put, put_many.
-- KEYS: layout queue (src/lua/layouts/queue.lua)
-- ARGV: 1 now_ms, 2 high ('1'/'0'), 3 wake channel, 4.. items. Returns ids.
--- @include "includes/acl"
--- @include "includes/feed_config"
--- @include "includes/queue_items"
--- @include "includes/wake"
local e = open_feed('queue') or check_publish(ARGV[3]) if e then return e end
local n = #ARGV - 3
if n < 1 then return {} end
local ids = store_items(4, tonumber(ARGV[1]), ARGV[2] == '1')
redis.call('INCRBY', K_PUBLISHES, n)
wake(K_SLEEPERS, ARGV[3], n)
return ids
