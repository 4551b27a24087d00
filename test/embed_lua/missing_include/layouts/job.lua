-- A layout with one key, one value and one function.
--- @include "includes/acl"
local K_IDS = KEYS[1]
local LIMIT = 10
local function twice(n) return 2 * n end
