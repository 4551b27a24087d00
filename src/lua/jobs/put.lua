-- job_queue::put, put_many.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 now_ms, 2 high, 3 wake channel, 4.. items. Returns ids.
-- Contract "Put": LPUSH/RPUSH ids, HSET items, ZADD published, INCR
-- publishes (the contract's high-priority put forgets the INCR; we count
-- every put). When a claimer sleeps (feed.sleepers), the jobs go to idle
-- runners first (hand-off, includes/hand_off.lua: claimed for them and
-- sent on their channels); only what is left wakes the sleepers. A busy
-- queue pays one EXISTS for this, as it paid one DEL for the wake-up.
-- When the line is empty and claims run free (not paused, no rate limit),
-- the jobs handed off never enter the line: the claim would pop exactly
-- these (a due scheduled job would join the line behind them). A put that
-- finds sleepers first gives back the hand-offs to job_queue handles that
-- lapsed unconfirmed (includes/hand_off.lua handed_back): they are older
-- than its jobs.
--- @include "includes/acl"
--- @include "includes/claim_control"
--- @include "includes/clock"
--- @include "includes/hand_off"
--- @include "includes/job_queue"
--- @include "includes/numbers"
--- @include "includes/queue_items"
--- @include "includes/wake"
local e = open_claim('published') or check_publish(ARGV[3])
if e then return e end
local n = #ARGV - 3
if n < 1 then return {} end
local now, high = tonumber(ARGV[1]), ARGV[2] == '1'
local sleeping = redis.call('EXISTS', K_SLEEPERS) == 1
local srv = sleeping and server_ms()
if sleeping then cold.handed_back(srv, ARGV[3], 100) end
local takers = sleeping and cold.live_takers(n, srv)
local direct = takers and #takers > 0 and Q.ctl[1] ~= '1' and
                   conf_int(Q.ctl[2], 0, 0, 1000000) == 0 and redis.call('LLEN', K_IDS) == 0
local ids
if direct then
  ids = store_new(4, now)
else
  ids = store_items(4, now, high)
end
if Q.conf[5] == '1' then
  local z = {}
  for i = 1, n do z[2 * i - 1] = ARGV[1]; z[2 * i] = ids[i] end
  redis.call('ZADD', K_PUBLISHED, unpack(z))
end
redis.call('INCRBY', K_PUBLISHES, n)
if Q.events then
  for i = 1, n do emit('put', ids[i]) end
end
if sleeping then
  Q.woken = n
  if direct then
    local handed = cold.hand_off(takers, now, n, ids, 4)
    if handed < n then push(K_IDS, {unpack(ids, handed + 1)}, high) end
    Q.woken = n - handed
  elseif #takers > 0 then
    Q.woken = n - cold.hand_off(takers, now, n)
  end
  if Q.woken > 0 then wake(K_SLEEPERS, ARGV[3], Q.woken) end
end
return ids
