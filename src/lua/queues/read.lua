-- queue::length, get_ids.
-- KEYS: layout queue (src/lua/layouts/queue.lua)
-- ARGV: 1 'len' | 'ids'.
--- @include "includes/feed_config"
local e = open_feed('queue') if e then return e end
if ARGV[1] == 'len' then return redis.call('LLEN', K_IDS) end
return redis.call('LRANGE', K_IDS, 0, -1)
