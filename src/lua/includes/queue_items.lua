-- New items of a queue or job queue (layouts queue and job).
--- @include "includes/ids"

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
