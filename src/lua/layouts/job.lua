-- Layout `job`: the job queue and maintenance scripts. The C++ side builds
-- these KEYS with jobs::job_keys (src/jobs/job_keys.hpp, enum `index`), in
-- this order. jobs/finish.lua and jobs/work.lua take result keys after them
-- (KEYS[K_FIRST_RESULT..]); the scripts that can make a dead letter take
-- the dead-letter queue's keys there instead (K_DLQ_*: jobs/fail.lua,
-- maintenance/expire.lua; see layouts/job_engine.lua use_dlq).
local K_CONFIG, K_IDS, K_ITEMS, K_PUBLISHES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_FINISHES, K_PUBLISHED, K_CLAIMED, K_CANCELLED = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
local K_STALLED, K_ATTEMPTS, K_SLEEPERS, K_IDINCR = KEYS[9], KEYS[10], KEYS[11], KEYS[12]
local K_UNACCOUNTED, K_SCHEDULED, K_SCHED_ITEMS, K_META = KEYS[13], KEYS[14], KEYS[15], KEYS[16]
local K_HELD, K_WORKERS, K_WORKER_INFO, K_WORKER_JOBS = KEYS[17], KEYS[18], KEYS[19], KEYS[20]
local K_TAKERS, K_HANDED = KEYS[21], KEYS[22]
local K_FIRST_RESULT = 23
local K_DLQ_CONFIG, K_DLQ_IDS, K_DLQ_ITEMS = KEYS[23], KEYS[24], KEYS[25]
local K_DLQ_PUBLISHES, K_DLQ_IDINCR, K_DLQ_SLEEPERS = KEYS[26], KEYS[27], KEYS[28]

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
