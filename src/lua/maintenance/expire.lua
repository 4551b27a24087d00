-- layout: job (src/lua/layouts/job.lua). job maintenance: lapsed claims.
-- ARGV: 1 now_ms, 2 batch, 3 wake channel. Up to `batch` claims older than
-- claim_timeout_ms: failure +1, then requeued (LPUSH, as Cancel) or, past
-- max_failures, stalled (as Stall). Their tokens end. A claimed id without
-- an item is just dropped. Returns {requeued, stalled, examined}.
local e, cfg = open_feed('job', 'claim_timeout_ms', 'max_failures') if e then return e end
local perm = check_publish(ARGV[3]) if perm then return perm end
local timeout = conf_int(cfg[2], 60000, 1)
local maxf = conf_int(cfg[3], 5, 0)
local cutoff = tonumber(ARGV[1]) - timeout
local ids = redis.call('ZRANGEBYSCORE', K_CLAIMED, '-inf', '(' .. int(cutoff),
                       'LIMIT', 0, tonumber(ARGV[2]))
local rq, st = 0, 0
for _, id in ipairs(ids) do
  redis.call('ZREM', K_CLAIMED, id)
  local a = tonumber(redis.call('HGET', K_ATTEMPTS, id))
  if a and a > 0 then redis.call('HSET', K_ATTEMPTS, id, int(-a)) end
  if redis.call('HEXISTS', K_ITEMS, id) == 0 then
    redis.call('HDEL', K_ATTEMPTS, id)
    redis.call('HDEL', K_CANCELLED, id)
  else
    local f = redis.call('HINCRBY', K_CANCELLED, id, 1)
    if f > maxf then
      redis.call('HDEL', K_CANCELLED, id)
      redis.call('SADD', K_STALLED, id)
      redis.call('ZREM', K_PUBLISHED, id)
      st = st + 1
    else
      redis.call('LPUSH', K_IDS, id)
      rq = rq + 1
    end
  end
end
if rq > 0 then wake(K_SLEEPERS, ARGV[3], rq) end
return {rq, st, #ids}
