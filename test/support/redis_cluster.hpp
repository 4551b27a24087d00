// A private Redis Cluster for the cluster integration tests: primaries and
// replicas, each a redis-server child process (`--cluster-enabled yes`) on
// its own free loopback port with its own temporary directory, joined with
// `redis-cli --cluster create ... --cluster-replicas N --cluster-yes`.
// Every server is stopped by its pid when the object goes (redis_server).
#pragma once

#include "support/redis_server.hpp"

#include <thoonk/config.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace thoonk::test {

/// One line of CLUSTER NODES.
struct cluster_node_info {
  std::string id;
  unsigned short port = 0;
  bool primary = false;
  bool failed = false;                     ///< flagged fail (or fail?)
  std::string primary_id;                  ///< a replica's primary, "-" for a primary
  std::vector<std::pair<int, int>> slots;  ///< a primary's slot ranges
};

/// Starts `primaries` primaries with `replicas` replicas each and returns
/// once `redis-cli --cluster create` joined them, every node reports
/// cluster_state:ok and every replica has synced (bounded: throws
/// std::runtime_error after 60 s, with the servers' logs).
///
/// Not thread-safe; construct it on the test runner's main thread (see
/// redis_server on PR_SET_PDEATHSIG).
class redis_cluster {
 public:
  /// `node_timeout` is each node's cluster-node-timeout: how long a
  /// primary may go unanswered before its replica takes over. The failover
  /// tests want it short; shared_cluster() uses a long one.
  explicit redis_cluster(int primaries = 3, int replicas = 1,
                         std::chrono::milliseconds node_timeout = std::chrono::milliseconds(1000));
  ~redis_cluster();
  redis_cluster(const redis_cluster&) = delete;
  redis_cluster& operator=(const redis_cluster&) = delete;

  /// Every server, primaries first as they were created (a failover
  /// changes roles; ask nodes() for the current ones).
  const std::vector<std::unique_ptr<redis_server>>& servers() const noexcept { return servers_; }
  /// The server listening on `port` (nullptr if none).
  redis_server* server_on(unsigned short port) const;

  /// A client config in cluster mode with every node as a seed and short
  /// timeouts for tests.
  thoonk::config client_config() const;

  /// `redis-cli -p PORT args...` (raw output), bounded by 10 s; throws on a
  /// failure to run. Blocking: call it outside the client's event loop or
  /// accept that the loop pauses.
  std::string cli(unsigned short port, const std::vector<std::string>& args) const;

  /// CLUSTER NODES as seen by the server on `port`.
  std::vector<cluster_node_info> nodes(unsigned short port) const;
  /// The port of the primary serving `slot`, as seen by the server on `port`.
  unsigned short primary_of(std::uint16_t slot, unsigned short port) const;
  /// A live server's port to ask.
  unsigned short any_live_port() const;

  /// Until every live node reports cluster_state:ok and agrees on who
  /// serves every slot, at most `max`. False when it did not happen.
  bool wait_ok(std::chrono::milliseconds max = std::chrono::seconds(30)) const;

  /// Moves `slot` from its primary to the primary on `to_port`: SETSLOT
  /// IMPORTING/MIGRATING, MIGRATE of its keys in batches of `batch` keys
  /// with `pause` between batches and before the first (so that a load
  /// running meanwhile sees the slot half moved: ASK, TRYAGAIN), then
  /// SETSLOT NODE on every primary. Blocking, only redis-cli children: run
  /// it on a thread of its own while the client works on its io_context.
  /// Throws std::runtime_error when a step fails, or when the slot still
  /// holds keys after 120 s of batches.
  void migrate_slot(std::uint16_t slot, unsigned short to_port, int batch,
                    std::chrono::milliseconds pause) const;

 private:
  std::vector<std::unique_ptr<redis_server>> servers_;
};

/// The cluster shared by the integration tests under cluster_topology()
/// (THOONK_TEST_TOPOLOGY=cluster; 3 primaries, 3 replicas): started on
/// first use on the calling thread (the test runner's main thread), every
/// server stopped by its pid at process exit. Tests must not change its
/// topology (no failover, no slot migration): shared_slot_owner() reads the
/// slot map once. Its node timeout is 60 s: a primary kept busy by a heavy
/// test on a loaded machine must not be failed over (that moved slots under
/// every later test, which then got MOVED replies).
redis_cluster& shared_cluster();

/// The port of the primary of shared_cluster() serving `slot`.
unsigned short shared_slot_owner(std::uint16_t slot);

}  // namespace thoonk::test
