-- Layout `admin`: the feed management scripts (create, delete, set_config).
-- The C++ side builds these KEYS with detail::admin_keys()
-- (src/feeds/common.hpp): KEYS[1] the `feeds` set, KEYS[2] feed.config:[f],
-- KEYS[3..] every other key of the feed (create and delete only; see
-- detail::all_keys in src/detail/keys.hpp).
--- @include "includes/acl"
local K_FEEDS, K_CONFIG = KEYS[1], KEYS[2]
local K_FEED_FIRST = 2
-- create.lua: ARGV[6..] the config's field, value pairs.
local CONFIG_FIRST = 6
