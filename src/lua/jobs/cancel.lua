-- layout: job (src/lua/layouts/job.lua). job_queue::cancel.
-- ARGV: 1 id, 2 token, 3 wake channel. Contract "Cancel": HINCRBY
-- cancelled, LPUSH ids, ZREM claimed. Returns the new failure count.
local e = open_feed('job') or check_publish(ARGV[3]) if e then return e end
local id = ARGV[1]
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
local f = redis.call('HINCRBY', K_CANCELLED, id, 1)
redis.call('LPUSH', K_IDS, id)
redis.call('ZREM', K_CLAIMED, id)
redis.call('HSET', K_ATTEMPTS, id, '-' .. ARGV[2])
wake(K_SLEEPERS, ARGV[3], 1)
return f
