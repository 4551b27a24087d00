-- A job's extension record (feed.jobmeta) and its retry strategy.
--- @include "includes/job_queue"

-- A job's extension record (feed.jobmeta, JSON): rc retry count, sc stall
-- count, err last error, mr/ms/minb/maxb its own retry strategy. Absent for
-- jobs that never failed or stalled and have no strategy of their own.
local function meta_get(id)
  local v = redis.call('HGET', K_META, id)
  if v then return cjson.decode(v) end
  return {}
end

local function meta_set(id, m)
  if next(m) == nil then
    redis.call('HDEL', K_META, id)
  else
    redis.call('HSET', K_META, id, cjson.encode(m))
  end
end

-- A put's strategy (table with mr, ms, minb, maxb, each optional) into m.
local function set_strategy(m, s)
  m.mr, m.ms, m.minb, m.maxb = nil, nil, nil, nil
  if s then m.mr, m.ms, m.minb, m.maxb = s.mr, s.ms, s.minb, s.maxb end
end

-- The job's strategy with the queue's defaults filled in.
local function strategy_of(m)
  engine_settings()
  return m.mr or Q.max_retries, m.ms or Q.max_stalls, m.minb or Q.min_backoff,
         m.maxb or Q.max_backoff
end
