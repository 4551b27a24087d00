-- job maintenance: lapsed claims.
-- KEYS: layout job (src/lua/layouts/job.lua), then the dead-letter queue's (as jobs/fail.lua).
-- ARGV: 1 now_ms, 2 batch, 3 wake channel, 4 dead-letter queue name as
-- the caller knows it, 5 its wake channel. Up to `batch` claims older
-- than claim_timeout_ms end as lapses (includes/lapse.lua lapse: a
-- stall counted, back to the end of the line or a dead letter once the
-- stall count reaches max_stalls, then a held put applied). First, up to
-- `batch` hand-offs to job_queue handles that lapsed unconfirmed go back
-- (includes/hand_off.lua handed_back: no stall, no failure counted).
-- Returns {requeued, dead-lettered, examined (the larger of the claims and
-- the hand-offs looked at)}, or {'dlq', name} as jobs/fail.lua.
--- @include "includes/acl"
--- @include "includes/clock"
--- @include "includes/dead_letter"
--- @include "includes/hand_off"
--- @include "includes/job_queue"
--- @include "includes/lapse"
--- @include "includes/numbers"
local e = open_job() or check_publish(ARGV[3]) if e then return e end
local dle, changed = use_dlq(ARGV[4], ARGV[5])
if dle then return dle end
if changed then return {'dlq', changed} end
local now = tonumber(ARGV[1])
local _, handed = handed_back(server_ms(), ARGV[3], tonumber(ARGV[2]))
engine_settings()
local cutoff = now - Q.claim_timeout
local ids = redis.call('ZRANGEBYSCORE', K_CLAIMED, '-inf', '(' .. int(cutoff),
                       'LIMIT', 0, tonumber(ARGV[2]))
local rq, st = 0, 0
for _, id in ipairs(ids) do
  local r = lapse(id, now, 'lease lapsed')
  if r == 'requeued' then rq = rq + 1 elseif r == 'dead' then st = st + 1 end
end
wake_woken(ARGV[3])
return {rq, st, math.max(#ids, handed)}
