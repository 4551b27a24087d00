-- layout: job (src/lua/layouts/job.lua). job_queue::retract.
-- ARGV: 1 id. Contract "Retract", plus the extension state.
local e = open_feed('job') if e then return e end
local id = ARGV[1]
if redis.call('HEXISTS', K_ITEMS, id) == 0 then return fail('job_not_found') end
redis.call('HDEL', K_ITEMS, id)
redis.call('HDEL', K_CANCELLED, id)
redis.call('ZREM', K_PUBLISHED, id)
redis.call('SREM', K_STALLED, id)
redis.call('ZREM', K_CLAIMED, id)
redis.call('LREM', K_IDS, 1, id)
redis.call('HDEL', K_ATTEMPTS, id)
redis.call('SREM', K_UNACCOUNTED, id)
return 1
