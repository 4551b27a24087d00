-- job_queue::claim.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 now_ms, 2 n, 3 wake channel, then for a handle that takes
-- hand-offs (docs/jobs.md "Hand-off"): 4 its taker name, 5 the claimers it
-- has waiting (0: none, its offer goes), 6 how long an offer lasts (ms).
-- claim_jobs (includes/claims.lua) for up to n jobs, recorded under no
-- worker; when the line runs short, the hand-offs to handles that lapsed
-- unconfirmed go back and are claimed too (reclaim_handed).
-- With a taker and the queue found dry, the waiting claimers the call did
-- not serve are offered for hand-off (offer_slots); otherwise the offer
-- goes. n = 0 only withdraws the offer. Returns {id, item, failures,
-- token, ...} and, when it got fewer than n, when to try again (ms; 0: at
-- a wake-up or poll): the time the rate limit allows more, else the
-- earliest run_at of a scheduled job.
--- @include "includes/claim_control"
--- @include "includes/claims"
--- @include "includes/clock"
--- @include "includes/hand_off"
local e = open_claim() if e then return e end
local n, taker = tonumber(ARGV[2]), ARGV[4]
if n == 0 then
  if taker then redis.call('HDEL', K_TAKERS, taker) end
  return {0}
end
local now = tonumber(ARGV[1])
local c = claim_jobs(now, n, nil)
local srv
if #c % 4 == 1 then
  srv = server_ms()
  c = cold.reclaim_handed(c, now, n, nil, srv, ARGV[3])
end
if taker then
  offer_slots(taker, tonumber(ARGV[5]), math.floor(#c / 4), #c % 4 == 1, srv or server_ms(),
              tonumber(ARGV[6]), ':c')
end
return c
