-- layout: job (src/lua/layouts/job.lua). job_queue::finish (batched).
-- KEYS: the job layout, then result keys (KEYS[K_FIRST_RESULT..]).
-- ARGV: 1 job.finish channel, then per job
-- id, token, result key index in KEYS (0: no result), result.
-- Contract "Finish" for each job claimed under its token: ZREM claimed,
-- HDEL cancelled, HDEL items, INCR finishes; with a result PUBLISH
-- job.finish `id\0result` and LPUSH + PEXPIRE the durable result (contract
-- 001). Also drops the job's put time (feed.published; the contract leaks
-- it) and its token. Returns one status per job: 0 finished,
-- 1 job_not_found, 2 job_not_claimed, 3 lost_claim, 4 no_channel_permission
-- (a finish with a result by a user who may not PUBLISH job.finish: that
-- job is left as it was; the others of the batch finish). A put held for
-- a finished job is applied then (a new job with that id).
local e = open_job('result_ttl_ms') if e then return e end
local ttl = conf_int(Q.conf[3], 300000, 1)
local m = (#ARGV - 1) / 4
local ids = {}
for j = 1, m do ids[j] = ARGV[4 * j - 2] end
-- Results are PUBLISHed: may this user? (Checked before any write.)
local can_publish = true
for j = 1, m do
  if tonumber(ARGV[4 * j]) > 0 then
    can_publish = check_publish(ARGV[1]) == nil
    break
  end
end
local att = {}
if redis.call('EXISTS', K_ATTEMPTS) == 1 then att = redis.call('HMGET', K_ATTEMPTS, unpack(ids)) end
local st, ok, o, seen = {}, {}, {}, {}
for j = 1, m do
  local id = ids[j]
  if not can_publish and tonumber(ARGV[4 * j]) > 0 then
    st[j] = 4  -- its result could not be announced: not finished
  elseif seen[id] then
    st[j] = 1  -- the same job twice in one batch: the first one finished it
  elseif att[j] == ARGV[4 * j - 1] and redis.call('ZREM', K_CLAIMED, id) == 1 then
    -- Claimed under this token, and now out of feed.claimed. One ZREM per
    -- job checks and removes in one step (ZMSCORE first was slower: Redis
    -- formats every score as a string for Lua).
    st[j] = 0
    seen[id] = true
    ok[#ok + 1] = j
    o[#o + 1] = id
  elseif redis.call('ZSCORE', K_CLAIMED, id) or was_aborted(id, ARGV[4 * j - 1]) then
    st[j] = 3
  elseif redis.call('HEXISTS', K_ITEMS, id) == 1 then
    st[j] = 2
  else
    st[j] = 1
  end
end
if #ok > 0 then
  if redis.call('EXISTS', K_CANCELLED) == 1 then redis.call('HDEL', K_CANCELLED, unpack(o)) end
  redis.call('HDEL', K_ITEMS, unpack(o))
  redis.call('HDEL', K_ATTEMPTS, unpack(o))
  if redis.call('EXISTS', K_PUBLISHED) == 1 then redis.call('ZREM', K_PUBLISHED, unpack(o)) end
  redis.call('INCRBY', K_FINISHES, #o)
  -- Job records and held puts are rare: one EXISTS for both.
  local extras = redis.call('EXISTS', K_META, K_HELD) > 0
  if extras then redis.call('HDEL', K_META, unpack(o)) end
  if extras and redis.call('EXISTS', K_HELD) == 1 then
    -- The server's clock: a finish carries no time (a held put's run_at
    -- is compared with it).
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for i = 1, #o do release_held(o[i], now) end
    wake_woken('feed.wake:' .. string.sub(ARGV[1], 12))
  end
  if Q.events then
    for i = 1, #o do emit('finished', o[i]) end
  end
  for _, j in ipairs(ok) do
    local k = tonumber(ARGV[4 * j])
    if k > 0 then
      local res = ARGV[4 * j + 1]
      redis.call('PUBLISH', ARGV[1], ids[j] .. '\0' .. res)
      redis.call('LPUSH', KEYS[k], res)
      redis.call('PEXPIRE', KEYS[k], ttl)
    end
  end
end
return st
