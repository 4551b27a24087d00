-- Bytes as JSON values (dead letters).

-- Whether s is valid UTF-8 (so it can go into JSON as a string).
local function utf8_valid(s)
  if not string.find(s, '[\128-\255]') then return true end
  local i, n = 1, #s
  while i <= n do
    local c = string.byte(s, i)
    local k, lo, hi = 0, 128, 191
    if c < 128 then
      k = 0
    elseif c >= 194 and c <= 223 then
      k = 1
    elseif c >= 224 and c <= 239 then
      k = 2
      if c == 224 then lo = 160 elseif c == 237 then hi = 159 end
    elseif c >= 240 and c <= 244 then
      k = 3
      if c == 240 then lo = 144 elseif c == 244 then hi = 143 end
    else
      return false
    end
    for j = 1, k do
      local b = string.byte(s, i + j)
      if not b or b < lo or b > hi then return false end
      lo, hi = 128, 191
    end
    i = i + k + 1
  end
  return true
end

local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = string.byte(s, i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = {}
    for j = 4, 1, -1 do
      local d = v % 64
      q[j] = string.sub(B64, d + 1, d + 1)
      v = (v - d) / 64
    end
    if not b then q[3] = '=' end
    if not c then q[4] = '=' end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

-- A JSON value for bytes: a string when they are valid UTF-8, else
-- {"base64": "..."}.
local function json_bytes(s)
  if utf8_valid(s) then return cjson.encode(s) end
  return '{"base64":"' .. base64(s) .. '"}'
end
