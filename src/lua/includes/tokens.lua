-- Claim tokens (layout job): feed.attempts:[f] and the checks of a claim's
-- token.

-- feed.attempts:[f] is a hash id -> attempt number: +k while claimed with
-- token k, -k once that claim ended. Absent for jobs never claimed by this
-- library (plain-command clients never write it: their claims have no
-- token). KEEP_FIELD, a field no job id can have (ids never contain NUL)
-- whose value is longer than hash-max-listpack-value (64), keeps the hash
-- in hashtable encoding, so token lookups do not scan a listpack.
local KEEP_FIELD = '\0encoding'

local KEEP_VALUE = 'thoonk: keeps this hash in hashtable encoding, see docs/jobs.md (feed.attempts)'

-- TOKEN_BASE (also no job id) counts blocks of 2^20 tokens: a job put with
-- an explicit id starts its attempt numbers after a fresh block, so a
-- token of an earlier job with the same id (finished, a stale worker
-- still holding it) can never be handed out again.
local TOKEN_BASE = '\0tokenbase'

-- Whether `token` is that of a claim job_queue::abort ended (jobs/abort.lua
-- keeps it in the job's record, feed.jobmeta field ab): its holder gets
-- lost_claim whatever the job's state now. Only on error paths.
local function was_aborted(id, token)
  local v = redis.call('HGET', K_META, id)
  if not v then return false end
  return cjson.decode(v).ab == token
end

-- nil when `id` is claimed under `token`, else the error code.
local function claim_check(id, token)
  if not redis.call('ZSCORE', K_CLAIMED, id) then
    if cold.was_aborted(id, token) then return 'lost_claim' end
    if redis.call('HEXISTS', K_ITEMS, id) == 1 then return 'job_not_claimed' end
    return 'job_not_found'
  end
  -- A negative attempts value marks a claim that ended: no token given
  -- out is negative, so one never matches it.
  if string.byte(token) == 45 or redis.call('HGET', K_ATTEMPTS, id) ~= token then
    return 'lost_claim'
  end
  return nil
end

-- Whether the claim of `id` under `token` is current (claimed, same token).
-- Its tokens are the claim records' and the runner's own (never negative);
-- a caller's token goes through claim_check or finish_jobs.
local function claim_current(id, token)
  return redis.call('ZSCORE', K_CLAIMED, id) ~= false and
             redis.call('HGET', K_ATTEMPTS, id) == token
end
