-- client::delete_feed.
-- Delete Feed: SREM feeds (fail if absent), delete every key, PUBLISH delfeed.
-- KEYS: layout admin: K_FEEDS, K_CONFIG, then every other key of the feed (from K_FEED_FIRST + 1).
-- ARGV[1] name  ARGV[2] instance uuid  ARGV[3] delfeed channel
--- @include "includes/acl"
--- @include "includes/errors"
local perm = check_classic_publish(ARGV[3])
if perm then return perm end
if redis.call('SREM', K_FEEDS, ARGV[1]) == 0 then
  return fail('feed_not_found', 'no such feed')
end
for i = K_FEED_FIRST, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('PUBLISH', ARGV[3], ARGV[1] .. '\0' .. ARGV[2])
return 1
