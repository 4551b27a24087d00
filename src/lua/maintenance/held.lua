-- job maintenance: held puts left behind.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 now_ms, 2 cursor, 3 count, 4 wake channel. One HSCAN step over feed.held: a put
-- held for an id that is no longer claimed (its claim ended through plain
-- commands, which know nothing of held puts) is applied now. Returns
-- {next cursor, applied}.
--- @include "includes/hold"
--- @include "includes/job_queue"
local e = open_job() if e then return e end
local r = redis.call('HSCAN', K_HELD, ARGV[2], 'COUNT', tonumber(ARGV[3]))
local kv, n = r[2], 0
for i = 1, #kv, 2 do
  if not redis.call('ZSCORE', K_CLAIMED, kv[i]) then
    release_held(kv[i], tonumber(ARGV[1]))
    n = n + 1
  end
end
wake_woken(ARGV[4])
return {r[1], n}
