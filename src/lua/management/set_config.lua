-- client::set_config, set_config_json.
-- Set Config Value: HSET feed.config, PUBLISH conffeed (fail if no feed).
-- KEYS: layout admin (src/lua/layouts/admin.lua): K_FEEDS, K_CONFIG only.
-- ARGV[1] name  ARGV[2] field  ARGV[3] value  ARGV[4] instance uuid  ARGV[5] conffeed channel
--- @include "includes/acl"
--- @include "includes/errors"
--- @include "includes/feed_management"
local perm = check_classic_publish(ARGV[5])
if perm then return perm end
if redis.call('SISMEMBER', K_FEEDS, ARGV[1]) == 0 then
  return fail('feed_not_found', 'no such feed')
end
redis.call('HSET', K_CONFIG, ARGV[2], ARGV[3])
announce_config(ARGV[5], ARGV[1], ARGV[4])
return 1
