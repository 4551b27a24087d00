-- The command that publishes notifications (NOTIFY).

-- The command that carries feed, job and wake-up notifications: PUBLISH.
-- In cluster mode the client runs every script with this definition read
-- as 'spublish' (sharded pub/sub, Redis 7.0: the message stays on the
-- shard that serves the channel's slot, and the channels carry the feed's
-- hash tag, so the slot is the script's own). detail::sharded_variant
-- (src/scripts/script_exec.cpp) makes that variant: keep this line as it is.
local NOTIFY = 'publish'
