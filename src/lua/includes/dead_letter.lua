-- Dead letters: jobs out of circulation, copied to the dead-letter queue
-- when the queue names one.
--- @include "includes/acl"
--- @include "includes/ids"
--- @include "includes/job_queue"
--- @include "includes/job_record"
--- @include "includes/json_bytes"
--- @include "includes/wake"

-- The dead-letter queue's keys follow the job layout (K_DLQ_*:
-- config, ids, items, publishes, idincr, sleepers); its name and wake-up
-- channel come from the caller, who read the config. use_dlq checks that
-- the name is still the config's (else the caller reads it again) and
-- that this user may wake its claimers. Returns an error reply, the
-- config's name when it changed, or nil.
local DLQ = {}

local function use_dlq(name, wake_channel)
  engine_settings()
  if name ~= Q.dlq then return nil, Q.dlq end
  DLQ.name, DLQ.wake = name, wake_channel
  if name == '' then return nil end
  if redis.call('HGET', K_DLQ_CONFIG, 'type') ~= 'job' then
    DLQ.name = ''
    return nil
  end
  return check_publish(wake_channel)
end

-- Takes a claimed (or just lapsed) job out of circulation: feed.stalled,
-- its error kept in its record, and `[id, data, error]` put into the
-- dead-letter queue if the queue names one.
local function dead_letter(id, m, err, now)
  m.err = err
  meta_set(id, m)
  redis.call('SADD', K_STALLED, id)
  redis.call('ZREM', K_PUBLISHED, id)
  if DLQ.name and DLQ.name ~= '' then
    local data = redis.call('HGET', K_ITEMS, id) or ''
    local rec = '[' .. json_bytes(id) .. ',' .. json_bytes(data) .. ',' .. json_bytes(err) .. ']'
    local nid = new_ids(K_DLQ_IDINCR, 1, now)[1]
    redis.call('HSET', K_DLQ_ITEMS, nid, rec)
    redis.call('LPUSH', K_DLQ_IDS, nid)
    redis.call('INCR', K_DLQ_PUBLISHES)
    wake(K_DLQ_SLEEPERS, DLQ.wake, 1)
  end
  emit('dead_lettered', id, err)
end
