-- Wake-ups of sleeping getters and claimers.
--- @include "includes/acl"
--- @include "includes/notify"

-- feed.sleepers exists while some getter found the queue empty and waits;
-- a put deletes it and PUBLISHes a wake-up, so a busy queue pays no
-- PUBLISH per put.
local function wake(sleepers, channel, n)
  if redis.call('DEL', sleepers) == 1 then redis.call(NOTIFY, channel, n) end
end

-- For scripts that must not fail (give-backs for waiters that went away):
-- the wake-up is skipped when the user may not PUBLISH it (sleeping
-- claimers find the jobs at their next poll).
local function wake_if_allowed(sleepers, channel, n)
  if check_publish(channel) then return end
  wake(sleepers, channel, n)
end
