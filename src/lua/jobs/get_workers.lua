-- layout: job (src/lua/layouts/job.lua). job_queue::get_workers.
-- Every registered worker, read in one step: {server now (ms), then per
-- worker name, lapses_at (server ms), description, n, then the n claims it
-- holds as id, token pairs}. Only current claims are listed (a record
-- whose claim ended is left for the worker's next heartbeat).
local e = open_feed('job') if e then return e end
local ws = redis.call('ZRANGE', K_WORKERS, 0, -1, 'WITHSCORES')
local out = {int(server_ms())}
for i = 1, #ws, 2 do
  local w = ws[i]
  out[#out + 1] = w
  out[#out + 1] = ws[i + 1]
  out[#out + 1] = redis.call('HGET', K_WORKER_INFO, w) or ''
  local at = #out + 1
  out[at] = 0
  local n = 0
  for _, c in ipairs(worker_claims(w)) do
    if claim_current(c[1], c[2]) then
      out[#out + 1] = c[1]
      out[#out + 1] = c[2]
      n = n + 1
    end
  end
  out[at] = n
end
return out
