-- Feed management (layouts admin and feed_admin): the config change
-- announcement and the last steps of the create scripts.
--- @include "includes/errors"

-- The contract's announcement of a config change of feed `name`, made by
-- the client of instance `uuid`: `name\0uuid` on `channel` (conffeed).
-- check_classic_publish(channel) first, before any write.
local function announce_config(channel, name, uuid)
  redis.call('PUBLISH', channel, name .. '\0' .. uuid)
end

-- The last step of the create scripts (layouts admin and feed_admin, ARGV
-- as theirs: name, type, instance uuid, newfeed channel, create mode,
-- config fields): unlinks the leftovers of a feed deleted only partly (the
-- keys from K_FEED_FIRST), writes the type and the config fields, and
-- announces the feed on the newfeed channel. Returns 1 (created).
local function write_new_feed()
  for i = K_FEED_FIRST, #KEYS do redis.call('UNLINK', KEYS[i]) end
  redis.call('HSET', K_CONFIG, 'type', ARGV[2])
  for i = CONFIG_FIRST, #ARGV, 2 do redis.call('HSET', K_CONFIG, ARGV[i], ARGV[i + 1]) end
  redis.call('PUBLISH', ARGV[4], ARGV[1] .. '\0' .. ARGV[3])
  return 1
end

-- A feed listed without a type (create.lua; cluster_create.lua, when the
-- name was listed before its create's SADD). When none of its keys exists it was left
-- half made or half deleted: nil, and the caller makes it anew. Otherwise
-- a client that writes no type made it (the contract's Create Feed writes
-- none) and its keys hold its data, which is never deleted here: `create`
-- answers feed_exists; `create_or_open` writes the type (and those of its
-- config fields the feed does not have yet) and opens it (0), unless its
-- ids are of another kind's Redis type (wrong_feed_type). No newfeed
-- message: the feed's maker announced it.
local function adopt_untyped_feed()
  if redis.call('EXISTS', unpack(KEYS, K_FEED_FIRST)) == 0 then return nil end
  if ARGV[5] ~= 'create_or_open' then
    return fail('feed_exists', 'the feed already exists (made by a client that wrote no type)')
  end
  local want = ARGV[2] == 'feed' and 'sorted set' or 'list'
  local at = K_FEED_FIRST + 1
  local n = ARGV[2] == 'feed' and redis.pcall('ZCARD', KEYS[at]) or redis.pcall('LLEN', KEYS[at])
  if type(n) == 'table' and n.err then
    return fail('wrong_feed_type', 'the feed exists without a type and its ids are no ' ..
                want .. ', as a ' .. ARGV[2] .. ' keeps them')
  end
  local h = {'type', ARGV[2]}
  for k = CONFIG_FIRST, #ARGV, 2 do
    if redis.call('HEXISTS', K_CONFIG, ARGV[k]) == 0 then
      h[#h + 1] = ARGV[k]
      h[#h + 1] = ARGV[k + 1]
    end
  end
  redis.call('HSET', K_CONFIG, unpack(h))
  return 0
end
