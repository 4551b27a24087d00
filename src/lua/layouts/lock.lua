-- Layout `lock`: the maintenance lock, KEYS[1] feed.maintenance:[f]
-- (jobs::job_keys::lock_key, src/jobs/job_keys.hpp).
--- @include "includes/acl"
local K_LOCK = KEYS[1]
