-- job_queue::failures, get_ids, counts, open.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 'type' | 'failures' | 'ids' | 'counts', 2 id (failures).
--- @include "includes/errors"
--- @include "includes/feed_config"
local e = open_feed('job') if e then return e end
local w = ARGV[1]
if w == 'failures' then
  if redis.call('HEXISTS', K_ITEMS, ARGV[2]) == 0
     and redis.call('HEXISTS', K_SCHED_ITEMS, ARGV[2]) == 0 then
    return fail('job_not_found')
  end
  return tonumber(redis.call('HGET', K_CANCELLED, ARGV[2])) or 0
elseif w == 'ids' then
  local ids = redis.call('HKEYS', K_ITEMS)
  local s = redis.call('HKEYS', K_SCHED_ITEMS)
  for i = 1, #s do ids[#ids + 1] = s[i] end
  return ids
elseif w == 'counts' then
  return {redis.call('LLEN', K_IDS), redis.call('ZCARD', K_CLAIMED),
          redis.call('SCARD', K_STALLED), redis.call('HLEN', K_ITEMS),
          tonumber(redis.call('GET', K_PUBLISHES)) or 0,
          tonumber(redis.call('GET', K_FINISHES)) or 0,
          redis.call('ZCARD', K_SCHEDULED), redis.call('HLEN', K_HELD)}
end
return 1
