-- job maintenance: due scheduled jobs.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 now_ms, 2 batch, 3 wake channel. Up to `batch` due scheduled jobs join the end
-- of the line (run_at order, ties in put order). Returns how many.
--- @include "includes/job_queue"
--- @include "includes/schedule"
local e = open_job() if e then return e end
local n = promote(tonumber(ARGV[1]), tonumber(ARGV[2]))
wake_woken(ARGV[3])
return n
