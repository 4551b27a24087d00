-- job_queue::progress.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 id, 2 token, 3 progress text. For the current claim holder
-- only (the token check of heartbeat): keeps the text in the job's record
-- (feed.jobmeta, field pg; describe reads it back) and, with events on,
-- publishes a `progress` job event with it. Returns 1.
--- @include "includes/errors"
--- @include "includes/job_queue"
--- @include "includes/job_record"
--- @include "includes/tokens"
local e = open_job() if e then return e end
local id = ARGV[1]
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
local m = meta_get(id)
m.pg = ARGV[3]
meta_set(id, m)
emit('progress', id, ARGV[3])
return 1
