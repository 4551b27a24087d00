-- layout: job (src/lua/layouts/job.lua). job_queue::pause.
-- No ARGV. Sets the config field paused = '1': from now on every claim
-- script claims nothing (job_engine.lua claim_allowance); puts go on.
-- Returns 1.
local e = open_feed('job') if e then return e end
redis.call('HSET', K_CONFIG, 'paused', '1')
return 1
