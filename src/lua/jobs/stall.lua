-- job_queue::stall.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 id, 2 token, 3 now_ms, 4 wake channel. Contract "Stall": ZREM claimed
-- (the claim's record goes with it), HDEL
-- cancelled, SADD stalled, ZREM published; then a held put is applied (it
-- revives the job, as a put for a stalled id does).
--- @include "includes/errors"
--- @include "includes/hold"
--- @include "includes/job_queue"
--- @include "includes/tokens"
local e = open_job() if e then return e end
local id = ARGV[1]
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
redis.call('ZREM', K_CLAIMED, id)
redis.call('HDEL', K_WORKER_JOBS, id)
redis.call('HDEL', K_CANCELLED, id)
redis.call('SADD', K_STALLED, id)
redis.call('ZREM', K_PUBLISHED, id)
redis.call('HSET', K_ATTEMPTS, id, '-' .. ARGV[2])
release_held(id, tonumber(ARGV[3]))
wake_woken(ARGV[4])
return 1
