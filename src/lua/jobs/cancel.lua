-- job_queue::cancel.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 id, 2 token, 3 wake channel, 4 now_ms. Contract "Cancel":
-- HINCRBY cancelled, LPUSH ids, ZREM claimed (the claim's record goes
-- with it); then a held put is applied.
-- Returns the new failure count.
--- @include "includes/acl"
--- @include "includes/errors"
--- @include "includes/hold"
--- @include "includes/job_queue"
--- @include "includes/schedule"
--- @include "includes/tokens"
local e = open_job() or check_publish(ARGV[3]) if e then return e end
local id = ARGV[1]
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
redis.call('HINCRBY', K_CANCELLED, id, 1)
redis.call('ZREM', K_CLAIMED, id)
redis.call('HDEL', K_WORKER_JOBS, id)
redis.call('HSET', K_ATTEMPTS, id, '-' .. ARGV[2])
enqueue(id, nil, false)
release_held(id, tonumber(ARGV[4]))
wake_woken(ARGV[3])
return tonumber(redis.call('HGET', K_CANCELLED, id)) or 0
