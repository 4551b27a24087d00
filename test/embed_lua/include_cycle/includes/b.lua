-- Needs a.
--- @include "includes/a"
local function b() return a() end
