-- layout: job (src/lua/layouts/job.lua). job_queue::resume.
-- ARGV: 1 wake channel. Clears the config field paused and wakes every
-- waiting claimer (PUBLISH on the wake channel whether or not sleepers is
-- set: claims refused while paused do not set it). The permission to
-- PUBLISH is checked first, so a refused resume leaves the queue paused.
-- Returns 1.
local e = open_feed('job') or check_publish(ARGV[1]) if e then return e end
redis.call('HDEL', K_CONFIG, 'paused')
redis.call('DEL', K_SLEEPERS)
redis.call(NOTIFY, ARGV[1], 1)
return 1
