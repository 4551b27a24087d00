-- job maintenance: requeue lost jobs.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 wake channel, 2.. ids unaccounted for in this pass. Each one that
-- was already a suspect in the previous pass (feed.unaccounted) and is
-- still in no state now (item present, not claimed, not stalled, not in
-- feed.ids) is requeued (contract Maintenance: LPUSH ids). Returns the
-- requeued ids.
--- @include "includes/acl"
--- @include "includes/feed_config"
--- @include "includes/wake"
local e = open_feed('job') or check_publish(ARGV[1]) if e then return e end
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('SISMEMBER', K_UNACCOUNTED, id) == 1
     and redis.call('HEXISTS', K_ITEMS, id) == 1
     and not redis.call('ZSCORE', K_CLAIMED, id)
     and redis.call('SISMEMBER', K_STALLED, id) == 0
     and not redis.call('LPOS', K_IDS, id) then
    redis.call('LPUSH', K_IDS, id)
    out[#out + 1] = id
  end
end
if #out > 0 then wake(K_SLEEPERS, ARGV[1], #out) end
return out
