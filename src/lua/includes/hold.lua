-- Held puts: a put to a claimed id waits for the claim to end.
--- @include "includes/dispatch"
--- @include "includes/job_queue"
--- @include "includes/schedule"

-- A put for a claimed id waits in feed.held, merged with an earlier held
-- put: the first sets everything,
-- later ones apply their flags to it; the latest put's flags are kept
-- for the release.
local function hold(id, p)
  local v = redis.call('HGET', K_HELD, id)
  local r
  if v then
    r = cjson.decode(v)
    if p.f.d ~= 'k' then r.d = p.item end
    r.ra = merge_run_at(p.f.ra, r.ra, p.run_at)
    if p.f.s ~= 'k' then r.s = p.s end
    r.f, r.h = p.f, p.high
  else
    r = {d = p.item, ra = p.run_at, s = p.s, f = p.f, h = p.high}
  end
  redis.call('HSET', K_HELD, id, cjson.encode(r))
  emit('held', id)
end

-- A claim of `id` ended (finish, fail, cancel, stall, lapse, release):
-- its held put, if any, is applied now, whatever its flags and run_at.
local function release_held(id, now)
  local v = redis.call('HGET', K_HELD, id)
  if not v then return false end
  redis.call('HDEL', K_HELD, id)
  local r = cjson.decode(v)
  if r.s == cjson.null then r.s = nil end
  dispatch(id, {item = r.d, run_at = r.ra, s = r.s, f = r.f, high = r.h, explicit = true}, now)
  return true
end
