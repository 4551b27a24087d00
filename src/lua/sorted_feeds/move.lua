-- sorted_feed::move.
-- KEYS: layout feed (src/lua/layouts/feed.lua)
-- ARGV[1] id  ARGV[2] mode: 'end' | 'begin' | 'before' | 'after'
-- ARGV[3] relative id  ARGV[4] feed.position channel
--- @include "includes/acl"
--- @include "includes/errors"
--- @include "includes/feed_config"
--- @include "includes/notify"
local err = open_feed('sorted_feed') or check_publish(ARGV[4])
if err then return err end
local id, mode, rel = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HEXISTS', K_ITEMS, id) == 0 then
  return fail('id_not_found', 'no such item')
end
local pos
if mode == 'before' or mode == 'after' then
  if rel == id then
    return fail('invalid_argument', 'an item cannot move relative to itself')
  end
  if redis.call('HEXISTS', K_ITEMS, rel) == 0 or not redis.call('LPOS', K_IDS, rel) then
    return fail('id_not_found', 'no item with the relative id')
  end
  local where = 'AFTER'
  if mode == 'before' then where = 'BEFORE' end
  redis.call('LREM', K_IDS, 1, id)
  redis.call('LINSERT', K_IDS, where, rel, id)
  if mode == 'before' then pos = ':' .. rel else pos = rel .. ':' end
elseif mode == 'begin' then
  redis.call('LREM', K_IDS, 1, id)
  redis.call('LPUSH', K_IDS, id)
  pos = 'begin:'
else
  redis.call('LREM', K_IDS, 1, id)
  redis.call('RPUSH', K_IDS, id)
  pos = ':end'
end
redis.call(NOTIFY, ARGV[4], id .. '\0' .. pos)
return 1
