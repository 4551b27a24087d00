-- Scheduling: where a job goes when it becomes waiting or scheduled, and
-- how due scheduled jobs join the line.
--
-- feed.scheduled members are SEQ_WIDTH characters of put sequence (base
-- 36, zero padded: sorts as the number) followed by the id, so equal
-- run_at times come out in put order; feed.scheduled_items holds the same
-- sequence followed by the item, which gives the member back from the id.
--- @include "includes/ids"
--- @include "includes/job_queue"
--- @include "includes/numbers"

local SEQ_WIDTH = 11

-- The next put sequence (from the id counter), SEQ_WIDTH characters.
local function next_seq(now)
  local s = new_ids(K_IDINCR, 1, now)[1]
  return string.rep('0', SEQ_WIDTH - #s) .. s
end

-- Makes `id` (in no state) scheduled at run_at. Counted in Q.woken too:
-- sleeping claimers must claim once more to learn the new due time.
local function schedule(id, item, run_at, seq)
  redis.call('ZADD', K_SCHEDULED, run_at, seq .. id)
  redis.call('HSET', K_SCHED_ITEMS, id, seq .. item)
  Q.woken = Q.woken + 1
end

-- Makes `id` (in no state) waiting: item stored unless nil (already in
-- feed.items); end of the line, or next out when `high`. Counted in
-- Q.woken for the caller's wake-up.
local function enqueue(id, item, high)
  if item then redis.call('HSET', K_ITEMS, id, item) end
  if high then
    redis.call('RPUSH', K_IDS, id)
  else
    redis.call('LPUSH', K_IDS, id)
  end
  Q.woken = Q.woken + 1
end

-- A claimed job whose claim ended without finishing goes back at run_at:
-- its item leaves feed.items when it becomes scheduled.
local function requeue(id, run_at, now)
  if run_at > now then
    local item = redis.call('HGET', K_ITEMS, id)
    redis.call('HDEL', K_ITEMS, id)
    schedule(id, item, run_at, next_seq(now))
  else
    enqueue(id, nil, false)
  end
end

-- Up to `limit` due scheduled jobs join the end of the line, earliest
-- run_at first (ties in put order). Returns how many and, when none was
-- due, the earliest run_at (false: nothing scheduled), which saves a claim
-- that finds the queue dry its own look at the schedule (next_due).
local function promote(now, limit)
  local first = redis.call('ZRANGE', K_SCHEDULED, '0', '0', 'WITHSCORES')
  if not first[2] then return 0, false end
  if tonumber(first[2]) > now then return 0, tonumber(first[2]) end
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', int(now), 'LIMIT', '0', int(limit))
  local n = #due
  if n == 0 then return 0 end
  local ids = {}
  for i = 1, n do ids[i] = string.sub(due[i], SEQ_WIDTH + 1) end
  local vals = redis.call('HMGET', K_SCHED_ITEMS, unpack(ids))
  local h, moved = {}, {}
  for i = 1, n do
    local v = vals[i]
    if v and string.sub(v, 1, SEQ_WIDTH) == string.sub(due[i], 1, SEQ_WIDTH) then
      h[#h + 1] = ids[i]
      h[#h + 1] = string.sub(v, SEQ_WIDTH + 1)
      moved[#moved + 1] = ids[i]
    end
  end
  redis.call('ZREM', K_SCHEDULED, unpack(due))
  if #moved == 0 then return 0 end
  redis.call('HDEL', K_SCHED_ITEMS, unpack(moved))
  redis.call('HSET', K_ITEMS, unpack(h))
  redis.call('LPUSH', K_IDS, unpack(moved))
  Q.woken = Q.woken + #moved
  if Q.events then
    for i = 1, #moved do emit('promoted', moved[i]) end
  end
  return #moved
end

-- The earliest run_at of a scheduled job, or nil.
local function next_due()
  local r = redis.call('ZRANGE', K_SCHEDULED, '0', '0', 'WITHSCORES')
  if r[2] then return tonumber(r[2]) end
  return nil
end

-- When a claim that got fewer jobs than it asked for may try again: the
-- earliest run_at promote saw (`due`: false when nothing was scheduled,
-- nil when it did not look or moved jobs), else the schedule's; 0 when
-- nothing is scheduled (at a wake-up or poll).
local function retry_at(due)
  if due == nil then return next_due() or 0 end
  return due or 0
end

-- Where a put's run_at goes, by update mode (a..always, l..if_later,
-- e..if_earlier, n..never), given the current one.
local function merge_run_at(mode, cur, new)
  if mode == 'a' or (mode == 'l' and new > cur) or (mode == 'e' and new < cur) then return new end
  return cur
end
