-- job_queue::fail.
-- KEYS: layout job (src/lua/layouts/job.lua), then the dead-letter
-- queue's (includes/dead_letter.lua use_dlq; any keys when it has none).
-- ARGV: 1 id, 2 token, 3 now_ms, 4 error, 5 retry_at ('' for the
-- backoff), 6 permanent ('1'), 7 jitter in [0, 1), 8 wake channel, 9 dead-letter queue name as the caller knows it,
-- 10 its wake channel, 11 the worker that held the claim ('' or absent:
-- none; unused: the claim's record goes whoever failed it). Counts the
-- failure (retry count, feed.cancelled),
-- then schedules the retry or makes a dead letter; then applies a held
-- put. Returns {'retry', run_at, retry_count} or {'dead', 0, retry_count},
-- or {'dlq', name} when the config names another dead-letter queue
-- (nothing done: call again with its keys).
--- @include "includes/acl"
--- @include "includes/dead_letter"
--- @include "includes/errors"
--- @include "includes/hold"
--- @include "includes/job_queue"
--- @include "includes/job_record"
--- @include "includes/numbers"
--- @include "includes/retry"
--- @include "includes/schedule"
--- @include "includes/tokens"
local e = open_job() or check_publish(ARGV[8]) if e then return e end
local dle, changed = use_dlq(ARGV[9], ARGV[10])
if dle then return dle end
if changed then return {'dlq', changed} end
local id, now = ARGV[1], tonumber(ARGV[3])
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
redis.call('ZREM', K_CLAIMED, id)
redis.call('HSET', K_ATTEMPTS, id, '-' .. ARGV[2])
redis.call('HDEL', K_WORKER_JOBS, id)
redis.call('HINCRBY', K_CANCELLED, id, 1)
local m = meta_get(id)
m.rc = (m.rc or 0) + 1
local mr, _, minb, maxb = strategy_of(m)
emit('failed', id, ARGV[4])
local out
if ARGV[6] == '1' or m.rc >= mr then
  dead_letter(id, m, ARGV[4], now)
  out = {'dead', 0, m.rc}
else
  m.err = ARGV[4]
  meta_set(id, m)
  local at = tonumber(ARGV[5])
  if not at then at = now + backoff(m.rc, minb, maxb, tonumber(ARGV[7]) or 0) end
  requeue(id, at, now)
  emit('retry_scheduled', id, int(at))
  out = {'retry', at, m.rc}
end
release_held(id, now)
wake_woken(ARGV[8])
return out
