// Where the library's commands go. Every feed, queue and job operation
// sends through its client's router and never holds a connection itself.
#pragma once

#include "connection/cluster.hpp"
#include "scripts/script_functions.hpp"

#include <thoonk/connection.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace thoonk::detail {

/// Counters of cluster routing (all zero on a single server): the public
/// struct (include/thoonk/cluster.hpp, client::cluster_stats).
using cluster_stats = thoonk::cluster_stats;

class cluster_router;

/// The router's slot map as the subscriber reads it (cluster mode): which
/// primary serves a slot, and a way to read the map again. Used on the
/// client's executor only.
class slot_source {
 public:
  virtual ~slot_source() = default;
  /// The primary the current map names for `slot`; none before the first
  /// map or while no primary serves it.
  virtual std::optional<cluster_node> primary_for(std::uint16_t slot) const = 0;
  /// Reads the map again (joining a read under way) and completes when it
  /// ends, whether or not a node answered.
  virtual boost::asio::awaitable<void> refresh() = 0;
};

/// Chooses the connection that serves a command, and in cluster mode
/// follows the cluster's redirects. A command of the library touches keys
/// of one feed only (every script's keys share the feed's name, and in
/// cluster mode its hash slot: config::cluster implies cluster_hash_tags),
/// so the first key decides.
///
/// On one server every key is served by the client's one multiplexed
/// command connection. In cluster mode (config::cluster) the client's
/// connection is the seed: the slot map is read through it (CLUSTER
/// SHARDS, else CLUSTER SLOTS) and keyless commands go there; keyed
/// commands go over one multiplexed connection per primary, chosen by the
/// key's hash slot. The decisions live in cluster.hpp (no I/O); the rules
/// are in docs/cluster.md.
///
/// Not thread-safe: used on the client's executor, like the connection.
class router {
 public:
  /// One server: everything goes to `single`.
  explicit router(connection& single);
  /// Cluster mode when `single.get_config().cluster`.
  ~router();
  router(const router&) = delete;
  router& operator=(const router&) = delete;

  bool clustered() const noexcept { return cluster_ != nullptr; }

  /// Sends `req` to the node serving `key` (the seed for an empty key) and
  /// completes with its replies. In cluster mode: MOVED updates the map and
  /// sends again (the map is read again in the background), ASK sends
  /// ASKING plus the request to the node named (the map unchanged),
  /// TRYAGAIN and CLUSTERDOWN send again after a pause; a request whose
  /// node was not connected (never written) is sent again after a pause,
  /// or as soon as a new map sends its slot to another primary. A request
  /// written and then cut off completes with error::unknown_outcome, as on
  /// one server. `opts.timeout`, else config::request_timeout, bounds the
  /// whole request, every attempt and wait included: error::request_timeout
  /// after it. Every command of `req` must touch the slot of `key` or no
  /// key. `req` must stay valid until the awaitable completes.
  boost::asio::awaitable<std::tuple<boost::system::error_code, response>> exec(const request& req,
                                                                               std::string_view key,
                                                                               exec_options opts);

  /// Reads the slot map and connects to every primary (cluster mode; a
  /// no-op on one server). client::connect awaits it. Fails with
  /// error::cluster_topology_unavailable when no seed answers with a map;
  /// a primary that cannot be reached is not a failure here (its requests
  /// retry it and read the map again).
  boost::asio::awaitable<boost::system::error_code> connect();

  /// The seed connection: keyless commands, and everything on one server.
  connection& any() noexcept { return *single_; }

  /// The primaries of the current slot map, reading the map first when
  /// there is none (cluster mode); on one server, empty. Fails with
  /// error::client_stopped or error::cluster_topology_unavailable.
  boost::asio::awaitable<std::tuple<boost::system::error_code, std::vector<cluster_node>>>
  primaries();

  /// Sends `req` to the connection of primary `node` (cluster mode), for
  /// commands about that server itself (FUNCTION ...): no key, no
  /// redirects followed. Fails with error::cluster_topology_unavailable
  /// when the client has no connection to `node` (it left the map),
  /// error::client_stopped after stop(). `req` must stay valid until the
  /// awaitable completes.
  boost::asio::awaitable<std::tuple<boost::system::error_code, response>> exec_on(
      const cluster_node& node, const request& req);

  /// Stops the per-primary connections and the periodic refresh.
  void stop();

  /// The counters, and one entry per primary connection (cluster mode).
  cluster_stats stats() const;

  /// The primary the current slot map names for `slot`; none on one
  /// server, before the first map, or while no primary serves it.
  std::optional<cluster_node> node_for_slot(std::uint16_t slot) const;

  /// Names the server a request routed by `key` goes to now (its primary's
  /// `host:port` in cluster mode; empty on one server, or when the map
  /// names none yet): the node part of a function_loads() flight.
  std::string node_key(std::string_view key) const;

  /// The FUNCTION LOADs of this client's calls under way, one per node and
  /// library (detail::load_flights; the FCALL runner, script_exec.cpp).
  /// Shared: a call suspended in a flight keeps it alive, so a coroutine
  /// frame destroyed after the client (at the io_context's end) still
  /// finds it.
  const std::shared_ptr<load_flights<std::shared_ptr<boost::asio::steady_timer>>>&
  function_loads() noexcept {
    return loads_;
  }

  /// The slot map for the subscriber's shard channels (null on one
  /// server). It lives as long as the router's cluster state; hold it weakly.
  std::shared_ptr<slot_source> slots() const noexcept;

  /// Whether the library's scripts may run as Redis functions through this
  /// router (src/scripts/script_functions.hpp): config::use_functions, until
  /// a server refuses them (no FCALL before Redis 7.0, or an ACL user that
  /// may not FCALL or FUNCTION LOAD). Thread-safe.
  bool functions_usable() const noexcept { return functions_.load(std::memory_order_relaxed); }
  /// From now on the library's scripts run with EVALSHA through this router.
  void refuse_functions() noexcept { functions_.store(false, std::memory_order_relaxed); }

 private:
  connection* single_;
  std::shared_ptr<cluster_router> cluster_;
  std::atomic<bool> functions_;
  std::shared_ptr<load_flights<std::shared_ptr<boost::asio::steady_timer>>> loads_ =
      std::make_shared<load_flights<std::shared_ptr<boost::asio::steady_timer>>>();
};

}  // namespace thoonk::detail
