// Replicas and failover without I/O: which configured address the next
// connection attempt goes to, whether a server that answered ROLE may serve
// this client, and which error replies mean "not executed, send again
// later" (READONLY, LOADING, MASTERDOWN) and how long to wait before that.
//
// The connection (connection_impl) asks; the decisions are tested in
// test/unit/failover_test.cpp.
#pragma once

#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/resp3/value.hpp>

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace thoonk::detail {

/// Why a reply says its command was not executed and may be sent again.
enum class unavailable : unsigned char {
  none,        ///< not such a reply
  readonly,    ///< READONLY: the server is a replica now; find the primary
  loading,     ///< LOADING: the server is loading its data set
  masterdown,  ///< MASTERDOWN: a replica without its primary refuses commands
};

class failover {
 public:
  explicit failover(const config& cfg);

  /// The addresses, in the order they are tried (config::endpoints, else
  /// host:port alone).
  const std::vector<config::address>& addresses() const noexcept { return addresses_; }
  /// Where the next attempt goes.
  const config::address& current() const noexcept { return addresses_[current_]; }
  /// `cfg` with host and port set to current(): the config of one attempt.
  config attempt_config(const config& cfg) const;

  /// With several addresses the setup asks ROLE and takes only a primary.
  /// Not in cluster mode: there the addresses are seeds, and a replica
  /// serves a seed's purpose (reading the slot map) as well as a primary.
  bool checks_role() const noexcept { return check_role_; }

  /// An attempt on current() failed (refused, timed out, a replica): the
  /// next attempt goes to the next address, round robin. Returns true when
  /// every address has now failed since the last success (a round): the
  /// caller reports the failure and backs off. False: another address is
  /// left, try it at once.
  bool on_attempt_failed() noexcept;
  /// A connection was set up: a new round begins with the next failure.
  void on_connected() noexcept { failed_in_round_ = 0; }
  /// An established connection was lost: try the same address first (a
  /// short network fault), moving on only if that attempt fails.
  void on_lost() noexcept { failed_in_round_ = 0; }
  /// The server answered READONLY: it is a replica now; a new round starts
  /// at the next address.
  void on_not_primary() noexcept {
    failed_in_round_ = 0;
    current_ = (current_ + 1) % addresses_.size();
  }

  /// Whether a ROLE reply names a primary ("master"). Anything else (a
  /// replica, a sentinel, an error, a malformed reply) is not one.
  static bool is_primary(const resp3::value& role_reply) noexcept;
  /// The role word of a ROLE reply ("master", "slave", "sentinel"), or what
  /// the reply was instead, for messages.
  static std::string role_name(const resp3::value& role_reply);

  /// What one reply says.
  static unavailable classify(const resp3::value& reply) noexcept;
  /// What a request's replies say: the first reply of a request that is
  /// READONLY, LOADING or MASTERDOWN decides (`none` when there is none).
  /// Such a request may be sent again as a whole: the refused command did
  /// not run, and what else ran on that server is a read or a command a
  /// replica or loading server accepts (no write can have happened there).
  static unavailable classify(const response& replies) noexcept;

  /// How many times a request is sent again after such replies.
  unsigned max_retries() const noexcept { return max_retries_; }
  /// The pause before retry number `attempt` (0-based) of a LOADING or
  /// MASTERDOWN request: doubling from reconnect_min_delay, capped at
  /// reconnect_max_delay (READONLY needs none: the reconnect is the pause).
  std::chrono::milliseconds retry_delay(unsigned attempt) const noexcept;

 private:
  std::vector<config::address> addresses_;
  std::size_t current_ = 0;
  std::size_t failed_in_round_ = 0;
  bool check_role_ = false;
  unsigned max_retries_;
  std::chrono::milliseconds min_delay_, max_delay_;
};

}  // namespace thoonk::detail
