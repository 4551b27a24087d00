-- job_queue::run: a runner's check for hand-offs it missed (docs/jobs.md "Hand-off").
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 worker, 2 the fence message (starts with NUL, which no hand-off
-- message does). The worker's taker entry goes, so no put hands it a job
-- after this, and the fence goes out on its channel: every hand-off
-- published before reaches the runner before the fence. Once the fence
-- arrived, jobs/reconcile.lua gives back the claims it did not receive.
-- Returns 1.
--- @include "includes/acl"
--- @include "includes/hand_off"
--- @include "includes/job_queue"
--- @include "includes/notify"
local e = open_job() or check_publish(take_channel(ARGV[1])) if e then return e end
redis.call('HDEL', K_TAKERS, ARGV[1])
redis.call(NOTIFY, take_channel(ARGV[1]), ARGV[2])
return 1
