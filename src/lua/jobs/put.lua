-- layout: job (src/lua/layouts/job.lua). job_queue::put, put_many.
-- ARGV: 1 now_ms, 2 high, 3 wake channel, 4.. items. Returns ids.
-- Contract "Put": LPUSH/RPUSH ids, HSET items, ZADD published, INCR
-- publishes (the contract's high-priority put forgets the INCR; we count
-- every put). When a claimer sleeps (feed.sleepers), the jobs go to idle
-- runners first (hand-off, layouts/job_engine.lua: claimed for them and
-- sent on their channels); only what is left wakes the sleepers. A busy
-- queue pays one EXISTS for this, as it paid one DEL for the wake-up.
local e = open_job('published') or check_publish(ARGV[3]) if e then return e end
local n = #ARGV - 3
if n < 1 then return {} end
local sleeping = redis.call('EXISTS', K_SLEEPERS) == 1
local takers = sleeping and cold.live_takers(n)
local ids = store_items(4, tonumber(ARGV[1]), ARGV[2] == '1')
if Q.conf[3] == '1' then
  local z = {}
  for i = 1, n do z[2 * i - 1] = ARGV[1]; z[2 * i] = ids[i] end
  redis.call('ZADD', K_PUBLISHED, unpack(z))
end
redis.call('INCRBY', K_PUBLISHES, n)
if Q.events then
  for i = 1, n do emit('put', ids[i]) end
end
if sleeping then
  Q.woken = n
  if #takers > 0 then Q.woken = Q.woken - cold.hand_off(takers, tonumber(ARGV[1]), n) end
  if Q.woken > 0 then wake(K_SLEEPERS, ARGV[3], Q.woken) end
end
return ids
