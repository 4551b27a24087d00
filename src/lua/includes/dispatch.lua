-- A put to an id that is not claimed: a new job, or an update of the job
-- with that id (de-duplication).
--- @include "includes/job_queue"
--- @include "includes/job_record"
--- @include "includes/numbers"
--- @include "includes/schedule"
--- @include "includes/tokens"

-- Applies a put to an id that is not claimed (de-duplication). p:
-- item, run_at, high, explicit (the id is the caller's), s (strategy or
-- nil), f (flags: d data r/k, ra run_at a/l/e/n, s strategy r/k, c
-- counters k/r). Returns 'added' or 'updated'. A stalled job is revived
-- by it.
local function dispatch(id, p, now)
  local item, state, cur, seq
  local sv = redis.call('HGET', K_SCHED_ITEMS, id)
  if sv then
    state, seq, item = 'scheduled', string.sub(sv, 1, SEQ_WIDTH), string.sub(sv, SEQ_WIDTH + 1)
    cur = tonumber(redis.call('ZSCORE', K_SCHEDULED, seq .. id)) or 0
  else
    item = redis.call('HGET', K_ITEMS, id)
    if item then
      state, cur = 'waiting', 0
      if redis.call('SISMEMBER', K_STALLED, id) == 1 then state = 'stalled' end
    end
  end
  if not state then
    -- A new job starts with no retry or stall record. A caller's id can
    -- have one left under it by a plain-command client's Finish or
    -- Retract, which cannot know feed.jobmeta.
    if p.s or p.explicit then
      local m = {}
      if p.s then set_strategy(m, p.s) end
      meta_set(id, m)
    end
    if p.run_at > now then
      schedule(id, p.item, p.run_at, next_seq(now))
    else
      enqueue(id, p.item, p.high)
    end
    if p.explicit then
      local base = redis.call('HINCRBY', K_ATTEMPTS, TOKEN_BASE, 1048576)
      redis.call('HSET', K_ATTEMPTS, id, int(-base))
    end
    redis.call('INCR', K_PUBLISHES)
    engine_settings()
    if Q.published then redis.call('ZADD', K_PUBLISHED, now, id) end
    if p.run_at > now then emit('put', id, int(p.run_at)) else emit('put', id) end
    return 'added'
  end
  local new_item = item
  if p.f.d ~= 'k' then new_item = p.item end
  local ra = merge_run_at(p.f.ra, cur, p.run_at)
  if p.f.s ~= 'k' or p.f.c == 'r' then
    local m = meta_get(id)
    if p.f.s ~= 'k' then set_strategy(m, p.s) end
    if p.f.c == 'r' then
      m.rc, m.sc = nil, nil
      redis.call('HDEL', K_CANCELLED, id)
    end
    meta_set(id, m)
  end
  if state == 'scheduled' then
    if ra > now then
      if ra ~= cur then redis.call('ZADD', K_SCHEDULED, ra, seq .. id) end
      if new_item ~= item then redis.call('HSET', K_SCHED_ITEMS, id, seq .. new_item) end
    else
      redis.call('ZREM', K_SCHEDULED, seq .. id)
      redis.call('HDEL', K_SCHED_ITEMS, id)
      enqueue(id, new_item, p.high)
    end
  else
    if state == 'stalled' then redis.call('SREM', K_STALLED, id) end
    if ra > now then
      if state == 'waiting' then redis.call('LREM', K_IDS, 1, id) end
      redis.call('HDEL', K_ITEMS, id)
      schedule(id, new_item, ra, next_seq(now))
    else
      if new_item ~= item then redis.call('HSET', K_ITEMS, id, new_item) end
      if state == 'stalled' then enqueue(id, nil, p.high) end
    end
  end
  emit('updated', id)
  return 'updated'
end
