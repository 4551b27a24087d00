-- layout: queue (src/lua/layouts/queue.lua). queue::put, put_many.
-- ARGV: 1 now_ms, 2 high ('1'/'0'), 3 wake channel, 4.. items. Returns ids.
local e = open_feed('queue') or check_publish(ARGV[3]) if e then return e end
local n = #ARGV - 3
if n < 1 then return {} end
local ids = new_ids(K_IDINCR, n, tonumber(ARGV[1]))
local h = {}
for i = 1, n do h[2 * i - 1] = ids[i]; h[2 * i] = ARGV[3 + i] end
push(K_IDS, ids, ARGV[2] == '1')
redis.call('HSET', K_ITEMS, unpack(h))
redis.call('INCRBY', K_PUBLISHES, n)
wake(K_SLEEPERS, ARGV[3], n)
return ids
