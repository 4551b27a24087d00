-- layout: admin (src/lua/layouts/admin.lua). client::create_feed.
-- Create Feed: SADD feeds (abort if present), the config hash, PUBLISH newfeed.
-- KEYS: K_FEEDS, K_CONFIG, then every other key of the feed (from K_FEED_FIRST + 1).
-- ARGV[1] name  ARGV[2] type  ARGV[3] instance uuid  ARGV[4] newfeed channel
-- ARGV[5..] config field, value, field, value, ...
local perm = check_publish(ARGV[4])
if perm then return perm end
if redis.call('SADD', K_FEEDS, ARGV[1]) == 0 then
  return fail('feed_exists', 'the feed already exists')
end
-- Leftovers of a feed that another client deleted only partly.
for i = K_FEED_FIRST, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('HSET', K_CONFIG, 'type', ARGV[2])
for i = 5, #ARGV, 2 do redis.call('HSET', K_CONFIG, ARGV[i], ARGV[i + 1]) end
redis.call('PUBLISH', ARGV[4], ARGV[1] .. '\0' .. ARGV[3])
return 1
