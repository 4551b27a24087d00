-- Claim control (docs/jobs.md "Pause, resume and rate limit").
--- @include "includes/job_queue"
--- @include "includes/numbers"

-- Claim control (docs/jobs.md "Pause, resume and rate limit"). The state
-- of the rate limit lives in this field of feed.attempts (no job id holds
-- a NUL): the theoretical arrival time, in microseconds, of the next job
-- under a steady rate (GCRA).
local RATE_FIELD = '\0ratelimit'

-- open_job for a script that claims: the claim control fields come in the
-- same HMGET (then the fields named in `...`, in Q.conf[5], ...), so
-- claim_allowance reads nothing more when no limit is set.
local function open_claim(...)
  local e = open_job('paused', 'rate_limit', ...)
  if e then return e end
  Q.ctl = {Q.conf[3], Q.conf[4]}
  return nil
end

-- How many of `n` jobs a claim script may claim at `now` (ms, the
-- claimer's clock), and when it may claim more. Every script that claims
-- calls it once, before it pops, and then claims at most that many.
-- Any claim script may call it (it reads the config fields itself unless
-- open_claim did). Returns:
--   0, 0        the queue is paused (config paused = '1'): claim nothing,
--               wait for resume's wake-up (the 0 means no due time)
--   k, nil      no limit applies: claim up to k (= n)
--   k, t        the rate limit allows k < n now: more at time t (ms)
-- Rate limit (config rate_limit = N jobs/s, 0 or unset: none): each job
-- costs step = ceil(10^6 / N) microseconds of a schedule that may run at
-- most `horizon` = max(100 ms, step) ahead of now. So in any interval of
-- T ms, claims whose `now` falls in it number at most
-- N * T / 1000 + max(1, N / 10): the rate over a long run is at most N/s,
-- with bursts of at most a tenth of a second's worth. The charge is taken
-- here, for k, capped by the waiting jobs (LLEN), so a claim from a queue
-- with fewer jobs pays only for those.
local function claim_allowance(now, n)
  if not Q.ctl then Q.ctl = redis.call('HMGET', K_CONFIG, 'paused', 'rate_limit') end
  if Q.ctl[1] == '1' then return 0, 0 end
  local limit = conf_int(Q.ctl[2], 0, 0, 1000000)
  if limit == 0 or n <= 0 then return n, nil end
  local avail = redis.call('LLEN', K_IDS)
  if avail < n then n = avail end
  if n == 0 then return 0, nil end
  local step = math.ceil(1000000 / limit)
  local horizon = step
  if horizon < 100000 then horizon = 100000 end
  local t = now * 1000
  local tat = tonumber(redis.call('HGET', K_ATTEMPTS, RATE_FIELD)) or t
  if tat < t then tat = t end
  local k = math.floor((t + horizon - tat) / step)
  if k > n then k = n end
  -- Another claimer's later clock (or a call that waited in the server's
  -- queue) may have run the schedule past this one's horizon: none now.
  if k < 0 then k = 0 end
  if k > 0 then
    tat = tat + k * step
    redis.call('HSET', K_ATTEMPTS, RATE_FIELD, int(tat))
  end
  if k < n then return k, math.ceil((tat + step - horizon) / 1000) end
  return k, nil
end
