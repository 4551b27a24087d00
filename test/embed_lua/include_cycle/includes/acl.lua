-- The check the build calls before every script.
local function check_commands(...) return nil end
