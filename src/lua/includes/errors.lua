-- Errors of every script (docs/architecture.md "Scripts").

-- Errors: one convention for every script, `THOONK <code> <message>`; the
-- C++ mapper (detail::reply_error, src/feeds/common.cpp) turns <code> into
-- the error code of the same name (feed_not_found -> error::feed_not_found).
local function fail(code, msg)
  if msg then return redis.error_reply('THOONK ' .. code .. ' ' .. msg) end
  return redis.error_reply('THOONK ' .. code)
end
