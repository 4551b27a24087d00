-- Layout `job`: the job queue and maintenance scripts. Its keys are those
-- of layouts/job.keys, in that order (the build defines K_CONFIG ... from
-- it; the C++ side builds them with jobs::job_keys, src/jobs/job_keys.hpp).
-- jobs/finish.lua and jobs/work.lua take result keys after them
-- (KEYS[K_FIRST_RESULT..]); the scripts that can make a dead letter take
-- the dead-letter queue's keys there instead (K_DLQ_*: jobs/fail.lua,
-- maintenance/expire.lua; see includes/dead_letter.lua use_dlq).
--- @include "includes/acl"
local K_FIRST_RESULT = K_COUNT + 1
local K_DLQ_CONFIG, K_DLQ_IDS = KEYS[K_FIRST_RESULT], KEYS[K_FIRST_RESULT + 1]
local K_DLQ_ITEMS, K_DLQ_PUBLISHES = KEYS[K_FIRST_RESULT + 2], KEYS[K_FIRST_RESULT + 3]
local K_DLQ_IDINCR, K_DLQ_SLEEPERS = KEYS[K_FIRST_RESULT + 4], KEYS[K_FIRST_RESULT + 5]
