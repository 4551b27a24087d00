-- layout: job (src/lua/layouts/job.lua). job_queue: claims made for waiters that went away.
-- ARGV: 1 wake channel, then id, token pairs in claim order. Un-claims
-- jobs claimed for waiters that went away: back to the front of the line,
-- no failure counted. Returns how many.
local e = open_feed('job') if e then return e end
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
  wake_if_allowed(K_SLEEPERS, ARGV[1], #back)
end
return #back
