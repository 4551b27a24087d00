#include "feeds/common.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <charconv>
#include <chrono>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

std::string now_ms() {
  auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::system_clock::now().time_since_epoch())
                .count();
  return std::to_string(ms);
}

namespace {

bool contains(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& ch : out)
    if (ch >= 'A' && ch <= 'Z') ch = static_cast<char>(ch - 'A' + 'a');
  return out;
}

}  // namespace

error_code permission_error(std::string_view s) {
  if (s.starts_with("NOCHANNELPERM")) return error::no_channel_permission;
  // Redis 7.0: NOPERM for commands refused before they run; inside a
  // script "The user executing the script can't ...". 7.2 and later:
  // "ACL failure in script: ..." inside scripts.
  const bool acl = s.starts_with("NOPERM") || contains(s, "The user executing the script can't") ||
                   contains(s, "ACL failure in script");
  if (!acl) return {};
  // What was refused. 7.0: "access one of the keys used as arguments",
  // "access at least one of the keys mentioned", "access one of the
  // channels", "publish to the channel"; 7.2+: "access a key",
  // "access a channel", or verbose "access the '<k>' key/channel".
  if (contains(s, "one of the keys") || contains(s, "access a key") || contains(s, "' key"))
    return error::no_key_permission;
  if (contains(s, "one of the channels") || contains(s, "access a channel") ||
      contains(s, "' channel") || contains(s, "publish to the channel"))
    return error::no_channel_permission;
  // "... no permissions to run the '<command>' command".
  if (auto p = s.find("run the '"); p != std::string_view::npos) {
    auto rest = s.substr(p + 9);
    auto cmd = lower(rest.substr(0, rest.find('\'')));
    if (cmd == "eval" || cmd == "evalsha" || cmd == "eval_ro" || cmd == "evalsha_ro" ||
        cmd == "script" || cmd.starts_with("script|"))
      return error::no_script_permission;
    if (cmd == "publish" || cmd == "spublish") return error::no_channel_permission;
  }
  return error::no_permission;
}

error_code reply_error(const resp3::value& v) {
  if (!v.is_error()) return {};
  std::string_view s = v.str;
  if (s.starts_with("FEEDNOTFOUND")) return error::feed_not_found;
  if (s.starts_with("WRONGFEEDTYPE")) return error::wrong_feed_type;
  if (s.starts_with("IDNOTFOUND")) return error::id_not_found;
  if (s.starts_with("FEEDEXISTS")) return error::feed_exists;
  if (s.starts_with("INVALIDARG")) return error::invalid_argument;
  if (auto pe = permission_error(s)) return pe;
  if (s.find("user_script") != std::string_view::npos ||
      s.starts_with("ERR Error running script") || s.starts_with("ERR Error compiling script"))
    return error::script_error;
  return error::server_error;
}

namespace {

// Lua numbers are doubles: integers above 2^53 - 1 are not exact there.
constexpr std::uint64_t max_exact = (std::uint64_t{1} << 53) - 1;

// Plain decimal digits within [lo, max_exact].
bool decimal_in(std::string_view v, std::uint64_t lo) {
  if (v.empty() || v.size() > 16) return false;
  for (char ch : v)
    if (ch < '0' || ch > '9') return false;
  std::uint64_t n = 0;
  auto r = std::from_chars(v.data(), v.data() + v.size(), n);
  return r.ec == std::errc{} && r.ptr == v.data() + v.size() && n >= lo && n <= max_exact;
}

struct int_field {
  std::string_view name;
  std::uint64_t min;
  std::string_view meaning;
};

// Every config field the scripts read as a number (src/feeds/*.cpp,
// src/jobs/lua.cpp). docs/feeds.md §2 and docs/jobs.md §1 list the same.
constexpr int_field int_fields[] = {
    {"max_length", 0, "the most items a feed keeps, 0 = unlimited"},
    {"retraction_log", 0, "retractions kept for catch-up, 0 = none"},
    {"claim_timeout_ms", 1, "milliseconds after which a claim lapses"},
    {"max_failures", 0, "failures after which a lapsing claim stalls the job"},
    {"result_ttl_ms", 1, "milliseconds a job result is kept"},
};

}  // namespace

config_check validate_config_field(std::string_view field, std::string_view value) {
  const error_code bad = error::invalid_argument;
  if (field.empty()) return {bad, "config field names must not be empty"};
  if (field == "type")
    return {bad, "config field 'type' is set by create_feed only and cannot be changed"};
  for (const auto& f : int_fields) {
    if (field != f.name) continue;
    if (decimal_in(value, f.min)) return {};
    return {bad, "config field '" + std::string(f.name) + "' (" + std::string(f.meaning) +
                     ") must be an integer from " + std::to_string(f.min) + " to " +
                     std::to_string(max_exact) + " in plain decimal digits, not '" +
                     std::string(value.substr(0, 64)) + "'"};
  }
  if (field == "published") {
    if (value == "0" || value == "1") return {};
    return {bad, "config field 'published' (index jobs by put time) must be '0' or '1', not '" +
                     std::string(value.substr(0, 64)) + "'"};
  }
  return {};
}

error_code check_type_reply(const resp3::value& v, feed_type want) {
  if (v.is_error()) return reply_error(v);
  if (v.is_null()) return error::feed_not_found;
  if (!v.is_string()) return error::unexpected_type;
  if (v.str != to_string(want)) return error::wrong_feed_type;
  return {};
}

asio::awaitable<std::tuple<error_code, resp3::value>> run_script(
    client& c, const script& s, const std::vector<std::string>& keys,
    const std::vector<std::string>& args) {
  std::vector<std::string_view> k(keys.begin(), keys.end());
  std::vector<std::string_view> a(args.begin(), args.end());
  auto [ec, v] = co_await eval_script(c.conn(), s, k, a);
  if (!ec) ec = reply_error(v);
  co_return std::tuple{ec, std::move(v)};
}

void push_type_check(request& req, const feed_names& names) {
  req.push("HGET", names.key("config"), "type");
}

asio::awaitable<std::tuple<error_code, response>> exec_checked(client& c, const request& req,
                                                               feed_type want) {
  auto [ec, resp] = co_await exec_co(c.conn(), req);
  if (!ec && resp.empty()) ec = error::unexpected_type;
  if (!ec) ec = check_type_reply(resp[0], want);
  for (std::size_t i = 1; !ec && i < resp.size(); ++i) ec = reply_error(resp[i]);
  co_return std::tuple{ec, std::move(resp)};
}

std::vector<std::string> data_keys(const feed_names& n) {
  return {n.key("config"),  n.key("ids"),      n.key("items"),       n.key("publishes"),
          n.key("changes"), n.key("retracts"), n.key("retracttrim"), n.key("idincr")};
}

namespace {
constexpr auto lua_prelude_text = lua_concat(R"lua(
-- ---- prelude shared by every data-changing feed script (src/feeds/common.cpp)
-- KEYS: 1 feed.config   2 feed.ids      3 feed.items        4 feed.publishes
--       5 feed.changes  6 feed.retracts 7 feed.retracttrim  8 feed.idincr
local K_CONFIG, K_IDS, K_ITEMS, K_PUBLISHES = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local K_CHANGES, K_RETRACTS, K_TRIM, K_IDINCR = KEYS[5], KEYS[6], KEYS[7], KEYS[8]

-- Checks the feed's type and reads config fields. Returns an error reply
-- (missing feed / other type) or nil, then {type, fields...}.
local function open_feed(want, ...)
  local conf = redis.call('HMGET', K_CONFIG, 'type', ...)
  if not conf[1] then return redis.error_reply('FEEDNOTFOUND no such feed'), conf end
  if conf[1] ~= want then
    return redis.error_reply('WRONGFEEDTYPE the feed has type ' .. conf[1]), conf
  end
  return nil, conf
end

-- Refuses, before any write, an operation whose notifications the user may
-- not PUBLISH (ACL command or channel permissions). Redis does not roll back
-- a script that fails half way, so a PUBLISH refused after the writes would
-- leave them applied under an error. Returns an error reply or nil.
-- redis.acl_check_cmd exists from Redis 7.0; older servers are not checked.
-- check_publish(ch1, ch2, ...): lua_check_publish_source in common.hpp.
)lua", lua_check_publish_source, R"lua(
-- feed.publishes: the contract's publish counter, used as the sequence
-- number of publishes and edits.
local function publish_count()
  return tonumber(redis.call('GET', K_PUBLISHES) or '0') or 0
end

-- Catch-up index (docs/feeds.md): id -> publish counter value of its latest
-- publish or edit.
local function record_change(id, seq)
  redis.call('ZADD', K_CHANGES, seq, id)
end

-- Catch-up retraction log: id -> `seq`, the publish counter value when it
-- was retracted (the number of publishes whose messages preceded the
-- retract message). The newest `log_max` are kept: the log is trimmed in
-- batches of 64, checked when `check` is true (publishes check every 64th
-- counter value, to stay cheap); feed.retracttrim holds the highest counter
-- value trimmed away, so a catch-up can tell that its gap lost retractions.
-- An id re-published after its retraction keeps its log entry: a replay
-- then reports the retraction and, later, the new publish, in order.
local function record_retracts(ids, seq, log_max, check)
  if #ids == 0 then return end
  redis.call('ZREM', K_CHANGES, unpack(ids))
  if log_max <= 0 then
    redis.call('SET', K_TRIM, seq)
    return
  end
  for i = 1, #ids do redis.call('ZADD', K_RETRACTS, seq, ids[i]) end
  if not check then return end
  local n = redis.call('ZCARD', K_RETRACTS)
  if n > log_max + 64 then
    local cut = n - log_max
    local last = redis.call('ZRANGE', K_RETRACTS, cut - 1, cut - 1, 'WITHSCORES')
    redis.call('ZREMRANGEBYRANK', K_RETRACTS, 0, cut - 1)
    redis.call('SET', K_TRIM, last[2])
  end
end
-- ---- end of prelude
)lua");
}  // namespace

const std::string_view lua_prelude = lua_view(lua_prelude_text);

const script get_all_script{std::string(lua_prelude) + R"lua(
-- Get All (contract 002 "Get IDs" + "Get Items" as one snapshot).
-- ARGV[1] expected type: 'feed' (zset, oldest first) or 'sorted_feed' (list).
local err = open_feed(ARGV[1])
if err then return err end
local ids
if ARGV[1] == 'feed' then
  ids = redis.call('ZRANGE', K_IDS, 0, -1)
else
  ids = redis.call('LRANGE', K_IDS, 0, -1)
end
local out = {}
-- HMGET in chunks: unpack() has a stack limit.
for i = 1, #ids, 1000 do
  local chunk = {}
  for j = i, math.min(i + 999, #ids) do chunk[#chunk + 1] = ids[j] end
  local items = redis.call('HMGET', K_ITEMS, unpack(chunk))
  for j = 1, #chunk do
    if items[j] then
      out[#out + 1] = chunk[j]
      out[#out + 1] = items[j]
    end
  end
end
return out
)lua"};

asio::awaitable<std::tuple<error_code, std::vector<feed_item>>> get_all(client& c,
                                                                       const std::string& name,
                                                                       feed_type type) {
  std::vector<feed_item> out;
  if (auto ec = validate_name(c.get_config(), name)) co_return std::tuple{ec, std::move(out)};
  feed_names n(c.get_config(), name);
  auto keys = data_keys(n);
  std::vector<std::string> args;
  args.emplace_back(to_string(type));
  auto [ec, v] = co_await run_script(c, get_all_script, keys, args);
  if (ec) co_return std::tuple{ec, std::move(out)};
  if (v.elements.size() % 2 != 0) co_return std::tuple{error_code(error::unexpected_type), std::move(out)};
  out.reserve(v.elements.size() / 2);
  for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2)
    out.push_back(feed_item{std::move(v.elements[i].str), std::move(v.elements[i + 1].str)});
  co_return std::tuple{error_code{}, std::move(out)};
}

using opt_string = std::optional<std::string>;

asio::awaitable<std::tuple<error_code, opt_string>> get_item(client& c, std::string name,
                                                             feed_type type, std::string id) {
  const auto& cfg = c.get_config();
  error_code ec = validate_name(cfg, name);
  if (!ec) ec = validate_id(cfg, id);
  if (ec) co_return std::tuple{ec, opt_string{}};
  feed_names n(cfg, name);
  request req;
  push_type_check(req, n);
  req.push("HGET", n.key("items"), id);
  auto [rec, resp] = co_await exec_checked(c, req, type);
  if (rec) co_return std::tuple{rec, opt_string{}};
  co_return std::tuple{error_code{}, as_opt_string(resp[1])};
}

asio::awaitable<std::tuple<error_code, std::vector<opt_string>>> get_items(
    client& c, std::string name, feed_type type, std::vector<std::string> ids) {
  const auto& cfg = c.get_config();
  std::vector<opt_string> out;
  error_code ec = validate_name(cfg, name);
  if (!ec) ec = validate_ids(cfg, ids);
  if (ec) co_return std::tuple{ec, out};
  feed_names n(cfg, name);
  request req;
  push_type_check(req, n);
  if (!ids.empty()) {
    std::string items_key = n.key("items");
    std::string_view head[] = {items_key};
    req.push_range("HMGET", head, ids);
  }
  auto [rec, resp] = co_await exec_checked(c, req, type);
  if (rec) co_return std::tuple{rec, out};
  if (!ids.empty()) {
    if (resp[1].elements.size() != ids.size())
      co_return std::tuple{error_code(error::unexpected_type), out};
    for (auto& e : resp[1].elements) out.push_back(as_opt_string(e));
  }
  co_return std::tuple{error_code{}, std::move(out)};
}

std::optional<std::string> as_opt_string(const resp3::value& v) {
  if (v.is_null() || !v.is_string()) return std::nullopt;
  return v.str;
}

std::uint64_t as_u64(const resp3::value& v, error_code& ec) {
  if (v.type == resp3::type::number) {
    if (v.integer < 0) ec = error::unexpected_type;
    return static_cast<std::uint64_t>(v.integer);
  }
  if (v.is_string()) {
    std::uint64_t out = 0;
    auto r = std::from_chars(v.str.data(), v.str.data() + v.str.size(), out);
    if (r.ec != std::errc{} || r.ptr != v.str.data() + v.str.size()) ec = error::unexpected_type;
    return out;
  }
  if (v.is_null()) return 0;
  ec = error::unexpected_type;
  return 0;
}

error_code validate_ids(const config& cfg, const std::vector<std::string>& ids) {
  for (const auto& id : ids)
    if (auto ec = validate_id(cfg, id)) return ec;
  return {};
}

}  // namespace thoonk::detail
