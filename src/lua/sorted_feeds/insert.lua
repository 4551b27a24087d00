-- sorted_feed append/prepend/publish_before/publish_after.
-- KEYS: layout feed (src/lua/layouts/feed.lua)
-- ARGV[1] mode: 'end' | 'begin' | 'before' | 'after'   ARGV[2] relative id
-- ARGV[3] item  ARGV[4] feed.publish channel  ARGV[5] feed.position channel
-- Returns the new id.
--- @include "includes/acl"
--- @include "includes/change_log"
--- @include "includes/errors"
--- @include "includes/feed_config"
--- @include "includes/notify"
local err = open_feed('sorted_feed') or check_publish(ARGV[4], ARGV[5])
if err then return err end
local mode, rel, item = ARGV[1], ARGV[2], ARGV[3]
if (mode == 'before' or mode == 'after') and redis.call('HEXISTS', K_ITEMS, rel) == 0 then
  return fail('id_not_found', 'no item with the relative id')
end
local id = tostring(redis.call('INCR', K_IDINCR))
local pos
if mode == 'end' then
  redis.call('RPUSH', K_IDS, id)
  pos = ':end'
elseif mode == 'begin' then
  redis.call('LPUSH', K_IDS, id)
  pos = 'begin:'
else
  local where = 'AFTER'
  if mode == 'before' then where = 'BEFORE' end
  -- Nothing is written before this can fail (only the id counter moved).
  if redis.call('LINSERT', K_IDS, where, rel, id) < 0 then
    return fail('id_not_found', 'the relative id is not in the list')
  end
  if mode == 'before' then pos = ':' .. rel else pos = rel .. ':' end
end
redis.call('HSET', K_ITEMS, id, item)
local seq = redis.call('INCR', K_PUBLISHES)
record_change(id, seq)
redis.call(NOTIFY, ARGV[4], id .. '\0' .. item)
redis.call(NOTIFY, ARGV[5], id .. '\0' .. pos)
return id
