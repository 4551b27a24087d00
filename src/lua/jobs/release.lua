-- layout: job (src/lua/layouts/job.lua). job_queue: claims made for waiters that went away.
-- ARGV: 1 wake channel, then id, token pairs in claim order. Un-claims
-- jobs claimed for waiters that went away: back to the front of the line,
-- no failure counted; a put held for one of them is applied then.
-- Returns how many.
local e = open_job() if e then return e end
local m = (#ARGV - 1) / 2
local back = {}
for j = m, 1, -1 do
  local id, tok = ARGV[2 * j], ARGV[2 * j + 1]
  if redis.call('ZSCORE', K_CLAIMED, id) and redis.call('HGET', K_ATTEMPTS, id) == tok then
    redis.call('ZREM', K_CLAIMED, id)
    redis.call('HSET', K_ATTEMPTS, id, '-' .. tok)
    back[#back + 1] = id
  end
end
if #back > 0 then
  redis.call('RPUSH', K_IDS, unpack(back))
  Q.woken = Q.woken + #back
  if redis.call('EXISTS', K_HELD) == 1 then
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    for i = 1, #back do release_held(back[i], now) end
  end
  wake_woken(ARGV[1])
end
return #back
