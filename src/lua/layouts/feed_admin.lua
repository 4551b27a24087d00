-- Layout `feed_admin`: the feed management scripts of cluster mode
-- (cluster_create, cluster_delete, cluster_set_config), which touch the
-- feed's own keys only: the `feeds` set lives in another hash slot and is
-- changed by a command of its own (docs/cluster.md, "Feed management").
-- The C++ side builds these KEYS with detail::feed_admin_keys()
-- (src/feeds/common.hpp): KEYS[1] feed.config:[f], KEYS[2..] every other
-- key of the feed (create and delete only, see detail::all_keys).
--- @include "includes/acl"
local K_CONFIG = KEYS[1]
local K_FEED_FIRST = 1
-- cluster_create.lua: ARGV[7..] the config's field, value pairs.
local CONFIG_FIRST = 7
