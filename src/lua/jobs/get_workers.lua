-- job_queue::get_workers.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: none.
-- Every registered worker, read in one step: {server now (ms), then per
-- worker name, lapses_at (server ms), description, n, then the n claims it
-- holds as id, token pairs}. Only current claims are listed (a record
-- whose claim ended is left until the worker stops or is failed).
--- @include "includes/clock"
--- @include "includes/feed_config"
--- @include "includes/numbers"
--- @include "includes/tokens"
local e = open_feed('job') if e then return e end
local ws = redis.call('ZRANGE', K_WORKERS, 0, -1, 'WITHSCORES')
-- One scan of the records, grouped by worker.
local held = {}
local all = redis.call('HGETALL', K_WORKER_JOBS)
for i = 1, #all, 2 do
  local v = all[i + 1]
  local nul = string.find(v, '\0', 1, true)
  if nul then
    local w, token = string.sub(v, 1, nul - 1), string.sub(v, nul + 1)
    if not held[w] then held[w] = {} end
    local h = held[w]
    h[#h + 1] = all[i]
    h[#h + 1] = token
  end
end
local out = {int(server_ms())}
for i = 1, #ws, 2 do
  local w = ws[i]
  out[#out + 1] = w
  out[#out + 1] = ws[i + 1]
  out[#out + 1] = redis.call('HGET', K_WORKER_INFO, w) or ''
  local at = #out + 1
  out[at] = 0
  local n = 0
  local h = held[w] or {}
  for j = 1, #h, 2 do
    if claim_current(h[j], h[j + 1]) then
      out[#out + 1] = h[j]
      out[#out + 1] = h[j + 1]
      n = n + 1
    end
  end
  out[at] = n
end
return out
