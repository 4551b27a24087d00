-- sorted_feed::retract.
-- KEYS: layout feed (src/lua/layouts/feed.lua)
-- ARGV[1] id  ARGV[2] feed.retract channel. Returns 1 if removed, 0 if absent.
--- @include "includes/acl"
--- @include "includes/change_log"
--- @include "includes/feed_config"
--- @include "includes/notify"
--- @include "includes/numbers"
local err, conf = open_feed('sorted_feed', 'retraction_log')
if err then return err end
if redis.call('HEXISTS', K_ITEMS, ARGV[1]) == 0 then return 0 end
err = check_publish(ARGV[2])
if err then return err end
redis.call('LREM', K_IDS, 1, ARGV[1])
redis.call('HDEL', K_ITEMS, ARGV[1])
record_retracts({ARGV[1]}, publish_count(), conf_int(conf[2], 1000, 0), true)
redis.call(NOTIFY, ARGV[2], ARGV[1])
return 1
