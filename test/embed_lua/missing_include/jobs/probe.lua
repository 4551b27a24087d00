-- Includes a file that does not exist: refused.
-- KEYS: layout job
-- ARGV: none
--- @include "includes/nowhere"
return twice(1)
