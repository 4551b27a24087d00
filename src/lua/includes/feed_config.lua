-- Opening a feed: its type checked and config fields read (K_CONFIG).
--- @include "includes/errors"

-- Checks the feed's type and reads config fields: an error reply (no such
-- feed, another type) or nil, then {type, fields...}.
local function open_feed(want, ...)
  local conf = redis.call('HMGET', K_CONFIG, 'type', ...)
  if not conf[1] then return fail('feed_not_found', 'no such feed'), conf end
  if conf[1] ~= want then
    return fail('wrong_feed_type', 'the feed has type ' .. conf[1]), conf
  end
  return nil, conf
end
