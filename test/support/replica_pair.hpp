// A private primary and a replica of it, each a redis-server child process
// on its own loopback port, for the replication, durability and failover
// tests. Both are stopped by their pids when the object goes.
#pragma once

#include "support/redis_server.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/connection.hpp>

#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <string>

namespace thoonk::test {

struct replica_pair {
  redis_server primary;
  redis_server replica;

  replica_pair()
      : primary(redis_server_options{}),
        replica(redis_server_options{{"--replicaof", "127.0.0.1", std::to_string(primary.port()),
                                      "--repl-ping-replica-period", "1", "--repl-timeout", "5"}}) {}

  /// A test config for `server`.
  static thoonk::config config_for(const redis_server& server) {
    thoonk::config cfg;
    cfg.host = server.host();
    cfg.port = server.port();
    cfg.client_name = "thoonk-replica-test";
    cfg.connect_timeout = std::chrono::seconds(3);
    cfg.reconnect_min_delay = std::chrono::milliseconds(10);
    cfg.reconnect_max_delay = std::chrono::milliseconds(200);
    return cfg;
  }
};

/// INFO replication's `field:value` line, or empty.
inline std::string info_field(const std::string& info, const std::string& field) {
  auto p = info.find(field + ":");
  if (p == std::string::npos) return {};
  p += field.size() + 1;
  return info.substr(p, info.find_first_of("\r\n", p) - p);
}

/// Waits (at most `max`) until the server `primary` talks to has `n`
/// replicas online. Returns false when it did not happen.
inline boost::asio::awaitable<bool> replicas_online(
    connection& primary, int n, std::chrono::milliseconds max = std::chrono::seconds(10)) {
  const auto deadline = std::chrono::steady_clock::now() + max;
  for (;;) {
    auto v = co_await cmd(primary, "INFO", "replication");
    int online = 0;
    for (int i = 0; i < 8; ++i)
      if (info_field(v.str, "slave" + std::to_string(i)).find("state=online") != std::string::npos)
        ++online;
    if (online >= n) co_return true;
    if (std::chrono::steady_clock::now() > deadline) co_return false;
    co_await sleep_for(std::chrono::milliseconds(20));
  }
}

}  // namespace thoonk::test
