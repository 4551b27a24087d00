-- client::create_feed and
-- client::create_or_open_feed.
-- Create Feed: SADD feeds (abort if present), the config hash, PUBLISH newfeed.
-- Create or open: a feed that exists is left as it is (config included)
-- when its type is the one asked for, and refused (wrong_feed_type) when not.
-- KEYS: layout admin: K_FEEDS, K_CONFIG, then every other key of the feed (from K_FEED_FIRST + 1).
-- ARGV[1] name  ARGV[2] type  ARGV[3] instance uuid  ARGV[4] newfeed channel
-- ARGV[5] 'create' or 'create_or_open'
-- ARGV[6..] config field, value, field, value, ...
-- Returns 1 when the feed was created, 0 when an existing one was opened.
--- @include "includes/acl"
--- @include "includes/errors"
--- @include "includes/feed_management"
local perm = check_classic_publish(ARGV[4])
if perm then return perm end
if redis.call('SADD', K_FEEDS, ARGV[1]) == 0 then
  if ARGV[5] ~= 'create_or_open' then
    return fail('feed_exists', 'the feed already exists')
  end
  local t = redis.call('HGET', K_CONFIG, 'type')
  if t then
    if t ~= ARGV[2] then
      return fail('wrong_feed_type', 'the feed exists with type ' .. t)
    end
    return 0
  end
  -- Listed without a type: every operation reports it missing. Made anew
  -- below when it has no keys; adopted, never wiped, when it holds data.
  local adopted = adopt_untyped_feed()
  if adopted then return adopted end
end
return write_new_feed()
