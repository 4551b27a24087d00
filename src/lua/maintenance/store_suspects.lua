-- job maintenance: remember suspects.
-- KEYS: layout job (src/lua/layouts/job.lua)
-- ARGV: 1 reset ('1': forget the previous pass's suspects first), 2.. ids.
--- @include "includes/feed_config"
local e = open_feed('job') if e then return e end
if ARGV[1] == '1' then redis.call('DEL', K_UNACCOUNTED) end
if #ARGV > 1 then redis.call('SADD', K_UNACCOUNTED, unpack(ARGV, 2)) end
return redis.call('SCARD', K_UNACCOUNTED)
