-- The prelude shared by every library script (docs/architecture.md "Scripts").
--
-- The build (cmake/embed_lua.cmake) prepends it, after the script's layout
-- header (layouts/<kind>.lua), to each script ON THE SCRIPT'S FIRST LINE:
-- comment lines are dropped and the code lines joined with spaces. So line N
-- of a .lua file is line N of the script the server runs, and `user_script:N`
-- in a server error names that line of the file. An error inside a prelude
-- or layout function reports line 1. Rules that keep the joining correct:
-- comments only on lines of their own (no `--` after code, anywhere), no
-- long strings or long comments, no line starting with `(`.
--
-- Every function may read the key names of the layout header (K_CONFIG ...);
-- the lock layout has no K_CONFIG and uses none of them.

-- Errors: one convention for every script, `THOONK <code> <message>`; the
-- C++ mapper (detail::reply_error, src/feeds/common.cpp) turns <code> into
-- the error code of the same name (feed_not_found -> error::feed_not_found).
local function fail(code, msg)
  if msg then return redis.error_reply('THOONK ' .. code .. ' ' .. msg) end
  return redis.error_reply('THOONK ' .. code)
end

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

-- The command that carries feed, job and wake-up notifications: PUBLISH.
-- In cluster mode the client runs every script with this definition read
-- as 'spublish' (sharded pub/sub, Redis 7.0: the message stays on the
-- shard that serves the channel's slot, and the channels carry the feed's
-- hash tag, so the slot is the script's own). detail::sharded_variant
-- (src/detail/script_exec.cpp) makes that variant: keep this line as it is.
local NOTIFY = 'publish'

-- check_channels(cmd, ch, ...): call it before a script's first write.
-- Returns an error reply `THOONK no_channel_permission ...` when the calling
-- ACL user may not run `cmd` (publish, spublish) on one of the channels
-- (the command or the channel refused), else nil. Redis does not roll back
-- a script that fails half way, so a PUBLISH refused after the writes would
-- leave them applied under an error. redis.acl_check_cmd exists from Redis
-- 7.0; older servers are not checked.
local function check_channels(cmd, ...)
  if not redis.acl_check_cmd then return nil end
  for i = 1, select('#', ...) do
    local ch = select(i, ...)
    if not redis.acl_check_cmd(cmd, ch, '') then
      return fail('no_channel_permission', 'the user may not ' .. string.upper(cmd) .. ' on ' .. ch)
    end
  end
  return nil
end
-- check_commands(cmd, ...): the build (cmake/embed_lua.cmake) puts a call
-- of it before every script's own code, naming each command the script
-- and the header code it embeds can run. Redis checks a script's commands
-- against the user one by one as they run and keeps the writes made before
-- a refused one; checked here first, a refusal changes nothing. Returns an
-- error reply `THOONK no_permission ...` naming the first refused command,
-- else nil. Each is checked with the script's first key as its argument:
-- without one, Redis 7.0 refuses SET to a user whose keys are restricted
-- when the script runs as a function. About 0.3 µs a command.
local function check_commands(...)
  if not redis.acl_check_cmd then return nil end
  for i = 1, select('#', ...) do
    local cmd = select(i, ...)
    if not redis.acl_check_cmd(cmd, KEYS[1]) then
      return fail('no_permission', 'the user may not run ' .. string.upper(cmd) ..
                  ' (grant +' .. cmd .. ': docs/security.md lists what each role needs)')
    end
  end
  return nil
end
-- The check for notification channels (NOTIFY).
local function check_publish(...)
  return check_channels(NOTIFY, ...)
end
-- The check for the management channels (newfeed, delfeed, conffeed),
-- which stay on classic pub/sub in cluster mode too.
local function check_classic_publish(...)
  return check_channels('publish', ...)
end
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

local function int(n) return string.format('%d', n) end

-- A config number as the scripts read it: the text of a decimal integer
-- (an optional '-', then digits, nothing else) within lo .. hi (hi: 2^53 - 1
-- when nil), else the default. Every script reads every config number
-- through it, and the C++ side by the same rule with the same ranges
-- (detail::read_config_int): tonumber alone would also take '1e3', '0x10',
-- ' 5' or '5.0', which read_settings reports unset. create_feed /
-- set_config refuse such values (validate_config_field); this guards
-- against values written with plain commands (a fractional PEXPIRE would
-- fail after the writes). Past 2^53 the text of a value and its double
-- differ, but any text above 2^53 - 1 reads as a double above it too.
local function conf_int(v, default, lo, hi)
  if type(v) ~= 'string' or not string.find(v, '^%-?%d+$') then return default end
  local n = tonumber(v)
  if n < lo or n > (hi or 9007199254740991) then return default end
  return n
end

-- Queue and job ids: base 36 of a counter.
local B36 = '0123456789abcdefghijklmnopqrstuvwxyz'
local function b36(n)
  local s = ''
  repeat
    local d = n % 36
    s = string.sub(B36, d + 1, d + 1) .. s
    n = (n - d) / 36
  until n == 0
  return s
end
-- n new ids from the counter; a fresh counter starts at now*1024, so ids of
-- a deleted and re-created queue never repeat (stored results stay apart).
-- One INCRBY serves the usual case: it returns n only when the counter was
-- absent (or held 0, which no counter left by this library does), and then
-- the counter moves to the fresh start.
-- b36(v) = b36(floor(v / 1296)) .. two digits: the prefix changes once
-- every 1296 ids, so most ids cost one concatenation.
local function new_ids(key, n, now)
  local base = redis.call('INCRBY', key, n) - n
  if base == 0 then
    base = now * 1024
    redis.call('SET', key, int(base + n))
  end
  local ids, hi, prefix = {}, -1, ''
  for i = 1, n do
    local v = base + i
    local lo = v % 1296
    local h = (v - lo) / 1296
    if h ~= hi then
      hi = h
      prefix = h > 0 and b36(h) or ''
    end
    local d1, d2 = (lo - lo % 36) / 36, lo % 36
    if prefix == '' and d1 == 0 then
      ids[i] = string.sub(B36, d2 + 1, d2 + 1)
    else
      ids[i] = prefix .. string.sub(B36, d1 + 1, d1 + 1) .. string.sub(B36, d2 + 1, d2 + 1)
    end
  end
  return ids
end
-- Queue order: normal LPUSH (end of the line); high RPUSH, first id next out.
local function push(key, ids, high)
  if high then
    local r = {}
    for i = #ids, 1, -1 do r[#r + 1] = ids[i] end
    redis.call('RPUSH', key, unpack(r))
  else
    redis.call('LPUSH', key, unpack(ids))
  end
end
-- Stores ARGV[first], ARGV[first + 1], ... as new items of a queue or job
-- queue: ids from the counter, the items in feed.items, not in the line
-- yet. Returns the ids (at least one item: callers check).
local function store_new(first, now)
  local n = #ARGV - first + 1
  local ids = new_ids(K_IDINCR, n, now)
  local h = {}
  for i = 1, n do
    h[2 * i - 1] = ids[i]
    h[2 * i] = ARGV[first - 1 + i]
  end
  redis.call('HSET', K_ITEMS, unpack(h))
  return ids
end
-- store_new, then the ids join the line in queue order.
local function store_items(first, now, high)
  local ids = store_new(first, now)
  push(K_IDS, ids, high)
  return ids
end
-- feed.sleepers exists while some getter found the queue empty and waits;
-- a put deletes it and PUBLISHes a wake-up, so a busy queue pays no
-- PUBLISH per put.
local function wake(sleepers, channel, n)
  if redis.call('DEL', sleepers) == 1 then redis.call(NOTIFY, channel, n) end
end
-- For scripts that must not fail (give-backs for waiters that went away):
-- the wake-up is skipped when the user may not PUBLISH it (sleeping
-- claimers find the jobs at their next poll).
local function wake_if_allowed(sleepers, channel, n)
  if check_publish(channel) then return end
  wake(sleepers, channel, n)
end
