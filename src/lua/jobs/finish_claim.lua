-- job_queue::finish_and_claim (batched).
-- KEYS: layout job (src/lua/layouts/job.lua), then result keys (KEYS[K_FIRST_RESULT..]).
-- ARGV: 1 now_ms, 2 job.finish channel, then per job id, token, result key
-- index in KEYS (0: none), result. Finishes those jobs as jobs/finish.lua
-- does, then claims one job for each of them that finished, as
-- jobs/claim.lua does (recorded under no worker): a worker loop finishes a
-- job and takes the next in one round trip. Returns {m, the m finish
-- statuses, then claim_jobs' reply (empty when none finished)}.
--- @include "includes/claim_control"
--- @include "includes/claims"
--- @include "includes/finish"
--- @include "includes/job_queue"
--- @include "includes/numbers"
local e = open_claim('result_ttl_ms') if e then return e end
local m = (#ARGV - 2) / 4
local st = finish_jobs(ARGV[2], 3, m, conf_int(Q.conf[5], 300000, 1))
local out, want = {m}, 0
for j = 1, m do
  out[j + 1] = st[j]
  if st[j] == 0 then want = want + 1 end
end
if want > 0 then
  local c = claim_jobs(tonumber(ARGV[1]), want, nil)
  for i = 1, #c do out[m + 1 + i] = c[i] end
end
return out
