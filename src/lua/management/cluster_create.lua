-- client::create_feed
-- and client::create_or_open_feed in cluster mode, after SADD feeds.
-- A feed exists when its config hash has a type (cluster mode keeps the
-- rule: a feed with a type is listed in `feeds`, since create lists it
-- first and delete unlists it last).
-- KEYS: layout feed_admin: K_CONFIG, then every other key of the feed.
-- ARGV[1] name  ARGV[2] type  ARGV[3] instance uuid  ARGV[4] newfeed channel
-- ARGV[5] 'create' or 'create_or_open'
-- ARGV[6] '1' when the name was listed before this create's SADD, else '0'
-- ARGV[7..] config field, value, field, value, ...
-- Returns 1 when the feed was created, 0 when an existing one was opened.
--- @include "includes/acl"
--- @include "includes/errors"
--- @include "includes/feed_management"
local perm = check_classic_publish(ARGV[4])
if perm then return perm end
local t = redis.call('HGET', K_CONFIG, 'type')
if t then
  if ARGV[5] ~= 'create_or_open' then
    return fail('feed_exists', 'the feed already exists')
  end
  if t ~= ARGV[2] then
    return fail('wrong_feed_type', 'the feed exists with type ' .. t)
  end
  return 0
end
-- No type. Not listed before: made anew, leftovers deleted, as on one
-- server. Listed: made anew when it has no keys, adopted when it holds
-- data (a plain client made it).
if ARGV[6] == '1' then
  local adopted = adopt_untyped_feed()
  if adopted then return adopted end
end
return write_new_feed()
