-- job_queue::run: a worker leaves (worker liveness).
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 worker, 2 wake channel. Every claim the worker still holds goes
-- back to the front of the line with no failure counted (its token ends,
-- as jobs/release.lua does; a held put is applied then); its
-- registration, description and claim records go. Returns how many jobs
-- went back.
--- @include "includes/acl"
--- @include "includes/give_back"
--- @include "includes/job_queue"
--- @include "includes/workers"
local e = open_job() or check_publish(ARGV[2]) if e then return e end
return give_back(remove_worker(ARGV[1]), ARGV[2])
