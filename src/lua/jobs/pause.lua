-- job_queue::pause.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 the queue's name, 2 the client's instance uuid, 3 the conffeed
-- channel. Sets the config field paused = '1': from now on every claim
-- script claims nothing (includes/claim_control.lua claim_allowance); puts go on. A
-- config change, announced on conffeed as Set Config Value does; the
-- permission to PUBLISH there is checked first, so a refused pause
-- changes nothing. Returns 1.
--- @include "includes/acl"
--- @include "includes/feed_config"
--- @include "includes/feed_management"
local e = open_feed('job') or check_classic_publish(ARGV[3]) if e then return e end
redis.call('HSET', K_CONFIG, 'paused', '1')
announce_config(ARGV[3], ARGV[1], ARGV[2])
return 1
