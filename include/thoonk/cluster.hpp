// Redis Cluster: hash slots and what a client's router does on a cluster
// (docs/cluster.md). client::cluster_stats() and client::node_for_slot()
// return these.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <thoonk/export.hpp>
#include <vector>

namespace thoonk {

/// The number of hash slots of a Redis Cluster.
inline constexpr std::uint16_t cluster_hash_slots = 16384;

/// The hash slot of `key`, as Redis Cluster computes it: CRC16-XMODEM of
/// the key modulo 16384, or of its hash tag when it has one (the bytes
/// between the first '{' and the first '}' after it, when at least one
/// byte lies between), so `{user1000}.following` and `{user1000}.followers`
/// share a slot. In cluster mode the library's keys of feed `orders` are
/// tagged `{orders}`: hash_slot("orders") is their slot. No I/O;
/// thread-safe.
THOONK_API std::uint16_t hash_slot(std::string_view key) noexcept;

/// One primary connection of a client's router (cluster mode).
struct THOONK_API cluster_node_stats {
  std::string host;                    ///< the node's address as the cluster announces it
  std::uint16_t port = 0;              ///< its port
  bool connected = false;              ///< set up now
  std::uint64_t connects = 0;          ///< successful connects, the first one included
  std::uint64_t reconnects = 0;        ///< successful connects after a lost connection
  std::uint64_t requests = 0;          ///< requests accepted
  std::uint64_t unknown_outcomes = 0;  ///< requests cut off after they were written
};

/// What a client's router has done on a cluster since the client was made
/// (client::cluster_stats). All zero on one server.
struct THOONK_API cluster_stats {
  std::uint64_t moved = 0;        ///< MOVED replies followed (the map updated, the request sent on)
  std::uint64_t asked = 0;        ///< ASK replies followed (ASKING sent)
  std::uint64_t tryagain = 0;     ///< TRYAGAIN replies: paused and sent again
  std::uint64_t clusterdown = 0;  ///< CLUSTERDOWN replies: paused and sent again
  /// Requests sent again, after a wait, because their node was not
  /// connected (they were never written).
  std::uint64_t resent_unwritten = 0;
  std::uint64_t refreshes = 0;         ///< slot maps read and installed
  std::uint64_t refresh_failures = 0;  ///< map reads no node answered
  std::uint64_t primaries = 0;         ///< primaries in the current map
  /// Successful connects and reconnects of the per-primary connections,
  /// those closed since (a primary that left the map) included.
  std::uint64_t node_connects = 0;
  std::uint64_t node_reconnects = 0;  ///< node connections made again after one was lost
  /// One entry per primary connection the router holds now.
  std::vector<cluster_node_stats> nodes;
};

}  // namespace thoonk
