-- layout: job (src/lua/layouts/job.lua). job_queue::get_job, get_jobs.
-- ARGV: the ids to read; none: every live job (every field of feed.items).
-- Returns {id, item, state, failures, ...} for each live job, state 'w'
-- (waiting), 'c' (claimed) or 's' (stalled); an id with no item is left out.
-- Read-only: one atomic snapshot of item, state and failure count.
local e = open_feed('job') if e then return e end
local ids = ARGV
if #ids == 0 then ids = redis.call('HKEYS', K_ITEMS) end
local out = {}
for i = 1, #ids do
  local id = ids[i]
  local item = redis.call('HGET', K_ITEMS, id)
  if item then
    local state = 'w'
    if redis.call('ZSCORE', K_CLAIMED, id) then
      state = 'c'
    elseif redis.call('SISMEMBER', K_STALLED, id) == 1 then
      state = 's'
    end
    local n = #out
    out[n + 1] = id
    out[n + 2] = item
    out[n + 3] = state
    out[n + 4] = tonumber(redis.call('HGET', K_CANCELLED, id)) or 0
  end
end
return out
