-- Claims that end without their holder: lapsed leases, failed workers.
--- @include "includes/dead_letter"
--- @include "includes/hold"
--- @include "includes/job_queue"
--- @include "includes/job_record"
--- @include "includes/numbers"
--- @include "includes/schedule"
--- @include "includes/workers"

-- A claim that ended without its holder (its lease lapsed, or its worker
-- died) ends here: its token ends; the job counts a stall (and a failure)
-- and goes to the end of the line, or becomes a dead letter once its
-- stalls reach max_stalls (use_dlq first); a held put is applied. `why`
-- names the cause in the job's last error. A claimed id without an item
-- is only dropped. Returns 'requeued', 'dead' or 'dropped'.
local function lapse(id, now, why)
  redis.call('ZREM', K_CLAIMED, id)
  redis.call('HDEL', K_WORKER_JOBS, id)
  local a = tonumber(redis.call('HGET', K_ATTEMPTS, id))
  if a and a > 0 then redis.call('HSET', K_ATTEMPTS, id, int(-a)) end
  local r = 'dropped'
  if redis.call('HEXISTS', K_ITEMS, id) == 0 then
    redis.call('HDEL', K_ATTEMPTS, id)
    redis.call('HDEL', K_CANCELLED, id)
    redis.call('HDEL', K_META, id)
  else
    redis.call('HINCRBY', K_CANCELLED, id, 1)
    local m = meta_get(id)
    m.sc = (m.sc or 0) + 1
    local _, ms = strategy_of(m)
    local err = why .. ' (stall ' .. int(m.sc) .. ' of ' .. int(ms) .. ')'
    emit('stalled', id, int(m.sc))
    if m.sc >= ms then
      dead_letter(id, m, err, now)
      r = 'dead'
    else
      m.err = err
      meta_set(id, m)
      enqueue(id, nil, false)
      r = 'requeued'
    end
  end
  release_held(id, now)
  return r
end

-- Fails worker `w` (worker liveness): every claim it still holds ends
-- as a lapse (a stall counted; requeued or dead-lettered) and it leaves the
-- registry. use_dlq first. Returns requeued, dead-lettered.
local function fail_worker(w, now)
  local rq, dl = 0, 0
  local held = remove_worker(w)
  for i = 1, #held do
    local r = lapse(held[i][1], now, 'worker ' .. w .. ' lapsed')
    if r == 'requeued' then rq = rq + 1 elseif r == 'dead' then dl = dl + 1 end
  end
  return rq, dl
end
