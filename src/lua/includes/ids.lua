-- Ids of queue items and jobs, from the feed's id counter.
--- @include "includes/numbers"

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
