-- layout: job (src/lua/layouts/job.lua). job maintenance: orphaned tokens.
-- ARGV: 1 cursor, 2 count. One HSCAN step over feed.attempts, removing the
-- tokens of jobs that no longer exist (finished or retracted with plain
-- commands). Returns {next cursor, removed}.
local e = open_feed('job') if e then return e end
local r = redis.call('HSCAN', K_ATTEMPTS, ARGV[1], 'COUNT', tonumber(ARGV[2]))
local kv = r[2]
local gone = {}
for i = 1, #kv, 2 do
  if kv[i] ~= KEEP_FIELD and redis.call('HEXISTS', K_ITEMS, kv[i]) == 0 then
    gone[#gone + 1] = kv[i]
  end
end
if #gone > 0 then redis.call('HDEL', K_ATTEMPTS, unpack(gone)) end
return {r[1], #gone}
