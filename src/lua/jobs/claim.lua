-- layout: job (src/lua/layouts/job.lua). job_queue::get (claim).
-- ARGV: 1 now_ms, 2 n. First makes due scheduled jobs claimable (up to
-- 100), then the contract's "Get" in one atomic step: pop up to n ids
-- (fewer when paused or rate limited: claim_allowance), ZADD claimed
-- (claim time), read items and failure counts, assign tokens.
-- Returns {id, item, failures, token, ...}, and when it got fewer than n,
-- one more value: when to try again (ms, 0: at a wake-up or poll): the
-- time the rate limit allows more, else the earliest run_at of a
-- scheduled job, so a waiting claimer can wake up then. Ids without an
-- item (left by a plain-command client) are dropped. Marks sleepers when
-- the queue ran dry.
local e = open_claim() if e then return e end
local now, want = tonumber(ARGV[1]), tonumber(ARGV[2])
promote(now, 100)
local n, later = claim_allowance(now, want)
if n == 0 then
  if not later then redis.call('SET', K_SLEEPERS, '1') end
  return {later or next_due() or 0}
end
local ids = redis.call('RPOP', K_IDS, n)
if not ids then
  redis.call('SET', K_SLEEPERS, '1')
  return {next_due() or 0}
end
-- Ran dry (claim_allowance may have capped n at the waiting jobs).
if #ids < want and not later then redis.call('SET', K_SLEEPERS, '1') end
local its = redis.call('HMGET', K_ITEMS, unpack(ids))
-- Rare: an id without an item (left by a plain-command client) is dropped.
for i = 1, #ids do
  if not its[i] then
    local ki, kt = {}, {}
    for j = 1, #ids do
      if its[j] then ki[#ki + 1] = ids[j]; kt[#kt + 1] = its[j] end
    end
    ids, its = ki, kt
    break
  end
end
local m = #ids
if m == 0 then return {next_due() or 0} end
local z = {}
for i = 1, m do z[2 * i - 1] = ARGV[1]; z[2 * i] = ids[i] end
if redis.call('ZADD', K_CLAIMED, unpack(z)) ~= m then
  -- Rare: an id twice in the line (or already claimed): hand it out once.
  local ki, kt, seen = {}, {}, {}
  for i = 1, m do
    if not seen[ids[i]] then
      seen[ids[i]] = true
      ki[#ki + 1] = ids[i]; kt[#kt + 1] = its[i]
    end
  end
  ids, its, m = ki, kt, #ki
end
local fails = {}
if redis.call('EXISTS', K_CANCELLED) == 1 then fails = redis.call('HMGET', K_CANCELLED, unpack(ids)) end
local att = redis.call('HMGET', K_ATTEMPTS, KEEP_FIELD, unpack(ids))
if not att[1] then redis.call('HSET', K_ATTEMPTS, KEEP_FIELD, KEEP_VALUE) end
local h, out = {}, {}
for i = 1, m do
  local a = att[i + 1]
  a = a and math.abs(tonumber(a)) + 1 or 1
  h[2 * i - 1] = ids[i]; h[2 * i] = a
  out[4 * i - 3] = ids[i]
  out[4 * i - 2] = its[i]
  out[4 * i - 1] = tonumber(fails[i]) or 0
  out[4 * i] = a
end
redis.call('HSET', K_ATTEMPTS, unpack(h))
if Q.events then
  for i = 1, m do emit('claimed', ids[i], int(h[2 * i])) end
end
if m < want then out[#out + 1] = later or next_due() or 0 end
return out
