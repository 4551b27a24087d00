-- Needs b.
--- @include "includes/b"
local function a() return b() end
