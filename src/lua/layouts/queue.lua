-- Layout `queue`: the queue scripts. The C++ side builds these KEYS with
-- jobs::queue_keys (src/jobs/job_keys.hpp), in this order.
--- @include "includes/acl"
local K_CONFIG, K_IDS, K_ITEMS, K_PUBLISHES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_IDINCR, K_SLEEPERS = KEYS[5], KEYS[6]
