-- job_queue::resume.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 wake channel, 2 the queue's name, 3 the client's instance uuid,
-- 4 the conffeed channel. Clears the config field paused, announces the
-- config change on conffeed (as Set Config Value does) and wakes every
-- waiting claimer (PUBLISH on the wake channel whether or not sleepers is
-- set: claims refused while paused do not set it). The permissions to
-- PUBLISH are checked first, so a refused resume leaves the queue paused.
-- Returns 1.
--- @include "includes/acl"
--- @include "includes/feed_config"
--- @include "includes/feed_management"
--- @include "includes/notify"
local e = open_feed('job') or check_publish(ARGV[1]) or check_classic_publish(ARGV[4])
if e then return e end
redis.call('HDEL', K_CONFIG, 'paused')
redis.call('DEL', K_SLEEPERS)
announce_config(ARGV[4], ARGV[2], ARGV[3])
redis.call(NOTIFY, ARGV[1], 1)
return 1
