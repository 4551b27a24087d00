-- job_queue::heartbeat.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 now_ms, then id, token pairs. Renews the claim time of each job
-- claimed under its token. Returns one status per job, as job_finish:
-- 0 renewed, 1 job_not_found, 2 job_not_claimed, 3 lost_claim.
--- @include "includes/feed_config"
--- @include "includes/tokens"
local e = open_feed('job') if e then return e end
local code = {job_not_found = 1, job_not_claimed = 2, lost_claim = 3}
local st = {}
for j = 1, (#ARGV - 1) / 2 do
  local id = ARGV[2 * j]
  local c = claim_check(id, ARGV[2 * j + 1])
  if c then
    st[j] = code[c]
  else
    redis.call('ZADD', K_CLAIMED, 'XX', ARGV[1], id)
    st[j] = 0
  end
end
return st
