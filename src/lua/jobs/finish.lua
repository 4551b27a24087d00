-- job_queue::finish (batched).
-- KEYS: layout job (src/lua/layouts/job.lua), then result keys (KEYS[K_FIRST_RESULT..]).
-- ARGV: 1 job.finish channel, then per job id, token, result key index in
-- KEYS (0: no result), result. finish_jobs (includes/finish.lua) for
-- each: returns one status per job, 0 finished, 1 job_not_found,
-- 2 job_not_claimed, 3 lost_claim, 4 no_channel_permission.
--- @include "includes/finish"
--- @include "includes/job_queue"
--- @include "includes/numbers"
local e = open_job('result_ttl_ms') if e then return e end
return finish_jobs(ARGV[1], 2, (#ARGV - 1) / 4, conf_int(Q.conf[3], 300000, 1))
