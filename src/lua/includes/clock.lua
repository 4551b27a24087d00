-- The server's clock.

-- The server's clock in ms. The worker registry keeps its times by it, so
-- that every client (whatever its clock says) agrees on which worker lapsed.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
