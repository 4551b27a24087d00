-- Includes two files that define the same name: refused.
-- KEYS: layout job
-- ARGV: none
--- @include "includes/a"
--- @include "includes/b"
return half(4)
