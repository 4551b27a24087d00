-- layout: queue (src/lua/layouts/queue.lua). queue::length, get_ids.
-- ARGV: 1 'len' | 'ids'.
local e = open_feed('queue') if e then return e end
if ARGV[1] == 'len' then return redis.call('LLEN', K_IDS) end
return redis.call('LRANGE', K_IDS, 0, -1)
