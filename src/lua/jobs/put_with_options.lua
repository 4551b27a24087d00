-- job_queue::put(item, put_options).
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 now_ms, 2 wake channel, 3 id ('' for a new one), 4 item,
-- 5 run_at (ms), 6 update flags (4 letters: data r/k, run_at a/l/e/n,
-- strategy r/k, counters k/r), 7 high ('1'), 8 has strategy ('1'),
-- 9..12 max_retries, max_stalls, min_backoff_ms, max_backoff_ms ('' unset).
-- Returns {id, 'added' | 'updated' | 'held'} (includes/dispatch.lua, includes/hold.lua).
-- A job it makes claimable goes to an idle runner first, as jobs/put.lua
-- hands jobs off (after the hand-offs that lapsed unconfirmed went back).
--- @include "includes/acl"
--- @include "includes/clock"
--- @include "includes/dispatch"
--- @include "includes/hand_off"
--- @include "includes/hold"
--- @include "includes/ids"
--- @include "includes/job_queue"
local e = open_job() or check_publish(ARGV[2]) if e then return e end
local srv = redis.call('EXISTS', K_SLEEPERS) == 1 and server_ms()
if srv then cold.handed_back(srv, ARGV[2], 100) end
local takers = srv and cold.live_takers(1, srv)
local now = tonumber(ARGV[1])
local f = ARGV[6]
local p = {item = ARGV[4], run_at = tonumber(ARGV[5]), high = ARGV[7] == '1',
           f = {d = string.sub(f, 1, 1), ra = string.sub(f, 2, 2),
                s = string.sub(f, 3, 3), c = string.sub(f, 4, 4)}}
if ARGV[8] == '1' then
  p.s = {mr = tonumber(ARGV[9]), ms = tonumber(ARGV[10]), minb = tonumber(ARGV[11]),
         maxb = tonumber(ARGV[12])}
end
local id = ARGV[3]
local outcome
if id == '' then
  id = new_ids(K_IDINCR, 1, now)[1]
  outcome = dispatch(id, p, now)
elseif redis.call('ZSCORE', K_CLAIMED, id) then
  hold(id, p)
  outcome = 'held'
else
  p.explicit = true
  outcome = dispatch(id, p, now)
end
if takers and #takers > 0 and Q.woken > 0 then
  Q.woken = Q.woken - cold.hand_off(takers, now, Q.woken)
end
wake_woken(ARGV[2])
return {id, outcome}
