-- layout: job (src/lua/layouts/job.lua). job_queue::put, put_many.
-- ARGV: 1 now_ms, 2 high, 3 wake channel, 4.. items. Returns ids.
-- Contract "Put": LPUSH/RPUSH ids, HSET items, ZADD published, INCR
-- publishes (the contract's high-priority put forgets the INCR; we count
-- every put).
local e = open_job('published') or check_publish(ARGV[3]) if e then return e end
local n = #ARGV - 3
if n < 1 then return {} end
local ids = store_items(4, tonumber(ARGV[1]), ARGV[2] == '1')
if Q.conf[3] == '1' then
  local z = {}
  for i = 1, n do z[2 * i - 1] = ARGV[1]; z[2 * i] = ids[i] end
  redis.call('ZADD', K_PUBLISHED, unpack(z))
end
redis.call('INCRBY', K_PUBLISHES, n)
wake(K_SLEEPERS, ARGV[3], n)
if Q.events then
  for i = 1, n do emit('put', ids[i]) end
end
return ids
