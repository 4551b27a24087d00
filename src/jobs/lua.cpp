#include "jobs/lua.hpp"

#include "feeds/common.hpp"  // lua_check_publish_source, lua_concat

#include <string>

namespace thoonk::detail::jobs::lua {

namespace {

// Shared by every script. KEYS layouts (built by job_keys.hpp):
//
//   queue: 1 config  2 ids  3 items  4 publishes  5 idincr  6 sleepers
//   job:   1 config  2 ids  3 items  4 publishes  5 finishes  6 published
//          7 claimed  8 cancelled  9 stalled  10 attempts  11 sleepers
//          12 idincr  13 unaccounted  [14.. result keys: finish only]
//
// Extension state (docs/jobs.md):
//   feed.attempts:[f]  hash id -> attempt number: +k while claimed with
//                      token k, -k once that claim ended. Absent for jobs
//                      never claimed by this library (plain-command clients
//                      never write it: their claims have no token). Plus
//                      one field KEEP_FIELD ("\0encoding") that keeps the
//                      hash in hashtable encoding (see the prelude).
//   feed.sleepers:[f]  exists while some getter found the queue empty and
//                      waits; a put deletes it and PUBLISHes a wake-up, so
//                      a busy queue pays no PUBLISH per put.
//
// Permissions (docs/errors.md "Permissions"): Redis does not roll back a
// script that fails half way, so every script that may PUBLISH checks
// first, before its first write, that the calling ACL user may
// (check_publish: NOCHANNELPERM error reply, nothing written). The
// give-back scripts (release, queue give-back) run for waiters that went
// away and must not fail: they skip the wake-up instead (wake_if_allowed).
constexpr auto prelude_text = detail::lua_concat(R"lua(
local function fail(code) return redis.error_reply('THOONK ' .. code) end
local function check(want)
  local t = redis.call('HGET', KEYS[1], 'type')
  if not t then return fail('feed_not_found') end
  if t ~= want then return fail('wrong_feed_type') end
  return nil
end
local function int(n) return string.format('%d', n) end
-- A field no job id can have (ids never contain NUL) whose value is longer
-- than hash-max-listpack-value (64): it keeps feed.attempts in Redis's
-- hashtable encoding, so token lookups do not scan a listpack.
local KEEP_FIELD = '\0encoding'
local KEEP_VALUE = 'thoonk: keeps this hash in hashtable encoding, see docs/jobs.md (feed.attempts)'

local B36 = '0123456789abcdefghijklmnopqrstuvwxyz'
local function b36(n)
  local s = ''
  repeat
    local d = n % 36
    s = string.sub(B36, d + 1, d + 1) .. s
    n = (n - d) / 36
  until n == 0
  return s
end
-- n new ids from the counter; a fresh counter starts at now*1024, so ids of
-- a deleted and re-created queue never repeat (stored results stay apart).
local function new_ids(key, n, now)
  local base
  if redis.call('EXISTS', key) == 1 then
    base = redis.call('INCRBY', key, n) - n
  else
    base = now * 1024
    redis.call('SET', key, int(base + n))
  end
  -- b36(v) = b36(floor(v / 1296)) .. two digits: the prefix changes
  -- once every 1296 ids, so most ids cost one concatenation.
  local ids, hi, prefix = {}, -1, ''
  for i = 1, n do
    local v = base + i
    local lo = v % 1296
    local h = (v - lo) / 1296
    if h ~= hi then
      hi = h
      prefix = h > 0 and b36(h) or ''
    end
    local d1, d2 = (lo - lo % 36) / 36, lo % 36
    if prefix == '' and d1 == 0 then
      ids[i] = string.sub(B36, d2 + 1, d2 + 1)
    else
      ids[i] = prefix .. string.sub(B36, d1 + 1, d1 + 1) .. string.sub(B36, d2 + 1, d2 + 1)
    end
  end
  return ids
end
-- normal: LPUSH (end of the line); high: RPUSH, first id next out.
local function push(key, ids, high)
  if high then
    local r = {}
    for i = #ids, 1, -1 do r[#r + 1] = ids[i] end
    redis.call('RPUSH', key, unpack(r))
  else
    redis.call('LPUSH', key, unpack(ids))
  end
end
local function wake(sleepers, channel, n)
  if redis.call('DEL', sleepers) == 1 then redis.call('PUBLISH', channel, n) end
end
-- check_publish(ch, ...) (src/feeds/common.hpp) is spliced in here.
)lua", detail::lua_check_publish_source, R"lua(
-- For scripts that must not fail: the wake-up is skipped when the user may
-- not PUBLISH it (sleeping claimers find the jobs at their next poll).
local function wake_if_allowed(sleepers, channel, n)
  if check_publish(channel) then return end
  wake(sleepers, channel, n)
end
-- A config number as the scripts need it: an integer >= lo, else the
-- default. create_feed / set_config refuse other values
-- (validate_config_field); this guards against values written with plain
-- commands (a fractional PEXPIRE would fail after the writes).
local function conf_int(v, default, lo)
  local n = tonumber(v)
  if not n or n ~= math.floor(n) or n < lo or n > 9007199254740991 then return default end
  return n
end
-- job layout: nil when `id` is claimed under `token`, else the error code.
local function claim_check(id, token)
  if not redis.call('ZSCORE', KEYS[7], id) then
    if redis.call('HEXISTS', KEYS[3], id) == 1 then return 'job_not_claimed' end
    return 'job_not_found'
  end
  if redis.call('HGET', KEYS[10], id) ~= token then return 'lost_claim' end
  return nil
end
)lua");

script make(const char* body) { return script(std::string(detail::lua_view(prelude_text)) + body); }

}  // namespace

// ---------------------------------------------------------------------------
// queue
// ---------------------------------------------------------------------------

// ARGV: 1 now_ms, 2 high ('1'/'0'), 3 wake channel, 4.. items. Returns ids.
const script& queue_put() {
  static const script s = make(R"lua(
local e = check('queue') or check_publish(ARGV[3]) if e then return e end
local n = #ARGV - 3
if n < 1 then return {} end
local ids = new_ids(KEYS[5], n, tonumber(ARGV[1]))
local h = {}
for i = 1, n do h[2 * i - 1] = ids[i]; h[2 * i] = ARGV[3 + i] end
push(KEYS[2], ids, ARGV[2] == '1')
redis.call('HSET', KEYS[3], unpack(h))
redis.call('INCRBY', KEYS[4], n)
wake(KEYS[6], ARGV[3], n)
return ids
)lua");
  return s;
}

// ARGV: 1 n. Pops up to n ids (next out first), takes their items.
// Returns {id1, item1, id2, item2, ...}. Marks sleepers when short.
const script& queue_get() {
  static const script s = make(R"lua(
local e = check('queue') if e then return e end
local n = tonumber(ARGV[1])
local popped = redis.call('RPOP', KEYS[2], n)
if not popped then redis.call('SET', KEYS[6], '1') return {} end
if #popped < n then redis.call('SET', KEYS[6], '1') end
local items = redis.call('HMGET', KEYS[3], unpack(popped))
redis.call('HDEL', KEYS[3], unpack(popped))
local out, seen = {}, {}
for i = 1, #popped do
  local id = popped[i]
  if items[i] and not seen[id] then
    seen[id] = true
    out[#out + 1] = id
    out[#out + 1] = items[i]
  end
end
return out
)lua");
  return s;
}

// ARGV: 1 wake channel, then id, item pairs in the order they were got.
// Puts them back at the front of the line, first pair next out.
const script& queue_give_back() {
  static const script s = make(R"lua(
local e = check('queue') if e then return e end
local m = (#ARGV - 1) / 2
if m < 1 then return 0 end
local h, r = {}, {}
for j = 1, m do h[2 * j - 1] = ARGV[2 * j]; h[2 * j] = ARGV[2 * j + 1] end
for j = m, 1, -1 do r[#r + 1] = ARGV[2 * j] end
redis.call('HSET', KEYS[3], unpack(h))
redis.call('RPUSH', KEYS[2], unpack(r))
wake_if_allowed(KEYS[6], ARGV[1], m)
return m
)lua");
  return s;
}

// ARGV: 1 'len' | 'ids'.
const script& queue_read() {
  static const script s = make(R"lua(
local e = check('queue') if e then return e end
if ARGV[1] == 'len' then return redis.call('LLEN', KEYS[2]) end
return redis.call('LRANGE', KEYS[2], 0, -1)
)lua");
  return s;
}

// ---------------------------------------------------------------------------
// job queue
// ---------------------------------------------------------------------------

// ARGV: 1 now_ms, 2 high, 3 wake channel, 4.. items. Returns ids.
// Contract "Put": LPUSH/RPUSH ids, HSET items, ZADD published, INCR
// publishes (the contract's high-priority put forgets the INCR; we count
// every put).
const script& job_put() {
  static const script s = make(R"lua(
local cfg = redis.call('HMGET', KEYS[1], 'type', 'published')
if not cfg[1] then return fail('feed_not_found') end
if cfg[1] ~= 'job' then return fail('wrong_feed_type') end
local perm = check_publish(ARGV[3]) if perm then return perm end
local n = #ARGV - 3
if n < 1 then return {} end
local ids = new_ids(KEYS[12], n, tonumber(ARGV[1]))
local h = {}
for i = 1, n do h[2 * i - 1] = ids[i]; h[2 * i] = ARGV[3 + i] end
push(KEYS[2], ids, ARGV[2] == '1')
redis.call('HSET', KEYS[3], unpack(h))
if cfg[2] == '1' then
  local z = {}
  for i = 1, n do z[2 * i - 1] = ARGV[1]; z[2 * i] = ids[i] end
  redis.call('ZADD', KEYS[6], unpack(z))
end
redis.call('INCRBY', KEYS[4], n)
wake(KEYS[11], ARGV[3], n)
return ids
)lua");
  return s;
}

// ARGV: 1 now_ms, 2 n. Contract "Get" in one atomic step: pop up to n ids,
// ZADD claimed (claim time), read items and failure counts, assign tokens.
// Returns {id, item, failures, token, ...}. Ids without an item (left by a
// plain-command client) are dropped. Marks sleepers when short.
const script& job_claim() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local n = tonumber(ARGV[2])
local ids = redis.call('RPOP', KEYS[2], n)
if not ids then redis.call('SET', KEYS[11], '1') return {} end
if #ids < n then redis.call('SET', KEYS[11], '1') end
local its = redis.call('HMGET', KEYS[3], unpack(ids))
-- Rare: an id without an item (left by a plain-command client) is dropped.
for i = 1, #ids do
  if not its[i] then
    local ki, kt = {}, {}
    for j = 1, #ids do
      if its[j] then ki[#ki + 1] = ids[j]; kt[#kt + 1] = its[j] end
    end
    ids, its = ki, kt
    break
  end
end
local m = #ids
if m == 0 then return {} end
local z = {}
for i = 1, m do z[2 * i - 1] = ARGV[1]; z[2 * i] = ids[i] end
if redis.call('ZADD', KEYS[7], unpack(z)) ~= m then
  -- Rare: an id twice in the line (or already claimed): hand it out once.
  local ki, kt, seen = {}, {}, {}
  for i = 1, m do
    if not seen[ids[i]] then
      seen[ids[i]] = true
      ki[#ki + 1] = ids[i]; kt[#kt + 1] = its[i]
    end
  end
  ids, its, m = ki, kt, #ki
end
local fails = {}
if redis.call('EXISTS', KEYS[8]) == 1 then fails = redis.call('HMGET', KEYS[8], unpack(ids)) end
local att = redis.call('HMGET', KEYS[10], KEEP_FIELD, unpack(ids))
if not att[1] then redis.call('HSET', KEYS[10], KEEP_FIELD, KEEP_VALUE) end
local h, out = {}, {}
for i = 1, m do
  local a = att[i + 1]
  a = a and math.abs(tonumber(a)) + 1 or 1
  h[2 * i - 1] = ids[i]; h[2 * i] = a
  out[4 * i - 3] = ids[i]
  out[4 * i - 2] = its[i]
  out[4 * i - 1] = tonumber(fails[i]) or 0
  out[4 * i] = a
end
redis.call('HSET', KEYS[10], unpack(h))
return out
)lua");
  return s;
}

// ARGV: 1 wake channel, then id, token pairs in claim order. Un-claims
// jobs claimed for waiters that went away: back to the front of the line,
// no failure counted. Returns how many.
const script& job_release() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local m = (#ARGV - 1) / 2
local back = {}
for j = m, 1, -1 do
  local id, tok = ARGV[2 * j], ARGV[2 * j + 1]
  if redis.call('ZSCORE', KEYS[7], id) and redis.call('HGET', KEYS[10], id) == tok then
    redis.call('ZREM', KEYS[7], id)
    redis.call('HSET', KEYS[10], id, '-' .. tok)
    back[#back + 1] = id
  end
end
if #back > 0 then
  redis.call('RPUSH', KEYS[2], unpack(back))
  wake_if_allowed(KEYS[11], ARGV[1], #back)
end
return #back
)lua");
  return s;
}

// KEYS: job layout + result keys. ARGV: 1 job.finish channel, then per job
// id, token, result key index in KEYS (0: no result), result.
// Contract "Finish" for each job claimed under its token: ZREM claimed,
// HDEL cancelled, HDEL items, INCR finishes; with a result PUBLISH
// job.finish `id\0result` and LPUSH + PEXPIRE the durable result (contract
// 001). Also drops the job's put time (feed.published; the contract leaks
// it) and its token. Returns one status per job: 0 finished,
// 1 job_not_found, 2 job_not_claimed, 3 lost_claim, 4 no_channel_permission
// (a finish with a result by a user who may not PUBLISH job.finish: that
// job is left as it was; the others of the batch finish).
const script& job_finish() {
  static const script s = make(R"lua(
local cfg = redis.call('HMGET', KEYS[1], 'type', 'result_ttl_ms')
if not cfg[1] then return fail('feed_not_found') end
if cfg[1] ~= 'job' then return fail('wrong_feed_type') end
local ttl = conf_int(cfg[2], 300000, 1)
local m = (#ARGV - 1) / 4
local ids = {}
for j = 1, m do ids[j] = ARGV[4 * j - 2] end
-- Results are PUBLISHed: may this user? (Checked before any write.)
local can_publish = true
for j = 1, m do
  if tonumber(ARGV[4 * j]) > 0 then
    can_publish = check_publish(ARGV[1]) == nil
    break
  end
end
local att = {}
if redis.call('EXISTS', KEYS[10]) == 1 then att = redis.call('HMGET', KEYS[10], unpack(ids)) end
local st, ok, o, seen = {}, {}, {}, {}
for j = 1, m do
  local id = ids[j]
  if not can_publish and tonumber(ARGV[4 * j]) > 0 then
    st[j] = 4  -- its result could not be announced: not finished
  elseif seen[id] then
    st[j] = 1  -- the same job twice in one batch: the first one finished it
  elseif att[j] == ARGV[4 * j - 1] and redis.call('ZREM', KEYS[7], id) == 1 then
    -- Claimed under this token, and now out of feed.claimed. One ZREM per
    -- job checks and removes in one step (ZMSCORE first was slower: Redis
    -- formats every score as a string for Lua).
    st[j] = 0
    seen[id] = true
    ok[#ok + 1] = j
    o[#o + 1] = id
  elseif redis.call('ZSCORE', KEYS[7], id) then
    st[j] = 3
  elseif redis.call('HEXISTS', KEYS[3], id) == 1 then
    st[j] = 2
  else
    st[j] = 1
  end
end
if #ok > 0 then
  if redis.call('EXISTS', KEYS[8]) == 1 then redis.call('HDEL', KEYS[8], unpack(o)) end
  redis.call('HDEL', KEYS[3], unpack(o))
  redis.call('HDEL', KEYS[10], unpack(o))
  if redis.call('EXISTS', KEYS[6]) == 1 then redis.call('ZREM', KEYS[6], unpack(o)) end
  redis.call('INCRBY', KEYS[5], #o)
  for _, j in ipairs(ok) do
    local k = tonumber(ARGV[4 * j])
    if k > 0 then
      local res = ARGV[4 * j + 1]
      redis.call('PUBLISH', ARGV[1], ids[j] .. '\0' .. res)
      redis.call('LPUSH', KEYS[k], res)
      redis.call('PEXPIRE', KEYS[k], ttl)
    end
  end
end
return st
)lua");
  return s;
}

// ARGV: 1 id, 2 token, 3 wake channel. Contract "Cancel": HINCRBY
// cancelled, LPUSH ids, ZREM claimed. Returns the new failure count.
const script& job_cancel() {
  static const script s = make(R"lua(
local e = check('job') or check_publish(ARGV[3]) if e then return e end
local id = ARGV[1]
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
local f = redis.call('HINCRBY', KEYS[8], id, 1)
redis.call('LPUSH', KEYS[2], id)
redis.call('ZREM', KEYS[7], id)
redis.call('HSET', KEYS[10], id, '-' .. ARGV[2])
wake(KEYS[11], ARGV[3], 1)
return f
)lua");
  return s;
}

// ARGV: 1 id, 2 token. Contract "Stall": ZREM claimed, HDEL cancelled,
// SADD stalled, ZREM published.
const script& job_stall() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local id = ARGV[1]
local c = claim_check(id, ARGV[2]) if c then return fail(c) end
redis.call('ZREM', KEYS[7], id)
redis.call('HDEL', KEYS[8], id)
redis.call('SADD', KEYS[9], id)
redis.call('ZREM', KEYS[6], id)
redis.call('HSET', KEYS[10], id, '-' .. ARGV[2])
return 1
)lua");
  return s;
}

// ARGV: 1 now_ms, then id, token pairs. Renews the claim time of each job
// claimed under its token. Returns one status per job, as job_finish:
// 0 renewed, 1 job_not_found, 2 job_not_claimed, 3 lost_claim.
const script& job_heartbeat() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local code = {job_not_found = 1, job_not_claimed = 2, lost_claim = 3}
local st = {}
for j = 1, (#ARGV - 1) / 2 do
  local id = ARGV[2 * j]
  local c = claim_check(id, ARGV[2 * j + 1])
  if c then
    st[j] = code[c]
  else
    redis.call('ZADD', KEYS[7], 'XX', ARGV[1], id)
    st[j] = 0
  end
end
return st
)lua");
  return s;
}

// ARGV: 1 id, 2 now_ms, 3 wake channel. Contract "Retry": SREM stalled,
// LPUSH ids, ZADD published.
const script& job_retry() {
  static const script s = make(R"lua(
local cfg = redis.call('HMGET', KEYS[1], 'type', 'published')
if not cfg[1] then return fail('feed_not_found') end
if cfg[1] ~= 'job' then return fail('wrong_feed_type') end
local perm = check_publish(ARGV[3]) if perm then return perm end
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[3], id) == 0 then return fail('job_not_found') end
if redis.call('SISMEMBER', KEYS[9], id) == 0 then return fail('job_not_stalled') end
redis.call('SREM', KEYS[9], id)
redis.call('LPUSH', KEYS[2], id)
if cfg[2] == '1' then redis.call('ZADD', KEYS[6], ARGV[2], id) end
wake(KEYS[11], ARGV[3], 1)
return 1
)lua");
  return s;
}

// ARGV: 1 id. Contract "Retract", plus the extension state.
const script& job_retract() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local id = ARGV[1]
if redis.call('HEXISTS', KEYS[3], id) == 0 then return fail('job_not_found') end
redis.call('HDEL', KEYS[3], id)
redis.call('HDEL', KEYS[8], id)
redis.call('ZREM', KEYS[6], id)
redis.call('SREM', KEYS[9], id)
redis.call('ZREM', KEYS[7], id)
redis.call('LREM', KEYS[2], 1, id)
redis.call('HDEL', KEYS[10], id)
redis.call('SREM', KEYS[13], id)
return 1
)lua");
  return s;
}

// ARGV: 1 'type' | 'failures' | 'ids' | 'counts', 2 id (failures).
const script& job_read() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local w = ARGV[1]
if w == 'failures' then
  if redis.call('HEXISTS', KEYS[3], ARGV[2]) == 0 then return fail('job_not_found') end
  return tonumber(redis.call('HGET', KEYS[8], ARGV[2])) or 0
elseif w == 'ids' then
  return redis.call('HKEYS', KEYS[3])
elseif w == 'counts' then
  return {redis.call('LLEN', KEYS[2]), redis.call('ZCARD', KEYS[7]),
          redis.call('SCARD', KEYS[9]), redis.call('HLEN', KEYS[3]),
          tonumber(redis.call('GET', KEYS[4])) or 0,
          tonumber(redis.call('GET', KEYS[5])) or 0}
end
return 1
)lua");
  return s;
}

// ---------------------------------------------------------------------------
// maintenance
// ---------------------------------------------------------------------------

// ARGV: 1 now_ms, 2 batch, 3 wake channel. Up to `batch` claims older than
// claim_timeout_ms: failure +1, then requeued (LPUSH, as Cancel) or, past
// max_failures, stalled (as Stall). Their tokens end. A claimed id without
// an item is just dropped. Returns {requeued, stalled, examined}.
const script& maint_expire() {
  static const script s = make(R"lua(
local cfg = redis.call('HMGET', KEYS[1], 'type', 'claim_timeout_ms', 'max_failures')
if not cfg[1] then return fail('feed_not_found') end
if cfg[1] ~= 'job' then return fail('wrong_feed_type') end
local perm = check_publish(ARGV[3]) if perm then return perm end
local timeout = conf_int(cfg[2], 60000, 1)
local maxf = conf_int(cfg[3], 5, 0)
local cutoff = tonumber(ARGV[1]) - timeout
local ids = redis.call('ZRANGEBYSCORE', KEYS[7], '-inf', '(' .. int(cutoff),
                       'LIMIT', 0, tonumber(ARGV[2]))
local rq, st = 0, 0
for _, id in ipairs(ids) do
  redis.call('ZREM', KEYS[7], id)
  local a = tonumber(redis.call('HGET', KEYS[10], id))
  if a and a > 0 then redis.call('HSET', KEYS[10], id, int(-a)) end
  if redis.call('HEXISTS', KEYS[3], id) == 0 then
    redis.call('HDEL', KEYS[10], id)
    redis.call('HDEL', KEYS[8], id)
  else
    local f = redis.call('HINCRBY', KEYS[8], id, 1)
    if f > maxf then
      redis.call('HDEL', KEYS[8], id)
      redis.call('SADD', KEYS[9], id)
      redis.call('ZREM', KEYS[6], id)
      st = st + 1
    else
      redis.call('LPUSH', KEYS[2], id)
      rq = rq + 1
    end
  end
end
if rq > 0 then wake(KEYS[11], ARGV[3], rq) end
return {rq, st, #ids}
)lua");
  return s;
}

// ARGV: 1 cursor, 2 count. One HSCAN step over feed.items; returns
// {next cursor, ids that are neither claimed nor stalled...}.
const script& maint_scan() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local r = redis.call('HSCAN', KEYS[3], ARGV[1], 'COUNT', tonumber(ARGV[2]))
local out = {r[1]}
local kv = r[2]
for i = 1, #kv, 2 do
  local id = kv[i]
  if not redis.call('ZSCORE', KEYS[7], id) and redis.call('SISMEMBER', KEYS[9], id) == 0 then
    out[#out + 1] = id
  end
end
return out
)lua");
  return s;
}

// ARGV: 1 wake channel, 2.. ids unaccounted for in this pass. Each one that
// was already a suspect in the previous pass (feed.unaccounted) and is
// still in no state now (item present, not claimed, not stalled, not in
// feed.ids) is requeued (contract Maintenance: LPUSH ids). Returns the
// requeued ids.
const script& maint_requeue_unaccounted() {
  static const script s = make(R"lua(
local e = check('job') or check_publish(ARGV[1]) if e then return e end
local out = {}
for i = 2, #ARGV do
  local id = ARGV[i]
  if redis.call('SISMEMBER', KEYS[13], id) == 1
     and redis.call('HEXISTS', KEYS[3], id) == 1
     and not redis.call('ZSCORE', KEYS[7], id)
     and redis.call('SISMEMBER', KEYS[9], id) == 0
     and not redis.call('LPOS', KEYS[2], id) then
    redis.call('LPUSH', KEYS[2], id)
    out[#out + 1] = id
  end
end
if #out > 0 then wake(KEYS[11], ARGV[1], #out) end
return out
)lua");
  return s;
}

// ARGV: 1 reset ('1': forget the previous pass's suspects first), 2.. ids.
const script& maint_store_suspects() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
if ARGV[1] == '1' then redis.call('DEL', KEYS[13]) end
if #ARGV > 1 then redis.call('SADD', KEYS[13], unpack(ARGV, 2)) end
return redis.call('SCARD', KEYS[13])
)lua");
  return s;
}

// ARGV: 1 cursor, 2 count. One HSCAN step over feed.attempts, removing the
// tokens of jobs that no longer exist (finished or retracted with plain
// commands). Returns {next cursor, removed}.
const script& maint_orphans() {
  static const script s = make(R"lua(
local e = check('job') if e then return e end
local r = redis.call('HSCAN', KEYS[10], ARGV[1], 'COUNT', tonumber(ARGV[2]))
local kv = r[2]
local gone = {}
for i = 1, #kv, 2 do
  if kv[i] ~= KEEP_FIELD and redis.call('HEXISTS', KEYS[3], kv[i]) == 0 then
    gone[#gone + 1] = kv[i]
  end
end
if #gone > 0 then redis.call('HDEL', KEYS[10], unpack(gone)) end
return {r[1], #gone}
)lua");
  return s;
}

// KEYS: 1 lock. ARGV: 1 owner. Releases the maintenance lock if still ours.
const script& maint_unlock() {
  static const script s(R"lua(
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
)lua");
  return s;
}

}  // namespace thoonk::detail::jobs::lua
