-- One half.
local function half(n) return n / 2 end
