-- Retries with backoff.

-- The wait before retry n (n >= 1): min_backoff doubling per retry up to
-- max_backoff, minus up to 20 % jitter (r in [0, 1)), at least min_backoff.
local function backoff(n, minb, maxb, r)
  local d = minb * 2 ^ (n - 1)
  if d > maxb then d = maxb end
  d = math.floor(d * (1 - 0.2 * r))
  if d < minb then d = minb end
  return d
end
