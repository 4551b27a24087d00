-- Claims that end with no failure counted.
--- @include "includes/clock"
--- @include "includes/hold"
--- @include "includes/job_queue"
--- @include "includes/tokens"

-- Claims that end with no failure counted (a release, a worker's stop, a
-- hand-off its runner never received): each {id, token} of `cs` that is
-- still current goes back to the front of the line, the first of `cs` out
-- first, its token ended; a put held for it is applied. Wakes sleepers on
-- `channel` (when the user may PUBLISH it). Returns how many went back.
local function give_back(cs, channel)
  local back = {}
  for i = #cs, 1, -1 do
    local id, tok = cs[i][1], cs[i][2]
    if claim_current(id, tok) then
      redis.call('ZREM', K_CLAIMED, id)
      redis.call('HSET', K_ATTEMPTS, id, '-' .. tok)
      back[#back + 1] = id
    end
  end
  if #back == 0 then return 0 end
  redis.call('RPUSH', K_IDS, unpack(back))
  Q.woken = Q.woken + #back
  if redis.call('EXISTS', K_HELD) == 1 then
    local now = server_ms()
    for i = 1, #back do release_held(back[i], now) end
  end
  wake_woken(channel)
  return #back
end
