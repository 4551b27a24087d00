-- layout: feed (src/lua/layouts/feed.lua). feed::publish.
-- ARGV[1] id  ARGV[2] item  ARGV[3] now (ms since epoch)
-- ARGV[4] feed.publish channel  ARGV[5] feed.edit channel  ARGV[6] feed.retract channel
-- Returns {edited (0/1), {evicted ids...}}.
local err, conf = open_feed('feed', 'max_length', 'retraction_log')
if err then return err end
local id, item = ARGV[1], ARGV[2]
local edited = redis.call('ZSCORE', K_IDS, id) ~= false
-- A max_length that is no whole number (written with plain commands) is
-- unset: it must be usable as a rank below.
local max_length = conf_int(conf[2], 0, 0)
local log_max = tonumber(conf[3]) or 1000
-- The score: the publish time, strictly after the feed's newest item (see
-- docs/feeds.md section 3 for why). It goes to ZADD as a Lua number: Redis
-- turns number arguments into text that round-trips exactly (%.17g; newer
-- servers an integer or shortest form), so it stores exactly this double
-- without a string.format here.
--
-- A new id at max_length evicts the oldest (at most 1000 per publish, so a
-- lowered max_length is reached over several publishes). One read answers
-- both questions when the feed is full: the ids from rank max_length - 1
-- on are as many as this publish must evict (one, in a full feed), and the
-- last of them is the newest, unless the range stopped short of the end
-- (more than 1000 to evict). Only counted here: which ids leave is read
-- by ZPOPMIN after the permission check, which must come before any write.
local excess, newest = 0, nil
if not edited and max_length > 0 then
  local tail = redis.call('ZRANGE', K_IDS, max_length - 1, max_length + 999, 'WITHSCORES')
  local n = #tail / 2
  if n > 1000 then excess = 1000 else excess = n end
  if n > 0 and n <= 1000 then newest = tail[#tail] end
end
if edited then
  err = check_publish(ARGV[5])
elseif excess > 0 then
  err = check_publish(ARGV[4], ARGV[6])
else
  err = check_publish(ARGV[4])
end
if err then return err end
-- Otherwise (an edit, no max_length, a feed not full) the newest score is
-- read on its own: about 2 us a publish; ZREVRANGE 0 0 measured the same.
if not newest then newest = redis.call('ZRANGE', K_IDS, -1, -1, 'WITHSCORES')[2] end
local score = tonumber(ARGV[3])
if newest then
  local after = tonumber(newest) + 1 / 1024
  if after > score then score = after end
end
-- This publish's sequence number; evictions are announced before it.
local seq = redis.call('INCR', K_PUBLISHES)
-- The oldest `excess` ids leave in one call: ZPOPMIN takes them lowest
-- score first (id then score, pairwise).
local evicted = {}
if excess > 0 then
  local popped = redis.call('ZPOPMIN', K_IDS, excess)
  for i = 1, #popped, 2 do evicted[#evicted + 1] = popped[i] end
end
if #evicted > 0 then
  redis.call('HDEL', K_ITEMS, unpack(evicted))
  record_retracts(evicted, seq - 1, log_max, seq % 64 == 0)
  for i = 1, #evicted do redis.call('PUBLISH', ARGV[6], evicted[i]) end
end
redis.call('ZADD', K_IDS, score, id)
redis.call('HSET', K_ITEMS, id, item)
record_change(id, seq)
if edited then
  redis.call('PUBLISH', ARGV[5], id .. '\0' .. item)
else
  redis.call('PUBLISH', ARGV[4], id .. '\0' .. item)
end
return {edited and 1 or 0, evicted}
