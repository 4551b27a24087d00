-- Says it takes layout job, uses a key of layout lock: refused.
-- KEYS: layout job
-- ARGV: none
return redis.call('GET', K_LOCK)
