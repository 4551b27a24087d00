-- sorted_feed::edit.
-- KEYS: layout feed (src/lua/layouts/feed.lua)
-- ARGV[1] id  ARGV[2] item  ARGV[3] feed.publish channel
--- @include "includes/acl"
--- @include "includes/change_log"
--- @include "includes/errors"
--- @include "includes/feed_config"
--- @include "includes/notify"
local err = open_feed('sorted_feed') or check_publish(ARGV[3])
if err then return err end
if redis.call('HEXISTS', K_ITEMS, ARGV[1]) == 0 then
  return fail('id_not_found', 'no such item')
end
redis.call('HSET', K_ITEMS, ARGV[1], ARGV[2])
local seq = redis.call('INCR', K_PUBLISHES)
record_change(ARGV[1], seq)
redis.call(NOTIFY, ARGV[3], ARGV[1] .. '\0' .. ARGV[2])
return 1
