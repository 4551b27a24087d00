-- The worker registry (docs/jobs.md "Workers").
--- @include "includes/tokens"

-- Worker registry (docs/jobs.md "Workers"). feed.workers scores each
-- registered worker by the server time (ms) at which its registration
-- lapses; feed.worker_info holds its description (JSON, from the worker);
-- feed.worker_jobs records which worker made each claim: field the job id,
-- value `worker\0token` (worker names hold no NUL). A job has one claim at
-- a time, so a new claim of it overwrites the record; a claim that ends
-- takes its record along where the ending knows it (finish by the worker,
-- fail, lapse), and the rest go when the worker stops or is failed. A hash
-- (kept in hashtable encoding by KEEP_FIELD, as feed.attempts) costs the
-- hot path one field set and one field delete per job; a worker's own
-- claims are found by a scan of every record, done only on the rare paths
-- (a worker failed, stopping, or listed): its heartbeat names them.
local function worker_record(w, token)
  return w .. '\0' .. token
end

-- The claims recorded for worker `w`: a list of {id, token}.
local function worker_claims(w)
  local all = redis.call('HGETALL', K_WORKER_JOBS)
  local prefix = w .. '\0'
  local out = {}
  for i = 1, #all, 2 do
    local v = all[i + 1]
    if string.sub(v, 1, #prefix) == prefix then
      out[#out + 1] = {all[i], string.sub(v, #prefix + 1)}
    end
  end
  return out
end

-- Whether worker `w` is registered and its registration has not lapsed.
local function worker_alive(w, now)
  local exp = redis.call('ZSCORE', K_WORKERS, w)
  return exp ~= false and tonumber(exp) >= now
end

-- A worker leaves the registry (stopped or failed): its registration,
-- description and claim records go. Returns the ids of the claims it still
-- held (current: claimed under the recorded token), for the caller to end.
local function remove_worker(w)
  local cs = worker_claims(w)
  local held, gone = {}, {}
  for i = 1, #cs do
    local c = cs[i]
    if claim_current(c[1], c[2]) then held[#held + 1] = c end
    gone[#gone + 1] = c[1]
  end
  if #gone > 0 then redis.call('HDEL', K_WORKER_JOBS, unpack(gone)) end
  redis.call('ZREM', K_WORKERS, w)
  redis.call('HDEL', K_WORKER_INFO, w)
  redis.call('HDEL', K_TAKERS, w)
  return held
end
