-- Includes a file that includes itself through another: refused.
-- KEYS: layout job
-- ARGV: none
--- @include "includes/a"
return a()
