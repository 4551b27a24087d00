-- Numbers as scripts pass and read them.

local function int(n) return string.format('%d', n) end

-- A config number as the scripts read it: the text of a decimal integer
-- (an optional '-', then digits, nothing else) within lo .. hi (hi: 2^53 - 1
-- when nil), else the default. Every script reads every config number
-- through it, and the C++ side by the same rule with the same ranges
-- (detail::read_config_int): tonumber alone would also take '1e3', '0x10',
-- ' 5' or '5.0', which read_settings reports unset. create_feed /
-- set_config refuse such values (validate_config_field); this guards
-- against values written with plain commands (a fractional PEXPIRE would
-- fail after the writes). Past 2^53 the text of a value and its double
-- differ, but any text above 2^53 - 1 reads as a double above it too.
local function conf_int(v, default, lo, hi)
  if type(v) ~= 'string' or not string.find(v, '^%-?%d+$') then return default end
  local n = tonumber(v)
  if n < lo or n > (hi or 9007199254740991) then return default end
  return n
end
