-- Claiming jobs: the contract's "Get".
--- @include "includes/claim_control"
--- @include "includes/job_queue"
--- @include "includes/numbers"
--- @include "includes/schedule"
--- @include "includes/tokens"
--- @include "includes/workers"

-- The member claim_jobs adds to feed.claimed and removes in the same call.
local ENCODING_KEEP = '\0thoonk: converts this sorted set to skiplist encoding and goes at once'

-- Marks jobs claimed at `now`: `ids` (no id twice in the line is assumed
-- but checked) with their items `its`, each given the next token (its
-- attempt number) and its failure count; with `worker`, each claim is
-- recorded under it. Returns {id, item, failures, token, ...}.
local function claim_ids(now, ids, its, worker)
  local m = #ids
  local stamp = int(now)
  local z = {}
  for i = 1, m do z[2 * i - 1] = stamp
  z[2 * i] = ids[i] end
  -- A batch goes into feed.claimed in skiplist encoding: a member longer
  -- than zset-max-listpack-value converts the set, and it stays converted
  -- when that member goes again at once (the contract's clients never see
  -- it). In listpack encoding every ZADD and ZREM scans the whole set: with
  -- 64 claims in flight that was a fifth of the server's work per job. The
  -- two calls cost more than they save for small batches (under 8).
  local convert = m >= 8
  if convert then redis.call('ZADD', K_CLAIMED, 0, ENCODING_KEEP) end
  local added = redis.call('ZADD', K_CLAIMED, unpack(z))
  if convert then redis.call('ZREM', K_CLAIMED, ENCODING_KEEP) end
  if added ~= m then
    -- Rare: an id twice in the line (or already claimed): hand it out once.
    local ki, kt, seen = {}, {}, {}
    for i = 1, m do
      if not seen[ids[i]] then
        seen[ids[i]] = true
        ki[#ki + 1] = ids[i]
        kt[#kt + 1] = its[i]
      end
    end
    ids, its, m = ki, kt, #ki
  end
  -- Q.cancelled is false when finish_jobs, earlier in the same call, found
  -- no failure counts.
  local fails = {}
  if Q.cancelled ~= false and redis.call('EXISTS', K_CANCELLED) == 1 then
    fails = redis.call('HMGET', K_CANCELLED, unpack(ids))
  end
  local att = redis.call('HMGET', K_ATTEMPTS, KEEP_FIELD, unpack(ids))
  if not att[1] then redis.call('HSET', K_ATTEMPTS, KEEP_FIELD, KEEP_VALUE) end
  local h, out, wc = {}, {}, {}
  for i = 1, m do
    local a = att[i + 1]
    a = a and math.abs(tonumber(a)) + 1 or 1
    -- Formatted once: a number passed to redis.call is formatted again
    -- for each use (a printf each, a visible share of a claim's cost).
    local token = int(a)
    h[2 * i - 1] = ids[i]
    h[2 * i] = token
    out[4 * i - 3] = ids[i]
    out[4 * i - 2] = its[i]
    out[4 * i - 1] = tonumber(fails[i]) or 0
    out[4 * i] = a
    if worker then
      wc[2 * i - 1] = ids[i]
      wc[2 * i] = worker_record(worker, token)
    end
  end
  redis.call('HSET', K_ATTEMPTS, unpack(h))
  if worker then redis.call('HSET', K_WORKER_JOBS, unpack(wc)) end
  if Q.events then
    for i = 1, m do emit('claimed', ids[i], h[2 * i]) end
  end
  return out
end

-- The contract's "Get" for up to `want` jobs in one step (jobs/claim.lua,
-- jobs/work.lua), after open_claim: due scheduled jobs first become
-- claimable (up to 100), then ids are popped (fewer when paused or rate
-- limited: claim_allowance) and claimed (claim_ids). Returns {id, item,
-- failures, token, ...} and, when it got fewer than `want`, one more
-- value: when to try again (ms; 0: at a wake-up or poll). Ids without an
-- item (left by a plain-command client) are dropped. Marks sleepers when
-- the queue ran dry.
local function claim_jobs(now, want, worker)
  local _, due = promote(now, 100)
  local n, later = claim_allowance(now, want)
  if n == 0 then
    if not later then redis.call('SET', K_SLEEPERS, '1') end
    return {later or retry_at(due)}
  end
  local ids = redis.call('RPOP', K_IDS, int(n))
  if not ids then
    redis.call('SET', K_SLEEPERS, '1')
    return {retry_at(due)}
  end
  if #ids < want and not later then redis.call('SET', K_SLEEPERS, '1') end
  local its = redis.call('HMGET', K_ITEMS, unpack(ids))
  for i = 1, #ids do
    if not its[i] then
      local ki, kt = {}, {}
      for j = 1, #ids do
        if its[j] then
          ki[#ki + 1] = ids[j]
          kt[#kt + 1] = its[j]
        end
      end
      ids, its = ki, kt
      break
    end
  end
  if #ids == 0 then return {retry_at(due)} end
  local out = claim_ids(now, ids, its, worker)
  if #out < 4 * want then out[#out + 1] = later or retry_at(due) end
  return out
end
