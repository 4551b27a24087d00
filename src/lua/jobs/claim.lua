-- layout: job (src/lua/layouts/job.lua). job_queue::claim.
-- ARGV: 1 now_ms, 2 n. claim_jobs (layouts/job_engine.lua) for up to n
-- jobs, recorded under no worker. Returns {id, item, failures, token, ...}
-- and, when it got fewer than n, when to try again (ms; 0: at a wake-up
-- or poll): the time the rate limit allows more, else the earliest run_at
-- of a scheduled job.
local e = open_claim() if e then return e end
return claim_jobs(tonumber(ARGV[1]), tonumber(ARGV[2]), nil)
