-- Finishing jobs: the contract's "Finish".
--- @include "includes/acl"
--- @include "includes/clock"
--- @include "includes/hold"
--- @include "includes/job_queue"
--- @include "includes/notify"
--- @include "includes/numbers"
--- @include "includes/tokens"

-- The contract's "Finish" for the jobs in ARGV from `base` on (`m` groups
-- of id, token, result key index in KEYS (0: none), result), each only
-- when claimed under its token (jobs/finish.lua, jobs/work.lua): ZREM
-- claimed, HDEL cancelled, items and token, INCR finishes; with a result
-- PUBLISH `id\0result` on `channel` and keep it in its result key for
-- `ttl` ms (durable results). The job's put time, record and claim record go
-- too; a put held for it is applied. Returns one status per job:
-- 0 finished, 1 job_not_found, 2 job_not_claimed, 3 lost_claim,
-- 4 no_channel_permission (a result this user may not PUBLISH: that job
-- is left as it was; the others finish).
local function finish_jobs(channel, base, m, ttl)
  if m == 0 then return {} end
  local ids = {}
  for j = 1, m do ids[j] = ARGV[base + 4 * j - 4] end
  local can_publish = true
  for j = 1, m do
    if tonumber(ARGV[base + 4 * j - 2]) > 0 then
      can_publish = check_publish(channel) == nil
      break
    end
  end
  local att = redis.call('HMGET', K_ATTEMPTS, unpack(ids))
  local st, ok, o, seen = {}, {}, {}, {}
  for j = 1, m do
    local id, tok = ids[j], ARGV[base + 4 * j - 3]
    if not can_publish and tonumber(ARGV[base + 4 * j - 2]) > 0 then
      st[j] = 4
    elseif seen[id] then
      st[j] = 1
    elseif att[j] == tok and string.byte(tok) ~= 45 and redis.call('ZREM', K_CLAIMED, id) == 1 then
      -- One ZREM per job checks and removes in one step (ZMSCORE first was
      -- slower: Redis formats every score as a string for Lua).
      st[j] = 0
      seen[id] = true
      ok[#ok + 1] = j
      o[#o + 1] = id
    elseif redis.call('ZSCORE', K_CLAIMED, id) or cold.was_aborted(id, tok) then
      st[j] = 3
    elseif redis.call('HEXISTS', K_ITEMS, id) == 1 then
      st[j] = 2
    else
      st[j] = 1
    end
  end
  if #ok > 0 then
    -- Finished claims take their records along, whoever finishes them: a
    -- job handed to a job_queue handle may be finished through another
    -- handle or process, and nothing else would ever drop that record.
    -- Only current claims finish here, so each record is this claim's (or
    -- an older one's); another claim of a job this one lost keeps its own.
    redis.call('HDEL', K_WORKER_JOBS, unpack(o))
    redis.call('HDEL', K_ITEMS, unpack(o))
    redis.call('HDEL', K_ATTEMPTS, unpack(o))
    redis.call('INCRBY', K_FINISHES, int(#o))
    -- Failure counts, the put-time index, job records and held puts are
    -- rare: one EXISTS for the four, and none more when it finds none (a
    -- claim in the same call then knows there are no failure counts:
    -- nothing here creates them). Each script call costs about 10,000
    -- instructions per redis.call on Redis 7.0, so at one job a round the
    -- calls, not the data, are the cost.
    local extras = redis.call('EXISTS', K_CANCELLED, K_PUBLISHED, K_META, K_HELD) > 0
    if not extras then Q.cancelled = false end
    if extras and redis.call('EXISTS', K_CANCELLED) == 1 then redis.call('HDEL', K_CANCELLED, unpack(o)) end
    if extras and redis.call('EXISTS', K_PUBLISHED) == 1 then redis.call('ZREM', K_PUBLISHED, unpack(o)) end
    if extras then redis.call('HDEL', K_META, unpack(o)) end
    if extras and redis.call('EXISTS', K_HELD) == 1 then
      -- The server's clock: a finish carries no time (a held put's run_at
      -- is compared with it).
      local now = server_ms()
      for i = 1, #o do cold.release_held(o[i], now) end
      cold.wake_woken('feed.wake:' .. string.sub(channel, 12))
    end
    if Q.events then
      for i = 1, #o do emit('finished', o[i]) end
    end
    for _, j in ipairs(ok) do
      local k = tonumber(ARGV[base + 4 * j - 2])
      if k > 0 then
        local res = ARGV[base + 4 * j - 1]
        redis.call(NOTIFY, channel, ids[j] .. '\0' .. res)
        redis.call('LPUSH', KEYS[k], res)
        redis.call('PEXPIRE', KEYS[k], ttl)
      end
    end
  end
  return st
end
