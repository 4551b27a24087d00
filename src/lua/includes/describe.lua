-- A job described in one step (job_queue::get_job, the listings).
--- @include "includes/job_record"
--- @include "includes/numbers"
--- @include "includes/schedule"

local function opt_int(v)
  if v == nil then return '' end
  return int(v)
end

-- Appends job `id` to `out` as 14 strings (id, item, state, failures,
-- run_at, retry count, stall count, max_retries, max_stalls, min_backoff,
-- max_backoff (the job's own, '' when unset), last error, held put as JSON
-- or '', last progress or ''), read in one step; nothing when no job has
-- that id.
local function describe(id, out)
  local item, state, run_at
  local sv = redis.call('HGET', K_SCHED_ITEMS, id)
  if sv then
    item, state = string.sub(sv, SEQ_WIDTH + 1), 'scheduled'
    run_at = redis.call('ZSCORE', K_SCHEDULED, string.sub(sv, 1, SEQ_WIDTH) .. id) or '0'
  else
    item = redis.call('HGET', K_ITEMS, id)
    if not item then return end
    state, run_at = 'waiting', '0'
    if redis.call('ZSCORE', K_CLAIMED, id) then
      state = 'claimed'
    elseif redis.call('SISMEMBER', K_STALLED, id) == 1 then
      state = 'stalled'
    end
  end
  local m = meta_get(id)
  local n = #out
  out[n + 1] = id
  out[n + 2] = item
  out[n + 3] = state
  out[n + 4] = redis.call('HGET', K_CANCELLED, id) or '0'
  out[n + 5] = int(tonumber(run_at))
  out[n + 6] = opt_int(m.rc or 0)
  out[n + 7] = opt_int(m.sc or 0)
  out[n + 8] = opt_int(m.mr)
  out[n + 9] = opt_int(m.ms)
  out[n + 10] = opt_int(m.minb)
  out[n + 11] = opt_int(m.maxb)
  out[n + 12] = m.err or ''
  out[n + 13] = redis.call('HGET', K_HELD, id) or ''
  out[n + 14] = m.pg or ''
end
