-- Permission checks made before a script's first write. The layouts
-- include this file: the build calls check_commands before every script's
-- own code (docs/architecture.md "Scripts").
--- @include "includes/errors"
--- @include "includes/notify"

-- check_channels(cmd, ch, ...): call it before a script's first write.
-- Returns an error reply `THOONK no_channel_permission ...` when the calling
-- ACL user may not run `cmd` (publish, spublish) on one of the channels
-- (the command or the channel refused), else nil. Redis does not roll back
-- a script that fails half way, so a PUBLISH refused after the writes would
-- leave them applied under an error. redis.acl_check_cmd exists from Redis
-- 7.0; older servers are not checked.
local function check_channels(cmd, ...)
  if not redis.acl_check_cmd then return nil end
  for i = 1, select('#', ...) do
    local ch = select(i, ...)
    if not redis.acl_check_cmd(cmd, ch, '') then
      return fail('no_channel_permission', 'the user may not ' .. string.upper(cmd) .. ' on ' .. ch)
    end
  end
  return nil
end

-- check_commands(cmd, ...): the build (scripts/lua_embed) puts a call
-- of it before every script's own code, naming each command the script
-- and the header code it embeds can run. Redis checks a script's commands
-- against the user one by one as they run and keeps the writes made before
-- a refused one; checked here first, a refusal changes nothing. Returns an
-- error reply `THOONK no_permission ...` naming the first refused command,
-- else nil. Each is checked with the script's first key as its argument:
-- without one, Redis 7.0 refuses SET to a user whose keys are restricted
-- when the script runs as a function. About 0.3 µs a command.
local function check_commands(...)
  if not redis.acl_check_cmd then return nil end
  for i = 1, select('#', ...) do
    local cmd = select(i, ...)
    if not redis.acl_check_cmd(cmd, KEYS[1]) then
      return fail('no_permission', 'the user may not run ' .. string.upper(cmd) ..
                  ' (grant +' .. cmd .. ': docs/security.md lists what each role needs)')
    end
  end
  return nil
end

-- The check for notification channels (NOTIFY).
local function check_publish(...)
  return check_channels(NOTIFY, ...)
end

-- The check for the management channels (newfeed, delfeed, conffeed),
-- which stay on classic pub/sub in cluster mode too.
local function check_classic_publish(...)
  return check_channels('publish', ...)
end
