-- Reaches a value through `cold`: refused.
-- KEYS: layout job
-- ARGV: none
return twice(cold.LIMIT)
