-- queue: items got for waiters that went away.
-- KEYS: layout queue (src/lua/layouts/queue.lua)
-- ARGV: 1 wake channel, then id, item pairs in the order they were got.
-- Puts them back at the front of the line, first pair next out.
--- @include "includes/feed_config"
--- @include "includes/wake"
local e = open_feed('queue') if e then return e end
local m = (#ARGV - 1) / 2
if m < 1 then return 0 end
local h, r = {}, {}
for j = 1, m do h[2 * j - 1] = ARGV[2 * j]; h[2 * j] = ARGV[2 * j + 1] end
for j = m, 1, -1 do r[#r + 1] = ARGV[2 * j] end
redis.call('HSET', K_ITEMS, unpack(h))
redis.call('RPUSH', K_IDS, unpack(r))
wake_if_allowed(K_SLEEPERS, ARGV[1], m)
return m
