-- feed::publish.
-- KEYS: layout feed (src/lua/layouts/feed.lua)
-- ARGV[1] id  ARGV[2] item  ARGV[3] now (ms since epoch)
-- ARGV[4] feed.publish channel  ARGV[5] feed.edit channel  ARGV[6] feed.retract channel
-- Returns {edited (0/1), {evicted ids...}}.
--- @include "includes/change_log"
--- @include "includes/feed_config"
--- @include "includes/numbers"
local err, conf = open_feed('feed', 'max_length', 'retraction_log')
if err then return err end
local id, item = ARGV[1], ARGV[2]
local edited = redis.call('ZSCORE', K_IDS, id) ~= false
local max_length = conf_int(conf[2], 0, 0)
local log_max = conf_int(conf[3], 1000, 0)
-- Arguments of redis.call are strings where they can be: Redis turns each
-- Lua number argument into text with snprintf("%.17g"), which costs as much
-- as a cheap command (docs/benchmarks.md); a constant string or ARGV's own
-- text costs nothing.
--
-- A new id at max_length evicts the oldest (at most 1000 per publish, so a
-- lowered max_length is reached over several publishes); in a full feed,
-- the one oldest. Read first: the permission check below must come before
-- any write.
local evicted = {}
if not edited and max_length > 0 then
  local excess = redis.call('ZCARD', K_IDS) - max_length + 1
  if excess > 1000 then excess = 1000 end
  if excess == 1 then
    evicted = redis.call('ZRANGE', K_IDS, '0', '0')
  elseif excess > 0 then
    evicted = redis.call('ZRANGE', K_IDS, '0', excess - 1)
  end
end
if edited then
  err = check_publish(ARGV[5])
elseif #evicted > 0 then
  err = check_publish(ARGV[4], ARGV[6])
else
  err = check_publish(ARGV[4])
end
if err then return err end
-- The score: the publish time, strictly after the feed's newest item (see
-- docs/feeds.md section 3 for why). When the publish time is later than
-- that, ZADD gets ARGV[3] itself; otherwise the newest score plus 1/1024 as
-- a Lua number, which Redis writes with %.17g: text that round-trips, so it
-- stores exactly this double. Reading the newest score costs about 2 us a
-- publish; ZREVRANGE 0 0 measured the same.
local score = ARGV[3]
local newest = redis.call('ZRANGE', K_IDS, '-1', '-1', 'WITHSCORES')[2]
if newest then
  local after = tonumber(newest) + 1 / 1024
  if after > tonumber(score) then score = after end
end
-- This publish's sequence number; evictions are announced before it.
local seq = redis.call('INCR', K_PUBLISHES)
if #evicted > 0 then
  redis.call('ZREM', K_IDS, unpack(evicted))
  redis.call('HDEL', K_ITEMS, unpack(evicted))
  record_retracts(evicted, seq - 1, log_max, seq % 64 == 0)
  for i = 1, #evicted do redis.call(NOTIFY, ARGV[6], evicted[i]) end
end
redis.call('ZADD', K_IDS, score, id)
redis.call('HSET', K_ITEMS, id, item)
record_change(id, seq)
if edited then
  redis.call(NOTIFY, ARGV[5], id .. '\0' .. item)
else
  redis.call(NOTIFY, ARGV[4], id .. '\0' .. item)
end
return {edited and 1 or 0, evicted}
