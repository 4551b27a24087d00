-- layout: job (src/lua/layouts/job.lua). job_queue::run: a worker leaves (spec 003 stopWork).
-- ARGV: 1 worker, 2 wake channel. Every claim the worker still holds goes
-- back to the front of the line with no failure counted (its token ends,
-- as jobs/release.lua does; a held put is applied then); its
-- registration, description and claim records go. Returns how many jobs
-- went back.
local e = open_job() or check_publish(ARGV[2]) if e then return e end
local held = remove_worker(ARGV[1])
local back = {}
for i = 1, #held do
  local c = held[i]
  redis.call('ZREM', K_CLAIMED, c[1])
  redis.call('HSET', K_ATTEMPTS, c[1], '-' .. c[2])
  back[i] = c[1]
end
if #back > 0 then
  redis.call('RPUSH', K_IDS, unpack(back))
  Q.woken = Q.woken + #back
  if redis.call('EXISTS', K_HELD) == 1 then
    local now = server_ms()
    for i = 1, #back do release_held(back[i], now) end
  end
  wake_woken(ARGV[2])
end
return #back
