-- layout: job (src/lua/layouts/job.lua). job_queue::stall.
-- ARGV: 1 id, 2 token. Contract "Stall": ZREM claimed, HDEL cancelled,
-- SADD stalled, ZREM published.
local e = open_feed('job') if e then return e end
local id = ARGV[1]
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
redis.call('ZREM', K_CLAIMED, id)
redis.call('HDEL', K_CANCELLED, id)
redis.call('SADD', K_STALLED, id)
redis.call('ZREM', K_PUBLISHED, id)
redis.call('HSET', K_ATTEMPTS, id, '-' .. ARGV[2])
return 1
