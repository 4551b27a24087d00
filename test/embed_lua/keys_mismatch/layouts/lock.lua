-- Another layout, with another key.
--- @include "includes/acl"
local K_LOCK = KEYS[1]
