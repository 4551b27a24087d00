// Sharded pub/sub without I/O: which node each shard channel is
// SSUBSCRIBEd on, what a MOVED, a server-side unsubscribe, a lost
// connection or a new slot map changes, and when the subscriber's shard
// channels are all subscribed again. The subscriber (subscriber_impl.cpp)
// asks and does the I/O; test/unit/shard_placement_test.cpp tests.
#pragma once

#include "connection/cluster.hpp"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace thoonk::detail {

/// Where the shard channels of one subscriber live.
///
/// A shard channel is SSUBSCRIBEd on the primary that serves its hash slot
/// (the slot map's answer, else the node a MOVED named, else the
/// subscriber's default node: the one its config names, which answers
/// MOVED when wrong). Each channel is in one of these states:
///
///  * pending: its SSUBSCRIBE is on its way to its node (or waits in that
///    node's connection for a reconnect, whose setup sends it again);
///  * subscribed: the node confirmed it;
///  * unplaced: neither: it must be sent again (after a refusal that asks
///    to retry, a server-side unsubscribe, or a failed connection).
///
/// A channel that was subscribed and is not any more is *lost* until it is
/// confirmed again: messages published meanwhile were missed, and the
/// subscriber reports a gap (subscriber_event::disconnected) while any
/// channel is lost, then `connected` when none is.
class shard_placement {
 public:
  /// The slot map: the primary serving a slot, or none when unknown.
  using lookup = std::function<std::optional<cluster_node>(std::uint16_t slot)>;

  /// An SSUBSCRIBE to send: `channel` on `to`; when `unsubscribe_from` is
  /// set, the channel was subscribed there and should be SUNSUBSCRIBEd
  /// (the slot moved while the old node still holds it).
  struct send {
    std::string channel;
    cluster_node to;
    std::optional<cluster_node> unsubscribe_from;
  };

  /// `default_node`: where a channel goes when the map knows nothing (the
  /// subscriber's own server; an empty host names it).
  explicit shard_placement(cluster_node default_node = {}) : default_(std::move(default_node)) {}

  /// A new channel: where to send its SSUBSCRIBE (it is pending there).
  cluster_node add(const std::string& channel, const lookup& map);
  /// The channel is dropped: the node to SUNSUBSCRIBE it on, if it was
  /// subscribed or pending somewhere.
  std::optional<cluster_node> remove(const std::string& channel);
  bool contains(const std::string& channel) const { return channels_.count(channel) != 0; }

  /// `node` confirmed the SSUBSCRIBE of `channel`. False when it is not
  /// ours (dropped, or placed elsewhere since): then it should be
  /// SUNSUBSCRIBEd there.
  bool on_confirmed(const std::string& channel, const cluster_node& node);
  /// `node` answered MOVED for `channel`: it is sent to `target` now
  /// (returned; none when the channel is not ours or `node` is not where
  /// it was sent).
  std::optional<cluster_node> on_moved(const std::string& channel, const cluster_node& node,
                                       const cluster_node& target);
  /// `node` refused `channel` with ASK, TRYAGAIN or CLUSTERDOWN: it is
  /// unplaced and goes again after a pause (plan()).
  void on_retry(const std::string& channel, const cluster_node& node);
  /// `node` unsubscribed `channel` without being asked (`sunsubscribe`
  /// push: its slot left the node). True when that made it lost.
  bool on_server_unsubscribed(const std::string& channel, const cluster_node& node);
  /// The connection to `node` was lost: its channels are pending again
  /// (that connection's setup sends them again when it reconnects) and
  /// lost when they were subscribed. True when any became lost.
  bool on_node_lost(const cluster_node& node);
  /// The channels to SSUBSCRIBE in the setup of a (re)connection to `node`
  /// (all of its channels, now pending).
  std::vector<std::string> on_node_setup(const cluster_node& node);

  /// After a pause or a new map: the SSUBSCRIBEs to send. A channel whose
  /// slot the map gives another node moves there (lost if it was
  /// subscribed); an unplaced channel is sent to the node the map names
  /// (or where it was). A channel pending on a node whose connection is
  /// down (on_node_lost) waits for that connection unless the map moved
  /// its slot.
  std::vector<send> plan(const lookup& map);

  /// Some channel was subscribed and is not now.
  bool any_lost() const noexcept;
  /// Some channel is lost, or neither subscribed nor pending, or waits for
  /// a connection that is down: the subscriber should read the map again
  /// and plan() after a pause (a failover moves the slots of a dead node).
  bool needs_work() const noexcept;
  /// Nodes that hold at least one channel (their connections stay).
  std::vector<cluster_node> nodes() const;
  /// The node a channel is placed on.
  std::optional<cluster_node> node_of(const std::string& channel) const;
  std::size_t size() const noexcept { return channels_.size(); }

 private:
  enum class state : unsigned char { pending, subscribed, unplaced };
  struct entry {
    std::uint16_t slot = 0;
    cluster_node node;
    state st = state::unplaced;
    bool lost = false;
    bool node_down = false;  // pending in a connection that is down
  };
  cluster_node target_for(const entry& e, const lookup& map) const;

  cluster_node default_;
  std::map<std::string, entry> channels_;
};

}  // namespace thoonk::detail
