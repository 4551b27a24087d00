-- job_queue::abort.
-- KEYS: layout job (src/lua/layouts/job.lua), then the dead-letter
-- queue's (includes/dead_letter.lua use_dlq; any keys when it has none).
-- ARGV: 1 id, 2 now_ms, 3 outcome ('cancelled' | 'failed'), 4 error,
-- 5 permanent ('1'), 6 jitter in [0, 1), 7 wake channel, 8 dead-letter
-- queue name as the caller knows it, 9 its wake channel. Ends the claim of `id` whoever holds it (its token
-- ends, as when a lease lapses), then as cancel.lua (cancelled) or
-- fail.lua (failed) do after their token check; then applies a held put.
-- PUBLISHes the id on `job.abort:[name]` whatever the events setting (a
-- runner stops the job's handler on it). Returns {'ok'}, or {'dlq', name}
-- when the config names another dead-letter queue (nothing done: call
-- again with its keys). Every permission is checked before the first write.
--- @include "includes/acl"
--- @include "includes/dead_letter"
--- @include "includes/errors"
--- @include "includes/hold"
--- @include "includes/job_queue"
--- @include "includes/job_record"
--- @include "includes/notify"
--- @include "includes/numbers"
--- @include "includes/retry"
--- @include "includes/schedule"
local e = open_job() if e then return e end
local abort_channel = 'job.abort:' .. string.sub(K_CONFIG, 13)
e = check_publish(abort_channel, ARGV[7]) if e then return e end
local failed = ARGV[3] == 'failed'
if failed then
  local dle, changed = use_dlq(ARGV[8], ARGV[9])
  if dle then return dle end
  if changed then return {'dlq', changed} end
end
local id, now = ARGV[1], tonumber(ARGV[2])
if not redis.call('ZSCORE', K_CLAIMED, id) then
  if redis.call('HEXISTS', K_ITEMS, id) == 1 or redis.call('HEXISTS', K_SCHED_ITEMS, id) == 1 then
    return fail('job_not_claimed')
  end
  return fail('job_not_found')
end
redis.call('ZREM', K_CLAIMED, id)
redis.call('HDEL', K_WORKER_JOBS, id)
-- The token ends, and is remembered in the job's record so that its holder
-- gets lost_claim (claim_check, finish.lua) whatever the job's state next.
-- A job claimed with plain commands has no token (nothing to end).
local m = meta_get(id)
local tok = tonumber(redis.call('HGET', K_ATTEMPTS, id))
if tok and tok > 0 then
  redis.call('HSET', K_ATTEMPTS, id, int(-tok))
  m.ab = int(tok)
end
redis.call('HINCRBY', K_CANCELLED, id, 1)
emit('aborted', id, ARGV[3])
if failed then
  m.rc = (m.rc or 0) + 1
  local mr, _, minb, maxb = strategy_of(m)
  emit('failed', id, ARGV[4])
  if ARGV[5] == '1' or m.rc >= mr then
    dead_letter(id, m, ARGV[4], now)
  else
    m.err = ARGV[4]
    meta_set(id, m)
    local at = now + backoff(m.rc, minb, maxb, tonumber(ARGV[6]) or 0)
    requeue(id, at, now)
    emit('retry_scheduled', id, int(at))
  end
else
  meta_set(id, m)
  enqueue(id, nil, false)
end
release_held(id, now)
wake_woken(ARGV[7])
redis.call(NOTIFY, abort_channel, id)
return {'ok'}
