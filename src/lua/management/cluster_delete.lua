-- client::delete_feed
-- in cluster mode, before SREM feeds.
-- Deletes every key of the feed; PUBLISH delfeed when it had a type.
-- KEYS: layout feed_admin: K_CONFIG, then every other key of the feed.
-- ARGV[1] name  ARGV[2] instance uuid  ARGV[3] delfeed channel
-- Returns 1 when the feed had a type, 0 when not (the caller's SREM then
-- decides between a name listed without a type and no feed at all).
--- @include "includes/acl"
local perm = check_classic_publish(ARGV[3])
if perm then return perm end
local existed = redis.call('HEXISTS', K_CONFIG, 'type')
for i = K_FEED_FIRST, #KEYS do redis.call('UNLINK', KEYS[i]) end
if existed == 1 then
  redis.call('PUBLISH', ARGV[3], ARGV[1] .. '\0' .. ARGV[2])
end
return existed
