-- Another half.
local function half(n) return n * 0.5 end
