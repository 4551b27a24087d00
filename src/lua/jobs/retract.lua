-- job_queue::retract.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 id. Contract "Retract", plus the extension state: a scheduled
-- job, the job's record, its claim record and a put held for it go too.
--- @include "includes/errors"
--- @include "includes/feed_config"
local e = open_feed('job') if e then return e end
local id = ARGV[1]
local sv = redis.call('HGET', K_SCHED_ITEMS, id)
if sv then
  redis.call('ZREM', K_SCHEDULED, string.sub(sv, 1, 11) .. id)
  redis.call('HDEL', K_SCHED_ITEMS, id)
elseif redis.call('HEXISTS', K_ITEMS, id) == 0 then
  return fail('job_not_found')
end
redis.call('HDEL', K_META, id)
redis.call('HDEL', K_HELD, id)
redis.call('HDEL', K_ITEMS, id)
redis.call('HDEL', K_CANCELLED, id)
redis.call('ZREM', K_PUBLISHED, id)
redis.call('SREM', K_STALLED, id)
redis.call('ZREM', K_CLAIMED, id)
redis.call('LREM', K_IDS, 1, id)
redis.call('HDEL', K_ATTEMPTS, id)
redis.call('HDEL', K_WORKER_JOBS, id)
redis.call('SREM', K_UNACCOUNTED, id)
return 1
