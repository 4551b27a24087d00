#include "support/test_client.hpp"

#include "support/redis_cluster.hpp"
#include "support/redis_server.hpp"

#include "connection/cluster.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <cctype>
#include <random>
#include <stdexcept>

namespace thoonk::test {

thoonk::config test_config() {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url(shared_redis_url(), ec);
  if (ec) throw boost::system::system_error(ec, "test server URL");
  cfg.connect_timeout = std::chrono::seconds(3);
  cfg.reconnect_min_delay = std::chrono::milliseconds(10);
  cfg.reconnect_max_delay = std::chrono::milliseconds(200);
  return cfg;
}

std::string unique_name(std::string_view prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string s(prefix);
  s.push_back('-');
  for (int i = 0; i < 10; ++i) s.push_back(digits[rng() % 36]);
  return s;
}

namespace {

using command_args = std::vector<std::string>;

// The commands of a request, parsed back from its wire form (arrays of
// bulk strings, as request::push writes them).
std::vector<command_args> commands_of(const request& req) {
  const std::string& p = req.payload();
  std::vector<command_args> out;
  std::size_t at = 0;
  auto number = [&](char prefix) {
    if (at >= p.size() || p[at] != prefix) throw std::logic_error("raw_exec: unexpected payload");
    const auto end = p.find("\r\n", at);
    const auto n = std::stoul(p.substr(at + 1, end - at - 1));
    at = end + 2;
    return n;
  };
  while (at < p.size()) {
    const auto argc = number('*');
    command_args args;
    for (std::size_t i = 0; i < argc; ++i) {
      const auto len = number('$');
      args.push_back(p.substr(at, len));
      at += len + 2;
    }
    out.push_back(std::move(args));
  }
  return out;
}

std::string upper(std::string s) {
  for (auto& ch : s) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
  return s;
}

enum class route_kind { own, key, every_node, every_primary };
struct route {
  route_kind kind = route_kind::own;
  std::string key;
  std::string command;  // upper case, with the subcommand for CLIENT / PUBSUB
};

route route_of(const request& req) {
  const auto cmds = commands_of(req);
  std::size_t i = !cmds.empty() && upper(cmds[0].at(0)) == "MULTI" ? 1 : 0;
  if (i >= cmds.size()) return {};
  const auto& a = cmds[i];
  const auto name = upper(a.at(0));
  const auto sub = a.size() > 1 ? upper(a[1]) : std::string();
  auto is = [&](std::initializer_list<const char*> names) {
    for (auto n : names)
      if (name == n) return true;
    return false;
  };
  if (is({"EVAL", "EVALSHA", "EVAL_RO", "EVALSHA_RO", "FCALL", "FCALL_RO"})) {
    if (a.size() > 3 && std::stoi(a[2]) > 0) return {route_kind::key, a[3], name};
    return {route_kind::own, {}, name};
  }
  if (is({"ACL", "CONFIG", "SCRIPT", "FUNCTION"}) ||
      (name == "CLIENT" && (sub == "KILL" || sub == "LIST")) ||
      (name == "PUBSUB" && sub == "NUMSUB"))
    return {route_kind::every_node, {}, name + " " + sub};
  if (is({"KEYS", "SLOWLOG", "FLUSHALL", "FLUSHDB"})) return {route_kind::every_primary, {}, name};
  if (is({"OBJECT", "MEMORY", "XINFO"}) && a.size() > 2) return {route_kind::key, a[2], name};
  if (is({"PING",    "ECHO",    "PUBLISH", "INFO",  "CLIENT",  "PUBSUB", "DEBUG",
          "TIME",    "DBSIZE",  "WAIT",    "HELLO", "CLUSTER", "SELECT", "SCAN",
          "COMMAND", "LATENCY", "MULTI",   "EXEC",  "DISCARD", "AUTH"}) ||
      a.size() < 2)
    return {route_kind::own, {}, name};
  return {route_kind::key, a[1], name};
}

// `req` over a connection of its own to 127.0.0.1:`port`, with via's
// config (not in cluster mode). Never over `via` itself: which node a
// cluster-mode connection reached is not in its config.
boost::asio::awaitable<response> exec_on(connection& via, unsigned short port, const request& req) {
  auto cfg = via.get_config();
  cfg.cluster = false;
  cfg.endpoints.clear();
  cfg.host = "127.0.0.1";
  cfg.port = port;
  connection node(via.get_executor(), cfg);
  co_await node.async_connect(boost::asio::use_awaitable);
  auto [ec, resp] =
      co_await node.async_exec(req, boost::asio::as_tuple(boost::asio::use_awaitable));
  node.stop();
  if (ec) throw boost::system::system_error(ec, "raw_exec on port " + std::to_string(port));
  // A request sent to the wrong node is the test's mistake: say so rather
  // than hand back a redirect as if it were the answer.
  for (const auto& v : resp)
    if (v.is_error() && (v.str.starts_with("MOVED ") || v.str.starts_with("ASK ") ||
                         v.str.starts_with("CROSSSLOT")))
      throw std::logic_error("raw_exec: a request the test sent went to the wrong slot: " + v.str);
  co_return resp;
}

// One node's replies folded into `into` (the first node's).
void merge(resp3::value& into, resp3::value&& v, const std::string& command) {
  if (into.is_error()) return;
  if (v.is_error()) {
    into = std::move(v);
    return;
  }
  if (into.type == resp3::type::number && v.type == resp3::type::number) {
    into.integer += v.integer;
  } else if (command == "PUBSUB NUMSUB") {
    for (std::size_t i = 0; i < into.elements.size() && i < v.elements.size(); ++i)
      if (into.elements[i].type == resp3::type::number)
        into.elements[i].integer += v.elements[i].integer;
  } else if (into.is_aggregate() && v.is_aggregate()) {
    for (auto& e : v.elements) into.elements.push_back(std::move(e));
  } else if (into.is_string() && v.is_string() && command != "ACL SETUSER" &&
             command != "ACL DELUSER" && !command.starts_with("CONFIG") &&
             !command.starts_with("SCRIPT") && !command.starts_with("FUNCTION")) {
    into.str += v.str;
  }
}

}  // namespace

boost::asio::awaitable<response> exec_on_node(connection& via, unsigned short port,
                                              const request& req) {
  return exec_on(via, port, req);
}

std::vector<unsigned short> cluster_ports(bool primaries_only) {
  std::vector<unsigned short> ports;
  for (const auto& s : shared_cluster().servers()) {
    const auto port = s->port();
    bool primary = false;
    for (std::uint16_t slot = 0; slot < 16384 && !primary;
         slot = static_cast<std::uint16_t>(slot + 1))
      primary = shared_slot_owner(slot) == port;
    if (!primaries_only || primary) ports.push_back(port);
  }
  return ports;
}

unsigned short owner_port(std::string_view key) {
  return shared_slot_owner(detail::hash_slot(key));
}

boost::asio::awaitable<response> raw_exec(connection& c, const request& req) {
  if (!cluster_topology()) co_return co_await c.async_exec(req, boost::asio::use_awaitable);
  const auto r = route_of(req);
  switch (r.kind) {
    case route_kind::own: co_return co_await c.async_exec(req, boost::asio::use_awaitable);
    case route_kind::key:
      co_return co_await exec_on(c, shared_slot_owner(detail::hash_slot(r.key)), req);
    case route_kind::every_node:
    case route_kind::every_primary: {
      const auto ports = cluster_ports(r.kind == route_kind::every_primary);
      response out;
      for (auto port : ports) {
        auto resp = co_await exec_on(c, port, req);
        if (out.empty()) {
          out = std::move(resp);
          continue;
        }
        for (std::size_t i = 0; i < out.size() && i < resp.size(); ++i)
          merge(out[i], std::move(resp[i]), r.command);
      }
      co_return out;
    }
  }
  co_return response{};
}

boost::asio::awaitable<resp3::value> exec_one(connection& c, request req) {
  auto resp = co_await raw_exec(c, req);
  co_return std::move(resp.at(0));
}

boost::asio::awaitable<boost::system::error_code> try_ping(connection& c, exec_options opts) {
  request r;
  r.push("PING");
  auto [ec, resp] =
      co_await c.async_exec(r, opts, boost::asio::as_tuple(boost::asio::use_awaitable));
  co_return ec;
}

std::shared_ptr<std::vector<connection_event>> record_events(connection& c) {
  auto events = std::make_shared<std::vector<connection_event>>();
  c.on_event([events](const connection_event& e) { events->push_back(e); });
  return events;
}

}  // namespace thoonk::test
