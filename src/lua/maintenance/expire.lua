-- layout: job (src/lua/layouts/job.lua). job maintenance: lapsed claims.
-- KEYS: the job layout, then the dead-letter queue's (as jobs/fail.lua).
-- ARGV: 1 now_ms, 2 batch, 3 wake channel, 4 dead-letter queue name as
-- the caller knows it, 5 its wake channel. Up to `batch` claims older
-- than claim_timeout_ms: a stall (stall count and failure count +1), then
-- back to the end of the line, or a dead letter once the stall count
-- reaches max_stalls; then a held put is applied. Their tokens end. A
-- claimed id without an item is just dropped. Returns {requeued,
-- dead-lettered, examined}, or {'dlq', name} as jobs/fail.lua.
local e = open_job() or check_publish(ARGV[3]) if e then return e end
local dle, changed = use_dlq(ARGV[4], ARGV[5])
if dle then return dle end
if changed then return {'dlq', changed} end
local now = tonumber(ARGV[1])
engine_settings()
local cutoff = now - Q.claim_timeout
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
    redis.call('HDEL', K_META, id)
  else
    redis.call('HINCRBY', K_CANCELLED, id, 1)
    local m = meta_get(id)
    m.sc = (m.sc or 0) + 1
    local _, ms = strategy_of(m)
    local err = 'lease lapsed (stall ' .. int(m.sc) .. ' of ' .. int(ms) .. ')'
    emit('stalled', id, int(m.sc))
    if m.sc >= ms then
      dead_letter(id, m, err, now)
      st = st + 1
    else
      m.err = err
      meta_set(id, m)
      enqueue(id, nil, false)
      rq = rq + 1
    end
  end
  release_held(id, now)
end
wake_woken(ARGV[3])
return {rq, st, #ids}
