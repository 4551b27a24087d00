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
/// a Lua runtime error → error::script_error; any other error reply (OOM,
/// READONLY, ...) → error::server_error.
boost::system::error_code reply_error(const resp3::value& v);

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
extern const std::string_view lua_prelude;

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
