// Helpers shared by the integration tests: a config for the test server,
// unique names, and one-line commands.
#pragma once

#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/request.hpp>
#include <thoonk/resp3/value.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::test {

/// A config pointing at the shared test server (or THOONK_REDIS_URL), with
/// short timeouts so a failure shows within a test's deadline.
thoonk::config test_config();

/// `prefix` + '-' + a random suffix, so tests never collide on a server.
std::string unique_name(std::string_view prefix);

/// Runs `req` as a plain client of the server would and returns its
/// replies; throws boost::system::system_error on a transport error. On one
/// server it goes over `c`. Under cluster_topology() it goes to the node
/// that serves it, over `c` when that is `c`'s node, else over a connection
/// of its own (made with `c`'s config, its credentials included): a
/// request goes where its first key says (after a leading MULTI; for
/// EVAL/EVALSHA/FCALL the first of its keys), every command of it must
/// touch that key's slot or no key; a keyless command goes over `c`,
/// except the per-node ones, sent to every node (ACL, CONFIG, SCRIPT,
/// FUNCTION, CLIENT KILL, CLIENT LIST, PUBSUB NUMSUB: integers summed,
/// texts and arrays joined) or every primary (KEYS, SLOWLOG, FLUSHALL,
/// FLUSHDB: arrays joined).
boost::asio::awaitable<response> raw_exec(connection& c, const request& req);

/// Runs `req` on the node listening on 127.0.0.1:`port` of the shared
/// cluster, over a connection of its own made with `via`'s config (not in
/// cluster mode), and returns its replies; throws
/// boost::system::system_error on a transport error and std::logic_error
/// when the node answers MOVED, ASK or CROSSSLOT. For the per-node reads
/// and kills of the tests run under cluster_topology() (INFO, CLIENT LIST,
/// CLIENT KILL ID).
boost::asio::awaitable<response> exec_on_node(connection& via, unsigned short port,
                                              const request& req);

/// The ports of the shared cluster's nodes (cluster_topology() only): every
/// node, or only the primaries.
std::vector<unsigned short> cluster_ports(bool primaries_only);

/// The port of the shared cluster's primary serving `key`'s hash slot (a
/// channel's too: shard channels hash as keys do).
unsigned short owner_port(std::string_view key);

/// Runs `req` (one command) with raw_exec and returns its reply.
boost::asio::awaitable<resp3::value> exec_one(connection& c, request req);

/// `co_await cmd(conn, "HGET", key, field)`. Not a coroutine itself: the
/// request is built before the awaitable starts, so temporaries are safe.
template <class... Args>
boost::asio::awaitable<resp3::value> cmd(connection& c, std::string_view name,
                                         const Args&... args) {
  request r;
  r.push(name, args...);
  return exec_one(c, std::move(r));
}

/// A request that keeps the server busy for `seconds` (DEBUG SLEEP): a slow
/// command for timeout and cancellation tests.
inline request debug_sleep(std::string_view seconds) {
  request r;
  r.push("DEBUG", "SLEEP", seconds);
  return r;
}

/// Sends PING and returns how it ended instead of throwing: for the tests of
/// connections that fail.
boost::asio::awaitable<boost::system::error_code> try_ping(connection& c, exec_options opts = {});

/// Records every event of `c` in order. The listener owns the record, so it
/// may still fire while `c` is destroyed.
std::shared_ptr<std::vector<connection_event>> record_events(connection& c);

}  // namespace thoonk::test
