-- The job engine's shared functions (docs/jobs.md): scheduling, updates by
-- id and held puts, retries with backoff, dead letters, events. Embedded
-- after the prelude into the job scripts that use them (rules of
-- prelude.lua: comments on lines of their own, no `;`, no long strings).
--
-- States: waiting (feed.ids + feed.items), scheduled (feed.scheduled +
-- feed.scheduled_items: the item is NOT in feed.items, so contract
-- clients never see it early), claimed (feed.claimed + feed.items),
-- stalled / dead letter (feed.stalled + feed.items). A held put waits in
-- feed.held for its id's claim to end.
--
-- feed.scheduled members are SEQ_WIDTH characters of put sequence (base
-- 36, zero padded: sorts as the number) followed by the id, so equal
-- run_at times come out in put order; feed.scheduled_items holds the same
-- sequence followed by the item, which gives the member back from the id.

-- The queue's config as the engine reads it (open_job fills it).
local Q = {}

-- Checks the job queue's type and reads `events` and the fields named in
-- `...` (into Q.conf[3], Q.conf[4], ...). Returns an error reply or nil.
-- With events on, the user must be allowed to PUBLISH them (checked here,
-- before any write). The event channel is `job.event:` followed by the
-- name as it appears in the keys (jobs::job_keys builds it the same way).
-- The hot scripts (put, claim, finish) read no more than this; the engine's
-- other settings come from engine_settings() when a script needs them.
local function open_job(...)
  local e, c = open_feed('job', 'events', ...)
  if e then return e end
  Q.events = c[2] == '1'
  Q.conf = c
  Q.event_channel = 'job.event:' .. string.sub(K_CONFIG, 13)
  Q.woken = 0
  if Q.events then return check_publish(Q.event_channel) end
  return nil
end

-- Reads the rest of the config once per script call: the retry
-- strategy's defaults (10, 3, 2 s, 300 s), the dead-letter
-- queue, the lease, the result time to live, the put-time index.
local function engine_settings()
  if Q.max_retries then return end
  local c = redis.call('HMGET', K_CONFIG, 'published', 'max_retries', 'max_stalls',
                       'min_backoff_ms', 'max_backoff_ms', 'dead_letter_queue',
                       'claim_timeout_ms')
  Q.published = c[1] == '1'
  Q.max_retries = conf_int(c[2], 10, 1)
  Q.max_stalls = conf_int(c[3], 3, 1)
  Q.min_backoff = conf_int(c[4], 2000, 0)
  Q.max_backoff = conf_int(c[5], 300000, 0)
  Q.dlq = c[6] or ''
  Q.claim_timeout = conf_int(c[7], 60000, 1)
end

-- Wakes sleeping claimers on `channel` when this script made jobs
-- claimable (skipped when the user may not PUBLISH it: claimers then poll).
local function wake_woken(channel)
  if Q.woken > 0 then wake_if_allowed(K_SLEEPERS, channel, Q.woken) end
  Q.woken = 0
end

-- Publishes a job event (`kind\0id\0detail`) when the queue's events are on.
local function emit(kind, id, detail)
  if Q.events then
    redis.call(NOTIFY, Q.event_channel, kind .. '\0' .. id .. '\0' .. (detail or ''))
  end
end

-- A job's extension record (feed.jobmeta, JSON): rc retry count, sc stall
-- count, err last error, mr/ms/minb/maxb its own retry strategy. Absent for
-- jobs that never failed or stalled and have no strategy of their own.
local function meta_get(id)
  local v = redis.call('HGET', K_META, id)
  if v then return cjson.decode(v) end
  return {}
end

local function meta_set(id, m)
  if next(m) == nil then
    redis.call('HDEL', K_META, id)
  else
    redis.call('HSET', K_META, id, cjson.encode(m))
  end
end

-- A put's strategy (table with mr, ms, minb, maxb, each optional) into m.
local function set_strategy(m, s)
  m.mr, m.ms, m.minb, m.maxb = nil, nil, nil, nil
  if s then m.mr, m.ms, m.minb, m.maxb = s.mr, s.ms, s.minb, s.maxb end
end

-- The job's strategy with the queue's defaults filled in.
local function strategy_of(m)
  engine_settings()
  return m.mr or Q.max_retries, m.ms or Q.max_stalls, m.minb or Q.min_backoff,
         m.maxb or Q.max_backoff
end

local SEQ_WIDTH = 11

-- The next put sequence (from the id counter), SEQ_WIDTH characters.
local function next_seq(now)
  local s = new_ids(K_IDINCR, 1, now)[1]
  return string.rep('0', SEQ_WIDTH - #s) .. s
end

-- Makes `id` (in no state) scheduled at run_at. Counted in Q.woken too:
-- sleeping claimers must claim once more to learn the new due time.
local function schedule(id, item, run_at, seq)
  redis.call('ZADD', K_SCHEDULED, run_at, seq .. id)
  redis.call('HSET', K_SCHED_ITEMS, id, seq .. item)
  Q.woken = Q.woken + 1
end

-- Makes `id` (in no state) waiting: item stored unless nil (already in
-- feed.items); end of the line, or next out when `high`. Counted in
-- Q.woken for the caller's wake-up.
local function enqueue(id, item, high)
  if item then redis.call('HSET', K_ITEMS, id, item) end
  if high then
    redis.call('RPUSH', K_IDS, id)
  else
    redis.call('LPUSH', K_IDS, id)
  end
  Q.woken = Q.woken + 1
end

-- A claimed job whose claim ended without finishing goes back at run_at:
-- its item leaves feed.items when it becomes scheduled.
local function requeue(id, run_at, now)
  if run_at > now then
    local item = redis.call('HGET', K_ITEMS, id)
    redis.call('HDEL', K_ITEMS, id)
    schedule(id, item, run_at, next_seq(now))
  else
    enqueue(id, nil, false)
  end
end

-- Up to `limit` due scheduled jobs join the end of the line, earliest
-- run_at first (ties in put order). Returns how many and, when none was
-- due, the earliest run_at (false: nothing scheduled), which saves a claim
-- that finds the queue dry its own look at the schedule (next_due).
local function promote(now, limit)
  local first = redis.call('ZRANGE', K_SCHEDULED, '0', '0', 'WITHSCORES')
  if not first[2] then return 0, false end
  if tonumber(first[2]) > now then return 0, tonumber(first[2]) end
  local due = redis.call('ZRANGEBYSCORE', K_SCHEDULED, '-inf', int(now), 'LIMIT', '0', int(limit))
  local n = #due
  if n == 0 then return 0 end
  local ids = {}
  for i = 1, n do ids[i] = string.sub(due[i], SEQ_WIDTH + 1) end
  local vals = redis.call('HMGET', K_SCHED_ITEMS, unpack(ids))
  local h, moved = {}, {}
  for i = 1, n do
    local v = vals[i]
    if v and string.sub(v, 1, SEQ_WIDTH) == string.sub(due[i], 1, SEQ_WIDTH) then
      h[#h + 1] = ids[i]
      h[#h + 1] = string.sub(v, SEQ_WIDTH + 1)
      moved[#moved + 1] = ids[i]
    end
  end
  redis.call('ZREM', K_SCHEDULED, unpack(due))
  if #moved == 0 then return 0 end
  redis.call('HDEL', K_SCHED_ITEMS, unpack(moved))
  redis.call('HSET', K_ITEMS, unpack(h))
  redis.call('LPUSH', K_IDS, unpack(moved))
  Q.woken = Q.woken + #moved
  if Q.events then
    for i = 1, #moved do emit('promoted', moved[i]) end
  end
  return #moved
end

-- The earliest run_at of a scheduled job, or nil.
local function next_due()
  local r = redis.call('ZRANGE', K_SCHEDULED, '0', '0', 'WITHSCORES')
  if r[2] then return tonumber(r[2]) end
  return nil
end

-- When a claim that got fewer jobs than it asked for may try again: the
-- earliest run_at promote saw (`due`: false when nothing was scheduled,
-- nil when it did not look or moved jobs), else the schedule's; 0 when
-- nothing is scheduled (at a wake-up or poll).
local function retry_at(due)
  if due == nil then return next_due() or 0 end
  return due or 0
end

-- Where a put's run_at goes, by update mode (a..always, l..if_later,
-- e..if_earlier, n..never), given the current one.
local function merge_run_at(mode, cur, new)
  if mode == 'a' or (mode == 'l' and new > cur) or (mode == 'e' and new < cur) then return new end
  return cur
end

-- Applies a put to an id that is not claimed (de-duplication). p:
-- item, run_at, high, explicit (the id is the caller's), s (strategy or
-- nil), f (flags: d data r/k, ra run_at a/l/e/n, s strategy r/k, c
-- counters k/r). Returns 'added' or 'updated'. A stalled job is revived
-- by it.
local function dispatch(id, p, now)
  local item, state, cur, seq
  local sv = redis.call('HGET', K_SCHED_ITEMS, id)
  if sv then
    state, seq, item = 'scheduled', string.sub(sv, 1, SEQ_WIDTH), string.sub(sv, SEQ_WIDTH + 1)
    cur = tonumber(redis.call('ZSCORE', K_SCHEDULED, seq .. id)) or 0
  else
    item = redis.call('HGET', K_ITEMS, id)
    if item then
      state, cur = 'waiting', 0
      if redis.call('SISMEMBER', K_STALLED, id) == 1 then state = 'stalled' end
    end
  end
  if not state then
    -- A new job starts with no retry or stall record. A caller's id can
    -- have one left under it by a plain-command client's Finish or
    -- Retract, which cannot know feed.jobmeta.
    if p.s or p.explicit then
      local m = {}
      if p.s then set_strategy(m, p.s) end
      meta_set(id, m)
    end
    if p.run_at > now then
      schedule(id, p.item, p.run_at, next_seq(now))
    else
      enqueue(id, p.item, p.high)
    end
    if p.explicit then
      local base = redis.call('HINCRBY', K_ATTEMPTS, TOKEN_BASE, 1048576)
      redis.call('HSET', K_ATTEMPTS, id, int(-base))
    end
    redis.call('INCR', K_PUBLISHES)
    engine_settings()
    if Q.published then redis.call('ZADD', K_PUBLISHED, now, id) end
    if p.run_at > now then emit('put', id, int(p.run_at)) else emit('put', id) end
    return 'added'
  end
  local new_item = item
  if p.f.d ~= 'k' then new_item = p.item end
  local ra = merge_run_at(p.f.ra, cur, p.run_at)
  if p.f.s ~= 'k' or p.f.c == 'r' then
    local m = meta_get(id)
    if p.f.s ~= 'k' then set_strategy(m, p.s) end
    if p.f.c == 'r' then
      m.rc, m.sc = nil, nil
      redis.call('HDEL', K_CANCELLED, id)
    end
    meta_set(id, m)
  end
  if state == 'scheduled' then
    if ra > now then
      if ra ~= cur then redis.call('ZADD', K_SCHEDULED, ra, seq .. id) end
      if new_item ~= item then redis.call('HSET', K_SCHED_ITEMS, id, seq .. new_item) end
    else
      redis.call('ZREM', K_SCHEDULED, seq .. id)
      redis.call('HDEL', K_SCHED_ITEMS, id)
      enqueue(id, new_item, p.high)
    end
  else
    if state == 'stalled' then redis.call('SREM', K_STALLED, id) end
    if ra > now then
      if state == 'waiting' then redis.call('LREM', K_IDS, 1, id) end
      redis.call('HDEL', K_ITEMS, id)
      schedule(id, new_item, ra, next_seq(now))
    else
      if new_item ~= item then redis.call('HSET', K_ITEMS, id, new_item) end
      if state == 'stalled' then enqueue(id, nil, p.high) end
    end
  end
  emit('updated', id)
  return 'updated'
end

-- A put for a claimed id waits in feed.held, merged with an earlier held
-- put: the first sets everything,
-- later ones apply their flags to it; the latest put's flags are kept
-- for the release.
local function hold(id, p)
  local v = redis.call('HGET', K_HELD, id)
  local r
  if v then
    r = cjson.decode(v)
    if p.f.d ~= 'k' then r.d = p.item end
    r.ra = merge_run_at(p.f.ra, r.ra, p.run_at)
    if p.f.s ~= 'k' then r.s = p.s end
    r.f, r.h = p.f, p.high
  else
    r = {d = p.item, ra = p.run_at, s = p.s, f = p.f, h = p.high}
  end
  redis.call('HSET', K_HELD, id, cjson.encode(r))
  emit('held', id)
end

-- A claim of `id` ended (finish, fail, cancel, stall, lapse, release):
-- its held put, if any, is applied now, whatever its flags and run_at.
local function release_held(id, now)
  local v = redis.call('HGET', K_HELD, id)
  if not v then return false end
  redis.call('HDEL', K_HELD, id)
  local r = cjson.decode(v)
  if r.s == cjson.null then r.s = nil end
  dispatch(id, {item = r.d, run_at = r.ra, s = r.s, f = r.f, high = r.h, explicit = true}, now)
  return true
end

-- The wait before retry n (n >= 1): min_backoff doubling per retry up to
-- max_backoff, minus up to 20 % jitter (r in [0, 1)), at least min_backoff.
local function backoff(n, minb, maxb, r)
  local d = minb * 2 ^ (n - 1)
  if d > maxb then d = maxb end
  d = math.floor(d * (1 - 0.2 * r))
  if d < minb then d = minb end
  return d
end

-- Whether s is valid UTF-8 (so it can go into JSON as a string).
local function utf8_valid(s)
  if not string.find(s, '[\128-\255]') then return true end
  local i, n = 1, #s
  while i <= n do
    local c = string.byte(s, i)
    local k, lo, hi = 0, 128, 191
    if c < 128 then
      k = 0
    elseif c >= 194 and c <= 223 then
      k = 1
    elseif c >= 224 and c <= 239 then
      k = 2
      if c == 224 then lo = 160 elseif c == 237 then hi = 159 end
    elseif c >= 240 and c <= 244 then
      k = 3
      if c == 240 then lo = 144 elseif c == 244 then hi = 143 end
    else
      return false
    end
    for j = 1, k do
      local b = string.byte(s, i + j)
      if not b or b < lo or b > hi then return false end
      lo, hi = 128, 191
    end
    i = i + k + 1
  end
  return true
end

local B64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/'

local function base64(s)
  local out = {}
  for i = 1, #s, 3 do
    local a, b, c = string.byte(s, i, i + 2)
    local v = a * 65536 + (b or 0) * 256 + (c or 0)
    local q = {}
    for j = 4, 1, -1 do
      local d = v % 64
      q[j] = string.sub(B64, d + 1, d + 1)
      v = (v - d) / 64
    end
    if not b then q[3] = '=' end
    if not c then q[4] = '=' end
    out[#out + 1] = table.concat(q)
  end
  return table.concat(out)
end

-- A JSON value for bytes: a string when they are valid UTF-8, else
-- {"base64": "..."}.
local function json_bytes(s)
  if utf8_valid(s) then return cjson.encode(s) end
  return '{"base64":"' .. base64(s) .. '"}'
end

-- The dead-letter queue's keys follow the job layout (K_DLQ_*:
-- config, ids, items, publishes, idincr, sleepers); its name and wake-up
-- channel come from the caller, who read the config. use_dlq checks that
-- the name is still the config's (else the caller reads it again) and
-- that this user may wake its claimers. Returns an error reply, the
-- config's name when it changed, or nil.
local DLQ = {}

local function use_dlq(name, wake_channel)
  engine_settings()
  if name ~= Q.dlq then return nil, Q.dlq end
  DLQ.name, DLQ.wake = name, wake_channel
  if name == '' then return nil end
  if redis.call('HGET', K_DLQ_CONFIG, 'type') ~= 'job' then
    DLQ.name = ''
    return nil
  end
  return check_publish(wake_channel)
end

-- Takes a claimed (or just lapsed) job out of circulation: feed.stalled,
-- its error kept in its record, and `[id, data, error]` put into the
-- dead-letter queue if the queue names one.
local function dead_letter(id, m, err, now)
  m.err = err
  meta_set(id, m)
  redis.call('SADD', K_STALLED, id)
  redis.call('ZREM', K_PUBLISHED, id)
  if DLQ.name and DLQ.name ~= '' then
    local data = redis.call('HGET', K_ITEMS, id) or ''
    local rec = '[' .. json_bytes(id) .. ',' .. json_bytes(data) .. ',' .. json_bytes(err) .. ']'
    local nid = new_ids(K_DLQ_IDINCR, 1, now)[1]
    redis.call('HSET', K_DLQ_ITEMS, nid, rec)
    redis.call('LPUSH', K_DLQ_IDS, nid)
    redis.call('INCR', K_DLQ_PUBLISHES)
    wake(K_DLQ_SLEEPERS, DLQ.wake, 1)
  end
  emit('dead_lettered', id, err)
end

local function opt_int(v)
  if v == nil then return '' end
  return int(v)
end

-- Appends job `id` to `out` as 14 strings (id, item, state, failures,
-- run_at, retry count, stall count, max_retries, max_stalls, min_backoff,
-- max_backoff (the job's own, '' when unset), last error, held put as JSON
-- or '', last progress or ''), read in one step; nothing when no job has
-- that id.
local function describe(id, out)
  local item, state, run_at
  local sv = redis.call('HGET', K_SCHED_ITEMS, id)
  if sv then
    item, state = string.sub(sv, SEQ_WIDTH + 1), 'scheduled'
    run_at = redis.call('ZSCORE', K_SCHEDULED, string.sub(sv, 1, SEQ_WIDTH) .. id) or '0'
  else
    item = redis.call('HGET', K_ITEMS, id)
    if not item then return end
    state, run_at = 'waiting', '0'
    if redis.call('ZSCORE', K_CLAIMED, id) then
      state = 'claimed'
    elseif redis.call('SISMEMBER', K_STALLED, id) == 1 then
      state = 'stalled'
    end
  end
  local m = meta_get(id)
  local n = #out
  out[n + 1] = id
  out[n + 2] = item
  out[n + 3] = state
  out[n + 4] = redis.call('HGET', K_CANCELLED, id) or '0'
  out[n + 5] = int(tonumber(run_at))
  out[n + 6] = opt_int(m.rc or 0)
  out[n + 7] = opt_int(m.sc or 0)
  out[n + 8] = opt_int(m.mr)
  out[n + 9] = opt_int(m.ms)
  out[n + 10] = opt_int(m.minb)
  out[n + 11] = opt_int(m.maxb)
  out[n + 12] = m.err or ''
  out[n + 13] = redis.call('HGET', K_HELD, id) or ''
  out[n + 14] = m.pg or ''
end

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

-- The server's clock in ms. The worker registry keeps its times by it, so
-- that every client (whatever its clock says) agrees on which worker lapsed.
local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- A claim that ended without its holder (its lease lapsed, or its worker
-- died) ends here: its token ends; the job counts a stall (and a failure)
-- and goes to the end of the line, or becomes a dead letter once its
-- stalls reach max_stalls (use_dlq first); a held put is applied. `why`
-- names the cause in the job's last error. A claimed id without an item
-- is only dropped. Returns 'requeued', 'dead' or 'dropped'.
local function lapse(id, now, why)
  redis.call('ZREM', K_CLAIMED, id)
  redis.call('HDEL', K_WORKER_JOBS, id)
  local a = tonumber(redis.call('HGET', K_ATTEMPTS, id))
  if a and a > 0 then redis.call('HSET', K_ATTEMPTS, id, int(-a)) end
  local r = 'dropped'
  if redis.call('HEXISTS', K_ITEMS, id) == 0 then
    redis.call('HDEL', K_ATTEMPTS, id)
    redis.call('HDEL', K_CANCELLED, id)
    redis.call('HDEL', K_META, id)
  else
    redis.call('HINCRBY', K_CANCELLED, id, 1)
    local m = meta_get(id)
    m.sc = (m.sc or 0) + 1
    local _, ms = strategy_of(m)
    local err = why .. ' (stall ' .. int(m.sc) .. ' of ' .. int(ms) .. ')'
    emit('stalled', id, int(m.sc))
    if m.sc >= ms then
      dead_letter(id, m, err, now)
      r = 'dead'
    else
      m.err = err
      meta_set(id, m)
      enqueue(id, nil, false)
      r = 'requeued'
    end
  end
  release_held(id, now)
  return r
end

-- The member claim_jobs adds to feed.claimed and removes in the same call.
local ENCODING_KEEP = '\0thoonk: converts this sorted set to skiplist encoding and goes at once'

-- Worker registry (docs/jobs.md "Workers"). feed.workers scores each
-- registered worker by the server time (ms) at which its registration
-- lapses; feed.worker_info holds its description (JSON, from the worker);
-- feed.worker_jobs records which worker made each claim: field the job id,
-- value `worker\0token` (worker names hold no NUL). A job has one claim at
-- a time, so a new claim of it overwrites the record; a claim that ends
-- takes its record along where the ending knows it (finish by the worker,
-- fail, lapse), and the rest go when the worker stops or is failed. A hash
-- (kept in hashtable encoding by KEEP_FIELD, as feed.attempts) costs the
-- hot path one field set and one field delete per job; a worker's own
-- claims are found by a scan of every record, done only on the rare paths
-- (a worker failed, stopping, or listed): its heartbeat names them.
local function worker_record(w, token)
  return w .. '\0' .. token
end

-- The claims recorded for worker `w`: a list of {id, token}.
local function worker_claims(w)
  local all = redis.call('HGETALL', K_WORKER_JOBS)
  local prefix = w .. '\0'
  local out = {}
  for i = 1, #all, 2 do
    local v = all[i + 1]
    if string.sub(v, 1, #prefix) == prefix then
      out[#out + 1] = {all[i], string.sub(v, #prefix + 1)}
    end
  end
  return out
end

-- Whether worker `w` is registered and its registration has not lapsed.
local function worker_alive(w, now)
  local exp = redis.call('ZSCORE', K_WORKERS, w)
  return exp ~= false and tonumber(exp) >= now
end

-- Whether the claim of `id` under `token` is current (claimed, same token).
-- Its tokens are the claim records' and the runner's own (never negative);
-- a caller's token goes through claim_check or finish_jobs.
local function claim_current(id, token)
  return redis.call('ZSCORE', K_CLAIMED, id) ~= false and
             redis.call('HGET', K_ATTEMPTS, id) == token
end

-- A worker leaves the registry (stopped or failed): its registration,
-- description and claim records go. Returns the ids of the claims it still
-- held (current: claimed under the recorded token), for the caller to end.
local function remove_worker(w)
  local cs = worker_claims(w)
  local held, gone = {}, {}
  for i = 1, #cs do
    local c = cs[i]
    if claim_current(c[1], c[2]) then held[#held + 1] = c end
    gone[#gone + 1] = c[1]
  end
  if #gone > 0 then redis.call('HDEL', K_WORKER_JOBS, unpack(gone)) end
  redis.call('ZREM', K_WORKERS, w)
  redis.call('HDEL', K_WORKER_INFO, w)
  redis.call('HDEL', K_TAKERS, w)
  return held
end

-- Claims that end with no failure counted (a release, a worker's stop, a
-- hand-off its runner never received): each {id, token} of `cs` that is
-- still current goes back to the front of the line, the first of `cs` out
-- first, its token ended; a put held for it is applied. Wakes sleepers on
-- `channel` (when the user may PUBLISH it). Returns how many went back.
local function give_back(cs, channel)
  local back = {}
  for i = #cs, 1, -1 do
    local id, tok = cs[i][1], cs[i][2]
    if claim_current(id, tok) then
      redis.call('ZREM', K_CLAIMED, id)
      redis.call('HSET', K_ATTEMPTS, id, '-' .. tok)
      back[#back + 1] = id
    end
  end
  if #back == 0 then return 0 end
  redis.call('RPUSH', K_IDS, unpack(back))
  Q.woken = Q.woken + #back
  if redis.call('EXISTS', K_HELD) == 1 then
    local now = server_ms()
    for i = 1, #back do release_held(back[i], now) end
  end
  wake_woken(channel)
  return #back
end

-- Fails worker `w` (worker liveness): every claim it still holds ends
-- as a lapse (a stall counted; requeued or dead-lettered) and it leaves the
-- registry. use_dlq first. Returns requeued, dead-lettered.
local function fail_worker(w, now)
  local rq, dl = 0, 0
  local held = remove_worker(w)
  for i = 1, #held do
    local r = lapse(held[i][1], now, 'worker ' .. w .. ' lapsed')
    if r == 'requeued' then rq = rq + 1 elseif r == 'dead' then dl = dl + 1 end
  end
  return rq, dl
end

-- Marks jobs claimed at `now`: `ids` (no id twice in the line is assumed
-- but checked) with their items `its`, each given the next token (its
-- attempt number) and its failure count; with `worker`, each claim is
-- recorded under it. Returns {id, item, failures, token, ...}.
local function claim_ids(now, ids, its, worker)
  local m = #ids
  local stamp = int(now)
  local z = {}
  for i = 1, m do z[2 * i - 1] = stamp
  z[2 * i] = ids[i] end
  -- A batch goes into feed.claimed in skiplist encoding: a member longer
  -- than zset-max-listpack-value converts the set, and it stays converted
  -- when that member goes again at once (the contract's clients never see
  -- it). In listpack encoding every ZADD and ZREM scans the whole set: with
  -- 64 claims in flight that was a fifth of the server's work per job. The
  -- two calls cost more than they save for small batches (under 8).
  local convert = m >= 8
  if convert then redis.call('ZADD', K_CLAIMED, 0, ENCODING_KEEP) end
  local added = redis.call('ZADD', K_CLAIMED, unpack(z))
  if convert then redis.call('ZREM', K_CLAIMED, ENCODING_KEEP) end
  if added ~= m then
    -- Rare: an id twice in the line (or already claimed): hand it out once.
    local ki, kt, seen = {}, {}, {}
    for i = 1, m do
      if not seen[ids[i]] then
        seen[ids[i]] = true
        ki[#ki + 1] = ids[i]
        kt[#kt + 1] = its[i]
      end
    end
    ids, its, m = ki, kt, #ki
  end
  -- Q.cancelled is false when finish_jobs, earlier in the same call, found
  -- no failure counts.
  local fails = {}
  if Q.cancelled ~= false and redis.call('EXISTS', K_CANCELLED) == 1 then
    fails = redis.call('HMGET', K_CANCELLED, unpack(ids))
  end
  local att = redis.call('HMGET', K_ATTEMPTS, KEEP_FIELD, unpack(ids))
  if not att[1] then redis.call('HSET', K_ATTEMPTS, KEEP_FIELD, KEEP_VALUE) end
  local h, out, wc = {}, {}, {}
  for i = 1, m do
    local a = att[i + 1]
    a = a and math.abs(tonumber(a)) + 1 or 1
    -- Formatted once: a number passed to redis.call is formatted again
    -- for each use (a printf each, a visible share of a claim's cost).
    local token = int(a)
    h[2 * i - 1] = ids[i]
    h[2 * i] = token
    out[4 * i - 3] = ids[i]
    out[4 * i - 2] = its[i]
    out[4 * i - 1] = tonumber(fails[i]) or 0
    out[4 * i] = a
    if worker then
      wc[2 * i - 1] = ids[i]
      wc[2 * i] = worker_record(worker, token)
    end
  end
  redis.call('HSET', K_ATTEMPTS, unpack(h))
  if worker then redis.call('HSET', K_WORKER_JOBS, unpack(wc)) end
  if Q.events then
    for i = 1, m do emit('claimed', ids[i], h[2 * i]) end
  end
  return out
end

-- The contract's "Get" for up to `want` jobs in one step (jobs/claim.lua,
-- jobs/work.lua), after open_claim: due scheduled jobs first become
-- claimable (up to 100), then ids are popped (fewer when paused or rate
-- limited: claim_allowance) and claimed (claim_ids). Returns {id, item,
-- failures, token, ...} and, when it got fewer than `want`, one more
-- value: when to try again (ms; 0: at a wake-up or poll). Ids without an
-- item (left by a plain-command client) are dropped. Marks sleepers when
-- the queue ran dry.
local function claim_jobs(now, want, worker)
  local _, due = promote(now, 100)
  local n, later = claim_allowance(now, want)
  if n == 0 then
    if not later then redis.call('SET', K_SLEEPERS, '1') end
    return {later or retry_at(due)}
  end
  local ids = redis.call('RPOP', K_IDS, int(n))
  if not ids then
    redis.call('SET', K_SLEEPERS, '1')
    return {retry_at(due)}
  end
  if #ids < want and not later then redis.call('SET', K_SLEEPERS, '1') end
  local its = redis.call('HMGET', K_ITEMS, unpack(ids))
  for i = 1, #ids do
    if not its[i] then
      local ki, kt = {}, {}
      for j = 1, #ids do
        if its[j] then
          ki[#ki + 1] = ids[j]
          kt[#kt + 1] = its[j]
        end
      end
      ids, its = ki, kt
      break
    end
  end
  if #ids == 0 then return {retry_at(due)} end
  local out = claim_ids(now, ids, its, worker)
  if #out < 4 * want then out[#out + 1] = later or retry_at(due) end
  return out
end

-- The contract's "Finish" for the jobs in ARGV from `base` on (`m` groups
-- of id, token, result key index in KEYS (0: none), result), each only
-- when claimed under its token (jobs/finish.lua, jobs/work.lua): ZREM
-- claimed, HDEL cancelled, items and token, INCR finishes; with a result
-- PUBLISH `id\0result` on `channel` and keep it in its result key for
-- `ttl` ms (durable results). The job's put time, record and claim record go
-- too; a put held for it is applied. Returns one status per job:
-- 0 finished, 1 job_not_found, 2 job_not_claimed, 3 lost_claim,
-- 4 no_channel_permission (a result this user may not PUBLISH: that job
-- is left as it was; the others finish).
local function finish_jobs(channel, base, m, ttl)
  if m == 0 then return {} end
  local ids = {}
  for j = 1, m do ids[j] = ARGV[base + 4 * j - 4] end
  local can_publish = true
  for j = 1, m do
    if tonumber(ARGV[base + 4 * j - 2]) > 0 then
      can_publish = check_publish(channel) == nil
      break
    end
  end
  local att = redis.call('HMGET', K_ATTEMPTS, unpack(ids))
  local st, ok, o, seen = {}, {}, {}, {}
  for j = 1, m do
    local id, tok = ids[j], ARGV[base + 4 * j - 3]
    if not can_publish and tonumber(ARGV[base + 4 * j - 2]) > 0 then
      st[j] = 4
    elseif seen[id] then
      st[j] = 1
    elseif att[j] == tok and string.byte(tok) ~= 45 and redis.call('ZREM', K_CLAIMED, id) == 1 then
      -- One ZREM per job checks and removes in one step (ZMSCORE first was
      -- slower: Redis formats every score as a string for Lua).
      st[j] = 0
      seen[id] = true
      ok[#ok + 1] = j
      o[#o + 1] = id
    elseif redis.call('ZSCORE', K_CLAIMED, id) or cold.was_aborted(id, tok) then
      st[j] = 3
    elseif redis.call('HEXISTS', K_ITEMS, id) == 1 then
      st[j] = 2
    else
      st[j] = 1
    end
  end
  if #ok > 0 then
    -- Finished claims take their records along, whoever finishes them: a
    -- job handed to a job_queue handle may be finished through another
    -- handle or process, and nothing else would ever drop that record.
    -- Only current claims finish here, so each record is this claim's (or
    -- an older one's); another claim of a job this one lost keeps its own.
    redis.call('HDEL', K_WORKER_JOBS, unpack(o))
    redis.call('HDEL', K_ITEMS, unpack(o))
    redis.call('HDEL', K_ATTEMPTS, unpack(o))
    redis.call('INCRBY', K_FINISHES, int(#o))
    -- Failure counts, the put-time index, job records and held puts are
    -- rare: one EXISTS for the four, and none more when it finds none (a
    -- claim in the same call then knows there are no failure counts:
    -- nothing here creates them). Each script call costs about 10,000
    -- instructions per redis.call on Redis 7.0, so at one job a round the
    -- calls, not the data, are the cost.
    local extras = redis.call('EXISTS', K_CANCELLED, K_PUBLISHED, K_META, K_HELD) > 0
    if not extras then Q.cancelled = false end
    if extras and redis.call('EXISTS', K_CANCELLED) == 1 then redis.call('HDEL', K_CANCELLED, unpack(o)) end
    if extras and redis.call('EXISTS', K_PUBLISHED) == 1 then redis.call('ZREM', K_PUBLISHED, unpack(o)) end
    if extras then redis.call('HDEL', K_META, unpack(o)) end
    if extras and redis.call('EXISTS', K_HELD) == 1 then
      -- The server's clock: a finish carries no time (a held put's run_at
      -- is compared with it).
      local now = server_ms()
      for i = 1, #o do cold.release_held(o[i], now) end
      cold.wake_woken('feed.wake:' .. string.sub(channel, 12))
    end
    if Q.events then
      for i = 1, #o do emit('finished', o[i]) end
    end
    for _, j in ipairs(ok) do
      local k = tonumber(ARGV[base + 4 * j - 2])
      if k > 0 then
        local res = ARGV[base + 4 * j - 1]
        redis.call(NOTIFY, channel, ids[j] .. '\0' .. res)
        redis.call('LPUSH', KEYS[k], res)
        redis.call('PEXPIRE', KEYS[k], ttl)
      end
    end
  end
  return st
end

-- Hand-off (docs/jobs.md "Hand-off"). feed.takers lists the runners and
-- job_queue handles that found the queue dry and wait with idle slots:
-- field the taker, value `<lapses at, server ms>:<idle slots>` for a
-- runner (a registered worker) and the same with `:c` after it for a
-- handle's waiting claim() calls (no registration: its entry lives only as
-- long as it says). A put that finds sleepers claims its jobs for live
-- takers (claim_jobs, recorded under the taker) and publishes them on the
-- taker's own channel, so a job reaches an idle claimer in one hop, not a
-- wake-up followed by a claim round trip. jobs/work.lua keeps a runner's
-- entry and jobs/claim.lua a handle's; remove_worker drops a runner's.
local function take_channel(w)
  return 'job.take:' .. string.sub(K_CONFIG, 13) .. ':' .. w
end

-- A hand-off message for jobs c[first..last] of a claim_jobs reply: per job
-- `id\0token\0failures\0<item length>\0item` (ids hold no NUL, items may).
-- src/jobs/hand_off.cpp parses it.
local function take_message(c, last)
  local parts = {}
  for i = 1, last, 4 do
    parts[#parts + 1] = c[i] .. '\0' .. int(c[i + 3]) .. '\0' .. int(c[i + 2]) .. '\0' ..
                            int(#c[i + 1]) .. '\0' .. c[i + 1]
  end
  return table.concat(parts)
end

-- The takers a put of `n` jobs may hand them to, found before the put's
-- first write (then nothing after it can fail): the entry has not lapsed,
-- a runner's registration is alive and the user may publish on its
-- channel (a taker this user may not reach is skipped: its runner is woken
-- as any sleeper is). Entries that lapsed or whose worker is gone are
-- dropped as they are met. Stops once the takers found have `n` idle slots
-- between them, so a queue with many idle runners costs a put no more than
-- the runners it needs. `now` is the server's clock (server_ms). Returns a
-- list of {worker, idle slots, lapses at, mark}, and `now` as its field srv.
local function live_takers(n, now)
  local all = redis.call('HGETALL', K_TAKERS)
  if #all == 0 then return all end
  local out, gone, room = {srv = now}, {}, 0
  for i = 1, #all, 2 do
    if room >= n then break end
    local w = all[i]
    local exp, slots, mark = string.match(all[i + 1], '^(%d+):(%d+)(.*)$')
    exp, slots = tonumber(exp), tonumber(slots)
    if mark ~= '' and mark ~= ':c' then exp = nil end
    if not exp or exp < now or slots < 1 or (mark == '' and not worker_alive(w, now)) then
      gone[#gone + 1] = w
    elseif not check_publish(take_channel(w)) then
      out[#out + 1] = {w, slots, exp, mark}
      room = room + slots
    end
  end
  if #gone > 0 then redis.call('HDEL', K_TAKERS, unpack(gone)) end
  return out
end

-- A hand-off to a job_queue handle (mark ':c') is provisional until the
-- handle confirms that the message arrived (jobs/take_confirm.lua, sent
-- within about 50 ms of its arrival). Meanwhile feed.handed:[f] holds it:
-- member `id\0token` (the claim), score the server time (ms) at which it
-- lapses, HANDED_MS after the put. A claim still current at that time
-- never reached a live handle (its process died or stopped, or its
-- subscriber was down): handed_back gives it back. A handle is not a
-- registered worker, so nothing else would notice its death before the
-- lease lapsed; a runner's hand-offs need no confirmation, as its
-- registration stands for them (they come back when it lapses).
local HANDED_MS = 1000

-- Records the first `got` jobs of claim_jobs reply `c`, just handed to a
-- handle at server time `srv`, as provisional.
local function provisional(c, got, srv)
  local z, at = {}, int(srv + HANDED_MS)
  for i = 1, got do
    z[2 * i - 1] = at
    z[2 * i] = c[4 * i - 3] .. '\0' .. int(c[4 * i])
  end
  redis.call('ZADD', K_HANDED, unpack(z))
end

-- The hand-offs that lapsed unconfirmed by server time `srv` (at most
-- `limit`) leave feed.handed; each whose claim is still current goes back
-- to the front of the line with no failure counted (give_back, which wakes
-- sleepers on `channel`), its claim record with it. Returns how many went
-- back and how many entries lapsed.
local function handed_back(srv, channel, limit)
  local due = redis.call('ZRANGEBYSCORE', K_HANDED, '-inf', int(srv), 'LIMIT', '0', int(limit))
  if #due == 0 then return 0, 0 end
  redis.call('ZREM', K_HANDED, unpack(due))
  local cs, ids = {}, {}
  for i = 1, #due do
    local at = string.find(due[i], '\0', 1, true)
    if at then
      local id, tok = string.sub(due[i], 1, at - 1), string.sub(due[i], at + 1)
      if claim_current(id, tok) then
        cs[#cs + 1] = {id, tok}
        ids[#ids + 1] = id
      end
    end
  end
  if #cs == 0 then return 0, #due end
  redis.call('HDEL', K_WORKER_JOBS, unpack(ids))
  return give_back(cs, channel), #due
end

-- For a claim whose claim_jobs reply `c` came back short (the line ran
-- dry): the hand-offs that lapsed unconfirmed by server time `srv` go back
-- (handed_back, waking sleepers on `channel`) and are claimed too, for up
-- to `want` jobs in all (as claim_jobs(now, want, worker) would have).
-- Returns the reply, extended.
local function reclaim_handed(c, now, want, worker, srv, channel)
  if handed_back(srv, channel, 100) == 0 then return c end
  c[#c] = nil
  local more = claim_jobs(now, want - #c / 4, worker)
  for i = 1, #more do c[#c + 1] = more[i] end
  return c
end

-- Claims up to `n` waiting jobs for `takers` (live_takers), each up to its
-- idle slots, as jobs/work.lua would have, and publishes each taker's jobs
-- on its channel in one message. A taker whose slots are all used leaves
-- feed.takers. Stops at the first taker that got fewer than it could take
-- (the queue ran dry, or pause or the rate limit held claims back).
-- With `fresh` (jobs/put.lua: the ids its put just stored and left out of
-- the line, which was empty, with the queue neither paused nor rate
-- limited), the takers get those ids in order, their items from ARGV from
-- `first` on, without a look at the line or the schedule: claim_jobs would
-- have popped the same ones. The caller pushes the ones left.
-- Returns how many jobs were handed off.
local function hand_off(takers, now, n, fresh, first)
  local handed = 0
  for i = 1, #takers do
    if handed >= n then break end
    local t = takers[i]
    local want = math.min(t[2], n - handed)
    local c
    if fresh then
      local ids, its = {}, {}
      for j = 1, want do
        ids[j] = fresh[handed + j]
        its[j] = ARGV[first + handed + j - 1]
      end
      c = claim_ids(now, ids, its, t[1])
    else
      c = claim_jobs(now, want, t[1])
    end
    local got = math.floor(#c / 4)
    if got > 0 then
      redis.call(NOTIFY, take_channel(t[1]), take_message(c, 4 * got))
      if t[4] == ':c' then provisional(c, got, takers.srv) end
      handed = handed + got
      if got < t[2] then
        redis.call('HSET', K_TAKERS, t[1], int(t[3]) .. ':' .. int(t[2] - got) .. t[4])
      else
        redis.call('HDEL', K_TAKERS, t[1])
      end
    end
    if got < want then break end
  end
  return handed
end

-- The offer of jobs/work.lua (a runner) and jobs/claim.lua (a handle's
-- claimers, `mark` ':c'; a runner's is ''): after a call that asked for
-- jobs, a taker with `offer` idle slots (-1: it offers none and has no
-- entry; 0: it offers none) is a taker for the slots the call left idle,
-- while the queue ran dry (`dry`), until server time `srv` + `ttl`; else
-- its entry goes.
local function offer_slots(worker, offer, got, dry, srv, ttl, mark)
  if offer < 0 then return end
  if dry and offer > got then
    redis.call('HSET', K_TAKERS, worker, int(srv + ttl) .. ':' .. int(offer - got) .. mark)
  else
    redis.call('HDEL', K_TAKERS, worker)
  end
end
