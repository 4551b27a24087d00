-- Hand-off (docs/jobs.md "Hand-off"): jobs claimed by a put for idle
-- claimers and sent on their channels.
--- @include "includes/acl"
--- @include "includes/claims"
--- @include "includes/give_back"
--- @include "includes/notify"
--- @include "includes/numbers"
--- @include "includes/tokens"
--- @include "includes/workers"

-- Hand-off (docs/jobs.md "Hand-off"). feed.takers lists the runners and
-- job_queue handles that found the queue dry and wait with idle slots:
-- field the taker, value `<lapses at, server ms>:<idle slots>` for a
-- runner (a registered worker) and the same with `:c` after it for a
-- handle's waiting claim() calls (no registration: its entry lives only as
-- long as it says). A put that finds sleepers claims its jobs for live
-- takers (claim_jobs, recorded under the taker) and publishes them on the
-- taker's own channel, so a job reaches an idle claimer in one hop, not a
-- wake-up followed by a claim round trip. jobs/work.lua keeps a runner's
-- entry and jobs/claim.lua a handle's; remove_worker drops a runner's.
local function take_channel(w)
  return 'job.take:' .. string.sub(K_CONFIG, 13) .. ':' .. w
end

-- A hand-off message for jobs c[first..last] of a claim_jobs reply: per job
-- `id\0token\0failures\0<item length>\0item` (ids hold no NUL, items may).
-- src/jobs/hand_off.cpp parses it.
local function take_message(c, last)
  local parts = {}
  for i = 1, last, 4 do
    parts[#parts + 1] = c[i] .. '\0' .. int(c[i + 3]) .. '\0' .. int(c[i + 2]) .. '\0' ..
                            int(#c[i + 1]) .. '\0' .. c[i + 1]
  end
  return table.concat(parts)
end

-- The takers a put of `n` jobs may hand them to, found before the put's
-- first write (then nothing after it can fail): the entry has not lapsed,
-- a runner's registration is alive and the user may publish on its
-- channel (a taker this user may not reach is skipped: its runner is woken
-- as any sleeper is). Entries that lapsed or whose worker is gone are
-- dropped as they are met. Stops once the takers found have `n` idle slots
-- between them, so a queue with many idle runners costs a put no more than
-- the runners it needs. `now` is the server's clock (server_ms). Returns a
-- list of {worker, idle slots, lapses at, mark}, and `now` as its field srv.
local function live_takers(n, now)
  local all = redis.call('HGETALL', K_TAKERS)
  if #all == 0 then return all end
  local out, gone, room = {srv = now}, {}, 0
  for i = 1, #all, 2 do
    if room >= n then break end
    local w = all[i]
    local exp, slots, mark = string.match(all[i + 1], '^(%d+):(%d+)(.*)$')
    exp, slots = tonumber(exp), tonumber(slots)
    if mark ~= '' and mark ~= ':c' then exp = nil end
    if not exp or exp < now or slots < 1 or (mark == '' and not worker_alive(w, now)) then
      gone[#gone + 1] = w
    elseif not check_publish(take_channel(w)) then
      out[#out + 1] = {w, slots, exp, mark}
      room = room + slots
    end
  end
  if #gone > 0 then redis.call('HDEL', K_TAKERS, unpack(gone)) end
  return out
end

-- A hand-off to a job_queue handle (mark ':c') is provisional until the
-- handle confirms that the message arrived (jobs/take_confirm.lua, sent
-- within about 50 ms of its arrival). Meanwhile feed.handed:[f] holds it:
-- member `id\0token` (the claim), score the server time (ms) at which it
-- lapses, HANDED_MS after the put. A claim still current at that time
-- never reached a live handle (its process died or stopped, or its
-- subscriber was down): handed_back gives it back. A handle is not a
-- registered worker, so nothing else would notice its death before the
-- lease lapsed; a runner's hand-offs need no confirmation, as its
-- registration stands for them (they come back when it lapses).
local HANDED_MS = 1000

-- Records the first `got` jobs of claim_jobs reply `c`, just handed to a
-- handle at server time `srv`, as provisional.
local function provisional(c, got, srv)
  local z, at = {}, int(srv + HANDED_MS)
  for i = 1, got do
    z[2 * i - 1] = at
    z[2 * i] = c[4 * i - 3] .. '\0' .. int(c[4 * i])
  end
  redis.call('ZADD', K_HANDED, unpack(z))
end

-- The hand-offs that lapsed unconfirmed by server time `srv` (at most
-- `limit`) leave feed.handed; each whose claim is still current goes back
-- to the front of the line with no failure counted (give_back, which wakes
-- sleepers on `channel`), its claim record with it. Returns how many went
-- back and how many entries lapsed.
local function handed_back(srv, channel, limit)
  local due = redis.call('ZRANGEBYSCORE', K_HANDED, '-inf', int(srv), 'LIMIT', '0', int(limit))
  if #due == 0 then return 0, 0 end
  redis.call('ZREM', K_HANDED, unpack(due))
  local cs, ids = {}, {}
  for i = 1, #due do
    local at = string.find(due[i], '\0', 1, true)
    if at then
      local id, tok = string.sub(due[i], 1, at - 1), string.sub(due[i], at + 1)
      if claim_current(id, tok) then
        cs[#cs + 1] = {id, tok}
        ids[#ids + 1] = id
      end
    end
  end
  if #cs == 0 then return 0, #due end
  redis.call('HDEL', K_WORKER_JOBS, unpack(ids))
  return give_back(cs, channel), #due
end

-- For a claim whose claim_jobs reply `c` came back short (the line ran
-- dry): the hand-offs that lapsed unconfirmed by server time `srv` go back
-- (handed_back, waking sleepers on `channel`) and are claimed too, for up
-- to `want` jobs in all (as claim_jobs(now, want, worker) would have).
-- Returns the reply, extended.
local function reclaim_handed(c, now, want, worker, srv, channel)
  if handed_back(srv, channel, 100) == 0 then return c end
  c[#c] = nil
  local more = claim_jobs(now, want - #c / 4, worker)
  for i = 1, #more do c[#c + 1] = more[i] end
  return c
end

-- Claims up to `n` waiting jobs for `takers` (live_takers), each up to its
-- idle slots, as jobs/work.lua would have, and publishes each taker's jobs
-- on its channel in one message. A taker whose slots are all used leaves
-- feed.takers. Stops at the first taker that got fewer than it could take
-- (the queue ran dry, or pause or the rate limit held claims back).
-- With `fresh` (jobs/put.lua: the ids its put just stored and left out of
-- the line, which was empty, with the queue neither paused nor rate
-- limited), the takers get those ids in order, their items from ARGV from
-- `first` on, without a look at the line or the schedule: claim_jobs would
-- have popped the same ones. The caller pushes the ones left.
-- Returns how many jobs were handed off.
local function hand_off(takers, now, n, fresh, first)
  local handed = 0
  for i = 1, #takers do
    if handed >= n then break end
    local t = takers[i]
    local want = math.min(t[2], n - handed)
    local c
    if fresh then
      local ids, its = {}, {}
      for j = 1, want do
        ids[j] = fresh[handed + j]
        its[j] = ARGV[first + handed + j - 1]
      end
      c = claim_ids(now, ids, its, t[1])
    else
      c = claim_jobs(now, want, t[1])
    end
    local got = math.floor(#c / 4)
    if got > 0 then
      redis.call(NOTIFY, take_channel(t[1]), take_message(c, 4 * got))
      if t[4] == ':c' then provisional(c, got, takers.srv) end
      handed = handed + got
      if got < t[2] then
        redis.call('HSET', K_TAKERS, t[1], int(t[3]) .. ':' .. int(t[2] - got) .. t[4])
      else
        redis.call('HDEL', K_TAKERS, t[1])
      end
    end
    if got < want then break end
  end
  return handed
end

-- The offer of jobs/work.lua (a runner) and jobs/claim.lua (a handle's
-- claimers, `mark` ':c'; a runner's is ''): after a call that asked for
-- jobs, a taker with `offer` idle slots (-1: it offers none and has no
-- entry; 0: it offers none) is a taker for the slots the call left idle,
-- while the queue ran dry (`dry`), until server time `srv` + `ttl`; else
-- its entry goes.
local function offer_slots(worker, offer, got, dry, srv, ttl, mark)
  if offer < 0 then return end
  if dry and offer > got then
    redis.call('HSET', K_TAKERS, worker, int(srv + ttl) .. ':' .. int(offer - got) .. mark)
  else
    redis.call('HDEL', K_TAKERS, worker)
  end
end
