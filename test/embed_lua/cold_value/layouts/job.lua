-- A layout with one value and one function.
local LIMIT = 10
local function twice(n) return 2 * n end
