-- job maintenance: release the lock.
-- KEYS: layout lock (src/lua/layouts/lock.lua)
-- ARGV: 1 owner. Releases the maintenance lock if still ours.
if redis.call('GET', K_LOCK) == ARGV[1] then return redis.call('DEL', K_LOCK) end
return 0
