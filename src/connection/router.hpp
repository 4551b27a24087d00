// Where the library's commands go. Every feed, queue and job operation
// sends through its client's router and never holds a connection itself.
#pragma once

#include <thoonk/connection.hpp>

#include <string_view>

namespace thoonk::detail {

/// Chooses the connection that serves a command. A command of the library
/// touches keys of one feed only (every script's keys share the feed's
/// name, and with config::cluster_hash_tags its hash slot), so the first
/// key decides.
///
/// Today the client talks to one server and every key is served by its one
/// multiplexed command connection. Redis Cluster plugs in here: a
/// connection per primary, chosen by the key's hash slot, and MOVED / ASK
/// replies handled below the feed and job code, which does not change.
/// Not thread-safe: used on the client's executor, like the connection.
class router {
 public:
  explicit router(connection& single) noexcept : single_(&single) {}

  /// The connection that serves commands on `key`.
  connection& for_key(std::string_view key) noexcept {
    (void)key;  // one server: every slot is here
    return *single_;
  }

  /// A connection for a command that touches no key (or the feeds index
  /// `feeds`, which every node of a single server holds).
  connection& any() noexcept { return *single_; }

 private:
  connection* single_;
};

}  // namespace thoonk::detail
