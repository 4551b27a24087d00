-- The job engine (docs/jobs.md): a job queue as a script call sees it, its
-- events and its wake-ups. The other includes of the engine build on it.
--
-- States: waiting (feed.ids + feed.items), scheduled (feed.scheduled +
-- feed.scheduled_items: the item is NOT in feed.items, so contract
-- clients never see it early), claimed (feed.claimed + feed.items),
-- stalled / dead letter (feed.stalled + feed.items). A held put waits in
-- feed.held for its id's claim to end.
--- @include "includes/acl"
--- @include "includes/feed_config"
--- @include "includes/notify"
--- @include "includes/numbers"
--- @include "includes/wake"

-- The queue's config as the engine reads it (open_job fills it).
local Q = {}

-- Checks the job queue's type and reads `events` and the fields named in
-- `...` (into Q.conf[3], Q.conf[4], ...). Returns an error reply or nil.
-- With events on, the user must be allowed to PUBLISH them (checked here,
-- before any write). The event channel is `job.event:` followed by the
-- name as it appears in the keys (jobs::job_keys builds it the same way).
-- The hot scripts (put, claim, finish) read no more than this; the engine's
-- other settings come from engine_settings() when a script needs them.
local function open_job(...)
  local e, c = open_feed('job', 'events', ...)
  if e then return e end
  Q.events = c[2] == '1'
  Q.conf = c
  Q.event_channel = 'job.event:' .. string.sub(K_CONFIG, 13)
  Q.woken = 0
  if Q.events then return check_publish(Q.event_channel) end
  return nil
end

-- Reads the rest of the config once per script call: the retry
-- strategy's defaults (10, 3, 2 s, 300 s), the dead-letter
-- queue, the lease, the result time to live, the put-time index.
local function engine_settings()
  if Q.max_retries then return end
  local c = redis.call('HMGET', K_CONFIG, 'published', 'max_retries', 'max_stalls',
                       'min_backoff_ms', 'max_backoff_ms', 'dead_letter_queue',
                       'claim_timeout_ms')
  Q.published = c[1] == '1'
  Q.max_retries = conf_int(c[2], 10, 1)
  Q.max_stalls = conf_int(c[3], 3, 1)
  Q.min_backoff = conf_int(c[4], 2000, 0)
  Q.max_backoff = conf_int(c[5], 300000, 0)
  Q.dlq = c[6] or ''
  Q.claim_timeout = conf_int(c[7], 60000, 1)
end

-- Wakes sleeping claimers on `channel` when this script made jobs
-- claimable (skipped when the user may not PUBLISH it: claimers then poll).
local function wake_woken(channel)
  if Q.woken > 0 then wake_if_allowed(K_SLEEPERS, channel, Q.woken) end
  Q.woken = 0
end

-- Publishes a job event (`kind\0id\0detail`) when the queue's events are on.
local function emit(kind, id, detail)
  if Q.events then
    redis.call(NOTIFY, Q.event_channel, kind .. '\0' .. id .. '\0' .. (detail or ''))
  end
end
