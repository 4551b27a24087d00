-- job_queue::retry.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 id, 2 now_ms, 3 wake channel. Contract "Retry": SREM stalled,
-- LPUSH ids, ZADD published.
--- @include "includes/acl"
--- @include "includes/errors"
--- @include "includes/feed_config"
--- @include "includes/wake"
local e, cfg = open_feed('job', 'published') if e then return e end
local perm = check_publish(ARGV[3]) if perm then return perm end
local id = ARGV[1]
if redis.call('HEXISTS', K_ITEMS, id) == 0 then return fail('job_not_found') end
if redis.call('SISMEMBER', K_STALLED, id) == 0 then return fail('job_not_stalled') end
redis.call('SREM', K_STALLED, id)
redis.call('LPUSH', K_IDS, id)
if cfg[2] == '1' then redis.call('ZADD', K_PUBLISHED, ARGV[2], id) end
wake(K_SLEEPERS, ARGV[3], 1)
return 1
