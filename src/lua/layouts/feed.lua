-- Layout `feed`: every data-changing feed and sorted-feed script, get_all and
-- catch_up. The C++ side builds these KEYS with detail::data_keys()
-- (src/feeds/common.hpp), in this order.
--- @include "includes/acl"
local K_CONFIG, K_IDS, K_ITEMS, K_PUBLISHES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_CHANGES, K_RETRACTS, K_TRIM, K_IDINCR = KEYS[5], KEYS[6], KEYS[7], KEYS[8]
