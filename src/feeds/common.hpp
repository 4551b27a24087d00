// Helpers shared by the feed, sorted feed, management and subscription
// sources: script error mapping, typed reply access, timestamps and the Lua
// prelude every data-changing feed script starts with.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/error.hpp>
#include <thoonk/resp3/value.hpp>
#include <thoonk/script.hpp>

#include "detail/keys.hpp"
#include "detail/script_exec.hpp"

#include <boost/asio/awaitable.hpp>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace thoonk::detail {

/// Milliseconds since the Unix epoch (std::chrono::system_clock), decimal:
/// the contract's publish timestamp.
std::string now_ms();

/// Maps an error reply of a feed script (or of any command) to an error
/// code; success for anything that is not an error reply. Scripts report
/// conditions with a leading word:
///   FEEDNOTFOUND → error::feed_not_found, WRONGFEEDTYPE → wrong_feed_type,
///   IDNOTFOUND → id_not_found, FEEDEXISTS → feed_exists,
///   INVALIDARG → invalid_argument;
/// ACL refusals as permission_error() says; a Lua runtime error →
/// error::script_error; any other error reply (OOM, READONLY, ...) →
/// error::server_error.
boost::system::error_code reply_error(const resp3::value& v);

/// The permission error an error reply's text reports; success when the
/// text is no ACL refusal. Shared by the feed and the job error mappers.
///
///  * `NOCHANNELPERM ...` (check_publish in a library script) →
///    no_channel_permission;
///  * an ACL refusal, in any of the texts Redis uses: `NOPERM ...` for a
///    command refused before it runs (EVALSHA itself, its declared keys, a
///    plain command), and for a command refused inside a script
///    `ERR The user executing the script can't ...` (Redis 7.0) or
///    `ERR ACL failure in script: ...` (7.2 and later). Classified by what
///    was refused: a key → no_key_permission; a channel, or the PUBLISH
///    command → no_channel_permission; EVAL, EVALSHA, SCRIPT (LOAD) →
///    no_script_permission; anything else → no_permission.
boost::system::error_code permission_error(std::string_view text);

/// The outcome of checking one config field: `ec` is success or
/// error::invalid_argument; `reason` names the field and its allowed values
/// (empty on success).
struct config_check {
  boost::system::error_code ec;
  std::string reason;
  explicit operator bool() const noexcept { return static_cast<bool>(ec); }
};

/// Checks one config field a caller wants to write with create_feed,
/// set_config or set_config_json (before any I/O; docs/feeds.md §2 lists the
/// rules). Fields the library reads must hold what the scripts expect:
///
///   max_length, retraction_log    integer 0 .. 2^53-1
///   claim_timeout_ms, result_ttl_ms  integer 1 .. 2^53-1 (milliseconds)
///   max_failures                  integer 0 .. 2^53-1
///   published                     "0" or "1"
///
/// Integers are plain decimal digits (no sign, space, point or exponent).
/// `type` may not be written (it is set at creation only) and a field name
/// may not be empty. Any other field is the application's and any value is
/// accepted. The rules go by field name alone, whatever the feed's type: a
/// job field on a plain feed is checked too (no round trip to read the
/// type, and a feed deleted and re-created with another type never holds a
/// value its scripts cannot read).
config_check validate_config_field(std::string_view field, std::string_view value);

/// Checks the reply of `HGET feed.config:[f] type`: feed_not_found when
/// null, wrong_feed_type when not `want`.
boost::system::error_code check_type_reply(const resp3::value& v, feed_type want);

/// Runs a library script with owned keys/args (they must stay alive in the
/// caller's frame until this completes). Error replies are mapped with
/// reply_error(), so a successful result is never an error value.
boost::asio::awaitable<std::tuple<boost::system::error_code, resp3::value>> run_script(
    client& c, const script& s, const std::vector<std::string>& keys,
    const std::vector<std::string>& args);

/// Runs `req` (whose first command is `HGET feed.config:[f] type`, pushed
/// with push_type_check) and checks the type, then every other reply for
/// error values.
void push_type_check(request& req, const feed_names& names);
boost::asio::awaitable<std::tuple<boost::system::error_code, response>> exec_checked(
    client& c, const request& req, feed_type want);

/// The keys every data-changing feed and sorted-feed script receives, in
/// this order (the Lua prelude names them): config, ids, items, publishes,
/// changes, retracts, retracttrim, idincr.
std::vector<std::string> data_keys(const feed_names& n);

/// Lua shared by the data-changing scripts (prepended to their source).
/// It includes check_publish (below).
extern const std::string_view lua_prelude;

/// The Lua helper check_publish(channel, ...): call it before a script's
/// first write; it returns an error reply `NOCHANNELPERM the user may not
/// PUBLISH on <channel>` when the calling ACL user may not PUBLISH on one of
/// the channels (the command or the channel refused), else nil. Redis does
/// not roll back a script that fails half way, so a PUBLISH refused after
/// the writes would leave them applied under an error.
/// redis.acl_check_cmd exists from Redis 7.0; older servers are not checked.
/// Part of lua_prelude; the job prelude (src/jobs/lua.cpp) and the feed
/// management scripts include it too.
inline constexpr char lua_check_publish_source[] = R"lua(
local function check_publish(...)
  if not redis.acl_check_cmd then return nil end
  for i = 1, select('#', ...) do
    local ch = select(i, ...)
    if not redis.acl_check_cmd('publish', ch, '') then
      return redis.error_reply('NOCHANNELPERM the user may not PUBLISH on ' .. ch)
    end
  end
  return nil
end
)lua";
inline constexpr std::string_view lua_check_publish = lua_check_publish_source;

/// Joins string literals (char arrays) at compile time: script sources made
/// of shared parts stay constant-initialized (no static init order issue).
/// The result is NUL-terminated; lua_view() gives the text.
template <std::size_t... N>
constexpr auto lua_concat(const char (&... parts)[N]) {
  std::array<char, (N + ...) - sizeof...(N) + 1> out{};
  std::size_t at = 0;
  auto add = [&](const char* p, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[at++] = p[i];
  };
  (add(parts, N - 1), ...);
  return out;
}
template <std::size_t M>
constexpr std::string_view lua_view(const std::array<char, M>& a) {
  return std::string_view(a.data(), M - 1);
}

/// Get All of a feed or sorted feed in one atomic step: data_keys(), ARGV[1]
/// the expected type. Returns a flat {id, item, id, item, ...} in order
/// (ZRANGE for feeds, LRANGE for sorted feeds).
extern const script get_all_script;

/// Runs get_all_script and pairs the reply up.
boost::asio::awaitable<std::tuple<boost::system::error_code, std::vector<feed_item>>> get_all(
    client& c, const std::string& name, feed_type type);

/// Get Items shared by feeds and sorted feeds (HGET / HMGET after the type
/// check, one round trip).
boost::asio::awaitable<std::tuple<boost::system::error_code, std::optional<std::string>>>
get_item(client& c, std::string name, feed_type type, std::string id);
boost::asio::awaitable<
    std::tuple<boost::system::error_code, std::vector<std::optional<std::string>>>>
get_items(client& c, std::string name, feed_type type, std::vector<std::string> ids);

/// Typed access to script replies (all throw nothing; bad shapes yield
/// error::unexpected_type through `ec`).
std::optional<std::string> as_opt_string(const resp3::value& v);
std::uint64_t as_u64(const resp3::value& v, boost::system::error_code& ec);

/// Validates an id list (each as validate_id).
boost::system::error_code validate_ids(const config& cfg, const std::vector<std::string>& ids);

}  // namespace thoonk::detail
