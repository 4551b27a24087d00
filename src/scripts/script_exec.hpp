// Running library scripts from the library's own coroutines: EVALSHA with
// reload, the one runner of the embedded scripts (src/lua, reached through
// the generated thoonk_lua_scripts.hpp) and the one mapper of their error
// replies (docs/architecture.md "Scripts").
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/script.hpp>

#include "detail/client_core.hpp"
#include "detail/op_status.hpp"

#include <boost/asio/awaitable.hpp>

#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace thoonk::detail {

/// What eval_script does after its `SCRIPT LOAD` + `EVALSHA` retry, from
/// the two replies (no I/O; test/unit/script_reload_test.cpp).
enum class reload_step {
  done,         ///< the EVALSHA reply is the script's reply
  try_eval,     ///< SCRIPT LOAD was refused by the ACL and nothing ran: send EVAL
  load_failed,  ///< SCRIPT LOAD failed otherwise: its reply is the outcome
};
reload_step after_reload(const resp3::value& load, const resp3::value& evalsha);

/// The outcome of the EVAL fallback: its reply, or, when EVAL is refused by
/// the ACL too, one NOPERM error naming both refusals (maps to
/// error::no_script_permission) so the caller learns what to grant.
resp3::value after_eval(resp3::value load, resp3::value eval);

/// EVALSHA with transparent SCRIPT LOAD on NOSCRIPT; when the ACL refuses
/// SCRIPT LOAD, EVAL with the source (nothing has run at that point). A
/// user allowed neither gets a NOPERM error value naming both. The views must stay
/// valid until the awaitable completes (they live in the caller's frame).
/// The value is the script's reply (an error value on a Lua error).
boost::asio::awaitable<std::tuple<boost::system::error_code, resp3::value>> eval_script(
    connection& conn, const script& s, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts = {});

/// eval_script on the connection the client's router chooses for the
/// first key (the feed, queue or job code's only way to a script).
boost::asio::awaitable<std::tuple<boost::system::error_code, resp3::value>> eval_script(
    detail::client_core& c, const script& s, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts = {});

/// Awaitable form of connection::exec for the library's coroutines.
boost::asio::awaitable<std::tuple<boost::system::error_code, response>> exec_co(
    connection& conn, const request& req, exec_options opts = {});

/// exec_co on the connection the client's router chooses for
/// `routing_key`, a key the request's commands touch (every command of one
/// request must touch keys of that key's feed only); empty: any connection.
boost::asio::awaitable<std::tuple<boost::system::error_code, response>> exec_co(
    detail::client_core& c, const request& req, std::string_view routing_key,
    exec_options opts = {});

/// The one mapper of error replies (every library script, and any
/// command) to error codes; success for anything that is not an error
/// reply. Scripts report conditions as `THOONK <code> <message>` (the Lua
/// fail(), src/lua/includes/errors.lua), where <code> is the name of the
/// error code: feed_not_found, wrong_feed_type, id_not_found, feed_exists,
/// invalid_argument, job_not_found, job_not_claimed, job_not_stalled,
/// lost_claim, queue_empty, no_channel_permission (check_publish). ACL
/// refusals map as permission_error() says; a Lua runtime or compile error
/// (`user_script:N:` in the text, N a line of the script's .lua file) →
/// error::script_error; any other error reply (OOM, READONLY, ...) →
/// error::server_error.
boost::system::error_code reply_error(const resp3::value& v);

/// reply_error() with the server's text, for the caller's diagnostics.
op_status reply_status(const resp3::value& v);

/// The permission error an error reply's text reports; success when the
/// text is no ACL refusal (reply_error uses it).
///
///  * an ACL refusal, in any of the texts Redis uses: `NOPERM ...` for a
///    command refused before it runs (EVALSHA itself, its declared keys, a
///    plain command), and for a command refused inside a script
///    `ERR The user executing the script can't ...` (Redis 7.0) or
///    `ERR ACL failure in script: ...` (7.2 and later). Classified by what
///    was refused: a key → no_key_permission; a channel, or the PUBLISH
///    command → no_channel_permission; EVAL, EVALSHA, SCRIPT (LOAD) →
///    no_script_permission; anything else → no_permission.
boost::system::error_code permission_error(std::string_view text);

/// How includes/notify.lua defines the notification command (src/lua/includes/notify.lua:
/// `local NOTIFY = 'publish'`; the library form assigns it per call
/// without `local`), and what both sharded forms, sharded_variant() and
/// make_function_library(), turn it into.
inline constexpr std::string_view classic_notify = "NOTIFY = 'publish'";
inline constexpr std::string_view sharded_notify = "NOTIFY = 'spublish'";

/// The script as cluster mode runs it: every notification with SPUBLISH
/// (sharded pub/sub) instead of PUBLISH. includes/notify.lua defines the command
/// once (`local NOTIFY = 'publish'`, src/lua/includes/notify.lua); the variant is
/// the same source with that definition reading 'spublish'. A script
/// without it (feed management: newfeed, delfeed and conffeed stay on
/// classic pub/sub) comes back unchanged. Each variant is made once and
/// kept (its SHA1 computed then). Thread-safe.
script sharded_variant(const script& s);

/// The one runner of library scripts: EVALSHA (SCRIPT LOAD on NOSCRIPT)
/// through the client's router, error replies mapped with reply_status(),
/// so a successful result is never an error value (on an error the status
/// and the value keep the server's text). Takes its keys and args by value:
/// the awaitable owns them.
boost::asio::awaitable<std::tuple<op_status, resp3::value>> run_script(
    detail::client_core& c, const script& s, std::vector<std::string> keys,
    std::vector<std::string> args);

}  // namespace thoonk::detail
