// Redis Cluster without I/O: the hash slot of a key, the slot map read from
// CLUSTER SHARDS or CLUSTER SLOTS, and what an error reply that redirects
// (MOVED, ASK) or defers (TRYAGAIN, CLUSTERDOWN) a command asks the client
// to do. The router (router.hpp) asks; test/unit/cluster_test.cpp tests.
#pragma once

#include <thoonk/cluster.hpp>
#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/request.hpp>
#include <thoonk/resp3/value.hpp>

#include <boost/system/error_code.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::detail {

/// Number of hash slots of a Redis Cluster.
inline constexpr std::size_t cluster_slots = 16384;

/// CRC16-XMODEM (polynomial 0x1021, initial 0), the checksum Redis Cluster
/// hashes keys with.
std::uint16_t crc16(std::string_view data) noexcept;

/// The hash slot of a key (include/thoonk/cluster.hpp): the public
/// function, under its name here too.
using thoonk::hash_slot;

/// One server of a cluster, as a `host:port` address.
struct cluster_node {
  std::string host;
  std::uint16_t port = 0;
  friend bool operator==(const cluster_node&, const cluster_node&) = default;
};
std::string to_string(const cluster_node& n);

/// The config of a direct connection to `node`: `base` (credentials, TLS,
/// timeouts, protocol) with the node's address in place of the seeds, and
/// cluster mode off (the connection talks to that node only).
config node_config(config base, const cluster_node& node);

/// Which primary serves each slot: the map a client routes by.
class slot_map {
 public:
  /// No slot has a primary.
  slot_map();

  /// Reads a CLUSTER SHARDS reply (RESP3 maps or RESP2 flat arrays): for
  /// each shard, its slot ranges and the node whose role is "master" (its
  /// `endpoint`, else its `ip`; a shard whose primary is marked failed
  /// still counts: the cluster moves its slots when it fails over). Shards
  /// without a primary or slots are skipped. `seed` replaces an endpoint
  /// the server does not know ("?" or empty). Sets ec =
  /// error::unexpected_type on a reply of another shape (an error reply
  /// included: CLUSTER SHARDS unknown before Redis 7.0).
  static slot_map from_shards(const resp3::value& reply, const cluster_node& seed,
                              boost::system::error_code& ec);
  /// Reads a CLUSTER SLOTS reply: [start, end, [host, port, id, ...],
  /// replicas...] per range. Same rules as from_shards.
  static slot_map from_slots(const resp3::value& reply, const cluster_node& seed,
                             boost::system::error_code& ec);

  /// The primaries named by the map, each once, in first-seen order.
  const std::vector<cluster_node>& primaries() const noexcept { return nodes_; }
  /// The primary serving `slot`, or none while no primary serves it.
  const cluster_node* primary_for(std::uint16_t slot) const noexcept;
  /// Every slot has a primary.
  bool covers_all() const noexcept;
  /// How many slots have a primary.
  std::size_t covered() const noexcept;

  /// A MOVED reply said that `node` serves `slot` now: the map says so at
  /// once, until the next refresh replaces the whole map.
  void assign(std::uint16_t slot, const cluster_node& node);
  /// Assigns every slot of [first, last] to `node`.
  void assign_range(std::uint16_t first, std::uint16_t last, const cluster_node& node);

  /// Whether both maps send every slot to the same primary (or neither
  /// serves it), whatever order they list their primaries in.
  bool same_routes(const slot_map& other) const noexcept;

 private:
  std::size_t index_of(const cluster_node& node);
  static constexpr std::uint16_t none = 0xFFFF;
  std::vector<cluster_node> nodes_;
  std::array<std::uint16_t, cluster_slots> owner_;
};

/// What an error reply says about where its command must go.
struct redirect {
  enum kind_t : unsigned char {
    none,         ///< not a cluster redirect: the reply is the command's
    moved,        ///< MOVED <slot> <host:port>: the slot lives there now
    ask,          ///< ASK <slot> <host:port>: this once, ASKING there
    tryagain,     ///< TRYAGAIN: the slot is being migrated; send again later
    clusterdown,  ///< CLUSTERDOWN: the cluster (or this slot) is not served
  } kind = none;
  std::uint16_t slot = 0;
  cluster_node target;  ///< moved and ask
};

/// Parses an error reply; `none` for anything else (a success, another
/// error, a MOVED or ASK whose slot or address does not parse). An address
/// without a host (`:6380`, Redis's "unknown endpoint") keeps an empty
/// host: the caller puts in the host of the node that answered.
redirect parse_redirect(const resp3::value& reply);

/// Keeps one slot's requests in their order across a change of the slot's
/// route (a MOVED, a refresh that moves it, a node that is down).
///
/// Requests in flight when the route changes, and requests that must be
/// sent again (redirected, deferred, not written), *drain*: while any
/// drains, a new request of the slot waits (the router queues it) instead
/// of overtaking them on the new route. A request that drains passes.
class slot_order {
 public:
  /// One request's place.
  struct ticket {
    std::uint64_t epoch = 0;
    bool sent = false;      ///< counted in flight on the route of `epoch`
    bool draining = false;  ///< counted among the draining
  };

  /// A new request may be sent: nothing of this slot drains.
  bool open() const noexcept { return draining_ == 0; }
  /// The request is written on the current route.
  void on_send(ticket& t) noexcept;
  /// Its replies came (or its connection failed): it is no longer in flight.
  void on_answer(ticket& t) noexcept;
  /// It will be sent again (MOVED, ASK, TRYAGAIN, CLUSTERDOWN, not
  /// written): it drains, so newer requests wait for it.
  void hold(ticket& t) noexcept;
  /// It completed for good. True when this opened the slot: wake the
  /// requests that wait, in order.
  bool release(ticket& t) noexcept;
  /// The slot's route changed: every request in flight on the old route
  /// drains.
  void on_route_change() noexcept;

  std::size_t in_flight() const noexcept { return inflight_; }
  std::size_t draining() const noexcept { return draining_; }

 private:
  std::uint64_t epoch_ = 0;
  std::size_t inflight_ = 0, draining_ = 0;
};

/// The requests of one slot that wait for it to open, in arrival order,
/// beside the slot's slot_order (the router keeps one per slot with
/// traffic; `Waiter` is what it wakes, a timer there, a number in the
/// unit tests).
///
/// A new request waits while the slot drains, while older ones wait, and
/// while older ones were woken and have not resumed yet (they go first).
/// wake_all() wakes every waiter; each one reports resumed() when it runs.
/// After every resume the router asks should_wake(): requests that came
/// while the woken ones had not resumed, or behind one that left
/// (cancelled), would otherwise wait for a release that may never come.
template <class Waiter>
class slot_waiters {
 public:
  /// A request arriving now must wait (push() it, then wait to be woken).
  bool must_wait(const slot_order& o) const noexcept {
    return !o.open() || !waiting_.empty() || woken_ > 0;
  }
  void push(Waiter w) { waiting_.push_back(std::move(w)); }
  /// Takes every waiter, in order, to be woken; they count as woken until
  /// each reports resumed().
  std::deque<Waiter> take_all() {
    auto out = std::move(waiting_);
    waiting_.clear();
    woken_ += out.size();
    return out;
  }
  /// `w` runs again. True when it had been woken (it may go); false when
  /// it had not (its wait was cancelled): it leaves the queue.
  bool resumed(const Waiter& w) {
    auto it = std::find(waiting_.begin(), waiting_.end(), w);
    if (it == waiting_.end()) {
      --woken_;
      return true;
    }
    waiting_.erase(it);
    return false;
  }
  /// Whether the waiters must be woken now: the slot is open, no woken
  /// request is still ahead of them, and someone waits.
  bool should_wake(const slot_order& o) const noexcept {
    return o.open() && woken_ == 0 && !waiting_.empty();
  }
  std::size_t waiting() const noexcept { return waiting_.size(); }
  std::size_t woken() const noexcept { return woken_; }

 private:
  std::deque<Waiter> waiting_;
  std::size_t woken_ = 0;
};

/// `req` with ASKING before each of its commands: the flag ASKING sets
/// lasts for one command only, and a request may hold several (SCRIPT LOAD
/// and EVALSHA). Replies come as [OK, r1, OK, r2, ...]; drop_asking_replies
/// takes the OKs out.
request asking_request(const request& req);
void drop_asking_replies(response& replies);

/// What the router does with a request's replies.
struct redirect_action {
  enum kind_t : unsigned char {
    done,         ///< hand the replies to the caller
    resend,       ///< MOVED: update the map, send again to target, refresh the map
    ask,          ///< ASK: send ASKING + the request to target, map unchanged
    retry_later,  ///< TRYAGAIN / CLUSTERDOWN: wait `delay`, send again
    give_up,      ///< too many redirects: the caller gets error::cluster_redirect_limit
  } kind = done;
  cluster_node target;
  std::uint16_t slot = 0;
  std::chrono::milliseconds delay{0};
  /// The reply that decided (none for done): tells TRYAGAIN from
  /// CLUSTERDOWN, for the counters.
  redirect::kind_t cause = redirect::none;
};

/// The redirect decisions of one request, sent again and again while the
/// cluster answers with redirects.
///
/// One request's commands all touch one slot (the library's rule: a
/// request touches one feed's keys, and in cluster mode they share the
/// feed's hash tag), so the first redirecting reply decides for the whole
/// request. A MOVED or CLUSTERDOWN applies to the slot, so every keyed
/// command of the request got it; keyless commands the library puts beside
/// them (SCRIPT LOAD) may run twice, harmlessly.
class redirect_policy {
 public:
  /// At most `max_redirects` MOVED/ASK hops and `max_retries` TRYAGAIN /
  /// CLUSTERDOWN pauses, the pauses doubling from `min_delay` to `max_delay`.
  redirect_policy(unsigned max_redirects, unsigned max_retries, std::chrono::milliseconds min_delay,
                  std::chrono::milliseconds max_delay) noexcept;
  explicit redirect_policy(const config& cfg) noexcept;

  /// The decision on the replies of the latest attempt. `answered_by` is
  /// the node that sent them (fills in a redirect's empty host).
  redirect_action decide(const response& replies, const cluster_node& answered_by);

  unsigned redirects() const noexcept { return redirects_; }
  unsigned retries() const noexcept { return retries_; }

 private:
  unsigned max_redirects_, max_retries_;
  std::chrono::milliseconds min_delay_, max_delay_;
  unsigned redirects_ = 0, retries_ = 0;
};

/// The end of a routed request's time: config::request_timeout (or the
/// request's own exec_options::timeout) counted once from the call, over
/// every attempt, pause and wait for a slot map, not per attempt.
class request_deadline {
 public:
  using clock = std::chrono::steady_clock;

  /// `limit` 0 or less: no deadline.
  request_deadline(clock::time_point now, std::chrono::milliseconds limit) noexcept
      : at_(limit.count() > 0 ? now + limit : clock::time_point::max()) {}

  bool bounded() const noexcept { return at_ != clock::time_point::max(); }
  clock::time_point at() const noexcept { return at_; }
  bool passed(clock::time_point now) const noexcept { return bounded() && now >= at_; }
  /// What is left of it, for the timeout of one attempt (at least 1 ms
  /// while it has not passed: 0 means "no timeout" to a connection); 0
  /// when unbounded.
  std::chrono::milliseconds left(clock::time_point now) const noexcept;
  /// `t`, or the deadline when that comes first.
  clock::time_point cap(clock::time_point t) const noexcept { return t < at_ ? t : at_; }

 private:
  clock::time_point at_;
};

/// What a request that cannot be sent now waits for in the slot map, besides
/// its pause running out (no I/O; the router wakes it at every new map).
class route_wait {
 public:
  /// The node serving the request's slot did not take it (not connected),
  /// or no primary serves the slot (`failed` none): done once the map sends
  /// the slot to another primary (a failover's promoted replica).
  static route_wait away_from(std::uint16_t slot, std::optional<cluster_node> failed) {
    route_wait w;
    w.slot_ = slot;
    w.failed_ = std::move(failed);
    return w;
  }
  /// CLUSTERDOWN: the cluster has no route for some slot. Done once any
  /// route changes (`version` is the router's map version at the reply):
  /// the failover that left a slot without a primary has ended.
  static route_wait map_change(std::uint64_t version) {
    route_wait w;
    w.any_change_ = true;
    w.version_ = version;
    return w;
  }

  /// Whether the wait is over, given the current map (null before the
  /// first) and its version.
  bool satisfied(const slot_map* m, std::uint64_t version) const noexcept;

 private:
  route_wait() = default;
  bool any_change_ = false;
  std::uint64_t version_ = 0;
  std::uint16_t slot_ = 0;
  std::optional<cluster_node> failed_;
};

/// How often the router reads the slot map while a request waits for it to
/// change (route_wait): reconnect_min_delay, at least 10 ms, at most 100 ms.
std::chrono::milliseconds map_poll_interval(const config& cfg) noexcept;

}  // namespace thoonk::detail
