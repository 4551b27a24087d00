-- client::set_config,
-- set_config_json in cluster mode.
-- Set Config Value: HSET feed.config, PUBLISH conffeed; fails when the feed
-- has no type (cluster mode's existence rule, see cluster_create.lua).
-- KEYS: layout feed_admin (src/lua/layouts/feed_admin.lua): K_CONFIG only.
-- ARGV[1] name  ARGV[2] field  ARGV[3] value  ARGV[4] instance uuid  ARGV[5] conffeed channel
--- @include "includes/acl"
--- @include "includes/errors"
--- @include "includes/feed_management"
local perm = check_classic_publish(ARGV[5])
if perm then return perm end
if redis.call('HEXISTS', K_CONFIG, 'type') == 0 then
  return fail('feed_not_found', 'no such feed')
end
redis.call('HSET', K_CONFIG, ARGV[2], ARGV[3])
announce_config(ARGV[5], ARGV[1], ARGV[4])
return 1
