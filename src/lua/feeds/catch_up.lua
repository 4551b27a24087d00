-- catch-up subscriptions.
-- KEYS: layout feed (src/lua/layouts/feed.lua)
-- ARGV[1] expected type  ARGV[2] from (counter value)  ARGV[3] upper bound ('' = now)
-- ARGV[4] max rows (0 = none)  ARGV[5] max item bytes  ARGV[6] '1': read retractions
-- ARGV[7] marker channel ('' = no marker)  ARGV[8] marker payload
-- ARGV[9] window low score ('' = no window)  ARGV[10] entries to skip at the low score
-- ARGV[11] window high score ('' = the newest score now)  ARGV[12] window max rows
-- Returns {counter, {id, seq, item, ...}, {retracted id, seq, ...}, more (0/1),
--          retractions complete (0/1), last seq examined,
--          sync {newest score or '', ids at that score...} (with a marker),
--          {ids retracted at exactly the counter} (with a marker),
--          {window id, score, item, ...}, window more (0/1),
--          {last window score, entries at it}}
--- @include "includes/change_log"
--- @include "includes/feed_config"
--- @include "includes/notify"
local err = open_feed(ARGV[1])
if err then return err end
local m = publish_count()
local from = tonumber(ARGV[2])
local hi = ARGV[3]
if hi == '' then hi = tostring(m) end
local budget = tonumber(ARGV[5])
local limit = tonumber(ARGV[4])

-- From `found` (id, score pairs, at most `asked` of them) collects
-- {id, score, item, ...} for the ids `keep` accepts and that still have an
-- item, stopping once the items reach `budget` bytes; `seen` is told every
-- pair examined. Returns the rows and 1 when pairs were left over (0 if not).
local function collect(found, asked, keep, seen)
  local out, bytes = {}, 0
  for i = 1, #found, 2 do
    seen(found[i], found[i + 1])
    local item = keep(found[i]) and redis.call('HGET', K_ITEMS, found[i])
    if item then
      out[#out + 1] = found[i]
      out[#out + 1] = found[i + 1]
      out[#out + 1] = item
      bytes = bytes + #item
    end
    if bytes >= budget and i + 1 < #found then return out, 1 end
  end
  if #found >= 2 * asked then return out, 1 end
  return out, 0
end
local function any() return true end

local rows, more, last = {}, 0, from
if limit > 0 then
  local found = redis.call('ZRANGEBYSCORE', K_CHANGES, '(' .. ARGV[2], hi,
                           'WITHSCORES', 'LIMIT', 0, limit)
  rows, more = collect(found, limit, any, function(_, score) last = tonumber(score) end)
end
local tombs, complete = {}, 1
if ARGV[6] == '1' then
  tombs = redis.call('ZRANGEBYSCORE', K_RETRACTS, ARGV[2], '+inf', 'WITHSCORES')
  local trimmed = tonumber(redis.call('GET', K_TRIM) or '-1') or -1
  if trimmed >= from then complete = 0 end
end
local sync, at_m = {}, {}
if ARGV[7] ~= '' then
  if ARGV[1] == 'feed' then
    local newest = redis.call('ZRANGE', K_IDS, -1, -1, 'WITHSCORES')[2]
    if newest then
      sync = redis.call('ZRANGEBYSCORE', K_IDS, newest, newest)
      table.insert(sync, 1, newest)
    else
      sync = {''}
    end
  end
  at_m = redis.call('ZRANGEBYSCORE', K_RETRACTS, m, m)
  redis.call(NOTIFY, ARGV[7], ARGV[8])
end
local win, wmore, wnext = {}, 0, {}
if ARGV[9] ~= '' then
  local whi = ARGV[11]
  if whi == '' then whi = redis.call('ZRANGE', K_IDS, -1, -1, 'WITHSCORES')[2] or ARGV[9] end
  local wlimit = tonumber(ARGV[12])
  local found = redis.call('ZRANGEBYSCORE', K_IDS, ARGV[9], whi, 'WITHSCORES',
                           'LIMIT', tonumber(ARGV[10]), wlimit)
  local at_last, last_score = 0, nil
  -- Only what the counter `from` already covers: later changes come as rows.
  local function unchanged_since(id)
    return tonumber(redis.call('ZSCORE', K_CHANGES, id) or '-1') <= from
  end
  win, wmore = collect(found, wlimit, unchanged_since, function(_, score)
    if score == last_score then at_last = at_last + 1 else at_last = 1 end
    last_score = score
  end)
  if last_score then
    if last_score == ARGV[9] then at_last = at_last + tonumber(ARGV[10]) end
    wnext = {last_score, at_last, whi}
  end
end
return {m, rows, tombs, more, complete, last, sync, at_m, win, wmore, wnext}
