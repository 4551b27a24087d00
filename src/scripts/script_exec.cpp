#include "scripts/script_exec.hpp"

#include "connection/router.hpp"
#include "scripts/script_functions.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <mutex>
#include <optional>
#include <unordered_map>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
void push_script_call(request& req, std::string_view command, std::string_view script_or_sha,
                      std::span<const std::string_view> keys,
                      std::span<const std::string_view> args) {
  req.begin_command(3 + keys.size() + args.size(), command);
  req.append_arg(command);
  req.append_arg(script_or_sha);
  req.append_arg(keys.size());
  for (auto k : keys) req.append_arg(k);
  for (auto a : args) req.append_arg(a);
}

void push_evalsha(request& req, const script& s, std::span<const std::string_view> keys,
                  std::span<const std::string_view> args) {
  push_script_call(req, "EVALSHA", s.sha1(), keys, args);
}

bool is_noscript(const resp3::value& v) { return v.is_error() && v.str.starts_with("NOSCRIPT"); }
}  // namespace

reload_step after_reload(const resp3::value& load, const resp3::value& evalsha) {
  if (!load.is_error()) return reload_step::done;
  // The EVALSHA behind a refused load ran only if someone else loaded the
  // script in between; then its reply is the script's.
  if (!is_noscript(evalsha)) return reload_step::done;
  // Only a permission refusal can be worked around by sending the source.
  if (permission_error(load.str) == error::no_script_permission) return reload_step::try_eval;
  return reload_step::load_failed;
}

resp3::value after_eval(resp3::value load, resp3::value eval) {
  if (!eval.is_error() || permission_error(eval.str) != error::no_script_permission) return eval;
  // Neither way in: say both, so the reader learns what to grant.
  resp3::value out = std::move(eval);
  out.str =
      "NOPERM the server's script cache lost the library's script (NOSCRIPT) and this "
      "user may neither reload it (SCRIPT LOAD: " +
      load.str + ") nor send its source (EVAL: " + out.str +
      "); grant +script|load or +eval besides +evalsha";
  return out;
}

asio::awaitable<std::tuple<error_code, response>> exec_co(connection& conn, const request& req,
                                                          exec_options opts) {
  co_return co_await conn.async_exec(req, opts, asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<std::tuple<error_code, response>> exec_co(detail::client_core& c,
                                                          const request& req,
                                                          std::string_view routing_key,
                                                          exec_options opts) {
  co_return co_await router_of(c).exec(req, routing_key, opts);
}

namespace {

// Where eval_script's requests go: one connection, or the client's router
// (which follows cluster redirects) with the script's first key.
struct exec_target {
  connection* conn = nullptr;
  router* r = nullptr;
  std::string_view key;

  asio::awaitable<std::tuple<error_code, response>> exec(const request& req,
                                                         exec_options opts) const {
    if (r) co_return co_await r->exec(req, key, opts);
    co_return co_await conn->async_exec(req, opts, asio::as_tuple(asio::use_awaitable));
  }

  // The library's scripts run as functions through a client's router only.
  const function_library* library_of(const script& s) const {
    return r && r->functions_usable() ? function_library_of(s) : nullptr;
  }
};

// The FCALL path (script_functions.hpp): FCALL, and FUNCTION LOAD + FCALL
// when the server lacks the library. Returns the script's reply, or no
// value when the call is to run with EVALSHA (nothing ran).
asio::awaitable<std::tuple<error_code, std::optional<resp3::value>>> fcall_on(
    const exec_target& target, const function_library& lib, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts) {
  request req;
  push_script_call(req, "FCALL", lib.name, keys, args);
  auto [ec, resp] = co_await target.exec(req, opts);
  if (ec) co_return std::tuple{ec, std::nullopt};
  auto step = after_fcall(resp[0]);
  resp3::value reply = std::move(resp[0]);
  // Twice at most: a second load is needed only when the key's slot moved
  // to another node between the load and the call (or the load this call
  // waited for failed).
  // A copy of the shared flights: this frame may be destroyed after the
  // router (pending coroutines end with the io_context).
  auto flights_ptr = target.r->function_loads();
  auto& flights = *flights_ptr;
  for (int loads = 0; step == fcall_step::load && loads < 2; ++loads) {
    // Another call refused functions for good meanwhile: EVALSHA.
    if (!target.r->functions_usable()) co_return std::tuple{error_code{}, std::nullopt};
    const std::string flight = target.r->node_key(target.key) + '\n' + lib.name;
    if (!flights.lead(flight)) {
      // Another call of this client loads the library on that node now
      // (concurrent first calls): wait for it, then FCALL again.
      auto ex = co_await asio::this_coro::executor;
      auto t = std::make_shared<asio::steady_timer>(ex, asio::steady_timer::time_point::max());
      flights.join(flight, t);
      co_await t->async_wait(asio::as_tuple(asio::use_awaitable));
      if (!flights.resumed(flight, t))
        co_return std::tuple{error_code(asio::error::operation_aborted), std::nullopt};
      req.clear();
      push_script_call(req, "FCALL", lib.name, keys, args);
      auto [ec2, resp2] = co_await target.exec(req, opts);
      if (ec2) co_return std::tuple{ec2, std::nullopt};
      step = after_fcall(resp2[0]);
      reply = std::move(resp2[0]);
      continue;
    }
    // This call loads; the ones that join meanwhile wait for it to end.
    struct flight_guard {
      load_flights<std::shared_ptr<asio::steady_timer>>& flights;
      const std::string& flight;
      ~flight_guard() {
        for (auto& w : flights.finish(flight)) w->cancel();
      }
    } guard{flights, flight};
    req.clear();
    req.push("FUNCTION", "LOAD", lib.text);
    push_script_call(req, "FCALL", lib.name, keys, args);
    auto [ec2, resp2] = co_await target.exec(req, opts);
    if (ec2) co_return std::tuple{ec2, std::nullopt};
    step = after_function_load(resp2[0], resp2[1]);
    reply = std::move(resp2[1]);
  }
  if (step == fcall_step::done) co_return std::tuple{error_code{}, std::move(reply)};
  if (step == fcall_step::use_eval_for_good) target.r->refuse_functions();
  co_return std::tuple{error_code{}, std::nullopt};
}

asio::awaitable<std::tuple<error_code, resp3::value>> eval_on(
    const exec_target& target, const script& s, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts) {
  if (const auto* lib = target.library_of(s)) {
    auto [ec, reply] = co_await fcall_on(target, *lib, keys, args, opts);
    if (ec || reply) co_return std::tuple{ec, reply ? std::move(*reply) : resp3::value{}};
  }
  request req;
  push_evalsha(req, s, keys, args);
  auto [ec, resp] = co_await target.exec(req, opts);
  if (ec) co_return std::tuple{ec, resp3::value{}};
  if (!(resp[0].is_error() && resp[0].str.starts_with("NOSCRIPT")))
    co_return std::tuple{error_code{}, std::move(resp[0])};

  // The server lost its script cache: load and run again in one round trip.
  req.clear();
  req.push("SCRIPT", "LOAD", s.source());
  push_evalsha(req, s, keys, args);
  auto [ec2, resp2] = co_await target.exec(req, opts);
  if (ec2) co_return std::tuple{ec2, resp3::value{}};
  const auto step = after_reload(resp2[0], resp2[1]);
  if (step == reload_step::done) co_return std::tuple{error_code{}, std::move(resp2[1])};
  if (step == reload_step::load_failed) co_return std::tuple{error_code{}, std::move(resp2[0])};

  // SCRIPT LOAD was refused (a user with +evalsha but not +script|load) and
  // the EVALSHA behind it found no script, so nothing ran: send the source.
  req.clear();
  push_script_call(req, "EVAL", s.source(), keys, args);
  auto [ec3, resp_eval] = co_await target.exec(req, opts);
  if (ec3) co_return std::tuple{ec3, resp3::value{}};
  co_return std::tuple{error_code{}, after_eval(std::move(resp2[0]), std::move(resp_eval[0]))};
}

}  // namespace

script sharded_variant(const script& s) {
  const auto at = s.source().find(classic_notify);
  if (at == std::string::npos) return s;
  static std::mutex mutex;
  static std::unordered_map<std::string, script> made;  // by the classic script's SHA1
  std::lock_guard lock(mutex);
  auto it = made.find(s.sha1());
  if (it == made.end()) {
    std::string text = s.source();
    text.replace(at, classic_notify.size(), sharded_notify);
    it = made.emplace(s.sha1(), script(std::move(text))).first;
  }
  return it->second;
}

asio::awaitable<std::tuple<error_code, resp3::value>> eval_script(
    detail::client_core& c, const script& s, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts) {
  exec_target target;
  target.r = &router_of(c);
  if (!keys.empty()) target.key = keys.front();
  if (target.r->clustered()) {
    // Notifications over sharded pub/sub (docs/cluster.md, "Notifications").
    const script sharded = sharded_variant(s);
    co_return co_await eval_on(target, sharded, keys, args, opts);
  }
  co_return co_await eval_on(target, s, keys, args, opts);
}

asio::awaitable<std::tuple<error_code, resp3::value>> eval_script(
    connection& conn, const script& s, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts) {
  exec_target target;
  target.conn = &conn;
  co_return co_await eval_on(target, s, keys, args, opts);
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
        cmd == "script" || cmd.starts_with("script|") || cmd == "fcall" || cmd == "fcall_ro" ||
        cmd == "function" || cmd.starts_with("function|"))
      return error::no_script_permission;
    if (cmd == "publish" || cmd == "spublish") return error::no_channel_permission;
  }
  return error::no_permission;
}

namespace {

// The codes scripts report with `THOONK <code> <message>` (src/lua/includes/errors.lua
// fail()): each the name of the error code it maps to.
struct script_code {
  std::string_view name;
  error code;
};
constexpr script_code script_codes[] = {
    {"feed_not_found", error::feed_not_found},
    {"wrong_feed_type", error::wrong_feed_type},
    {"id_not_found", error::id_not_found},
    {"feed_exists", error::feed_exists},
    {"invalid_argument", error::invalid_argument},
    {"job_not_found", error::job_not_found},
    {"job_not_claimed", error::job_not_claimed},
    {"job_not_stalled", error::job_not_stalled},
    {"lost_claim", error::lost_claim},
    {"worker_exists", error::worker_exists},
    {"queue_empty", error::queue_empty},
    {"no_channel_permission", error::no_channel_permission},
    // A command the user may not run (includes/acl.lua check_commands).
    {"no_permission", error::no_permission},
};

}  // namespace

error_code reply_error(const resp3::value& v) {
  if (!v.is_error()) return {};
  std::string_view s = v.str;
  // The tag opens the reply; some servers put "ERR " before a reply text
  // that has no error code of their own.
  constexpr std::string_view tag = "THOONK ";
  auto body = s.starts_with("ERR ") ? s.substr(4) : s;
  if (body.starts_with(tag)) {
    auto code = body.substr(tag.size());
    code = code.substr(0, code.find_first_of(" \r\n"));
    for (const auto& c : script_codes)
      if (c.name == code) return c.code;
    return error::script_error;  // a code this build does not know
  }
  if (auto pe = permission_error(s)) return pe;
  if (contains(s, "user_script") || contains(s, "user_function") ||
      contains(s, "Error running script") || contains(s, "Error compiling function") ||
      contains(s, "Error compiling script") || s.starts_with("ERR Lua"))
    return error::script_error;
  return error::server_error;
}

op_status reply_status(const resp3::value& v) {
  auto ec = reply_error(v);
  if (!ec) return {};
  return {ec, v.str};
}

asio::awaitable<std::tuple<op_status, resp3::value>> run_script(detail::client_core& c,
                                                                const script& s,
                                                                std::vector<std::string> keys,
                                                                std::vector<std::string> args) {
  std::vector<std::string_view> k(keys.begin(), keys.end());
  std::vector<std::string_view> a(args.begin(), args.end());
  auto [ec, v] = co_await eval_script(c, s, k, a);
  if (ec) co_return std::tuple{op_status(ec), std::move(v)};
  co_return std::tuple{reply_status(v), std::move(v)};
}

}  // namespace thoonk::detail
