-- The catch-up log of a feed (layout feed, docs/feeds.md): the change
-- index and the retraction log.

-- feed.publishes: the contract's publish counter, used as the sequence
-- number of publishes and edits.
local function publish_count()
  return tonumber(redis.call('GET', K_PUBLISHES) or '0') or 0
end

-- Catch-up index (docs/feeds.md): id -> publish counter value of its latest
-- publish or edit.
local function record_change(id, seq)
  redis.call('ZADD', K_CHANGES, seq, id)
end

-- Catch-up retraction log: id -> `seq`, the publish counter value when it
-- was retracted (the number of publishes whose messages preceded the
-- retract message). The newest `log_max` are kept: the log is trimmed in
-- batches of 64, checked when `check` is true (publishes check every 64th
-- counter value, to stay cheap); feed.retracttrim holds the highest counter
-- value trimmed away, so a catch-up can tell that its gap lost retractions.
-- An id re-published after its retraction keeps its log entry: a replay
-- then reports the retraction and, later, the new publish, in order.
local function record_retracts(ids, seq, log_max, check)
  if #ids == 0 then return end
  redis.call('ZREM', K_CHANGES, unpack(ids))
  if log_max <= 0 then
    redis.call('SET', K_TRIM, seq)
    return
  end
  for i = 1, #ids do redis.call('ZADD', K_RETRACTS, seq, ids[i]) end
  if not check then return end
  local n = redis.call('ZCARD', K_RETRACTS)
  if n > log_max + 64 then
    local cut = n - log_max
    local last = redis.call('ZRANGE', K_RETRACTS, cut - 1, cut - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYRANK', K_RETRACTS, 0, cut - 1)
    redis.call('SET', K_TRIM, last[2])
  end
end
