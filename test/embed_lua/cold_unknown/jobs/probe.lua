-- Reaches a name no include defines through `cold`: refused.
-- KEYS: layout job
-- ARGV: none
return cold.nowhere(1)
