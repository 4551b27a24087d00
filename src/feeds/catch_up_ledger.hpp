// The bookkeeping of a catch-up feed subscription, without I/O: what the
// application has been given since the last sync point, and from that,
// which replayed changes and which buffered live events to deliver.
//
// Why a ledger and not a counter. The contract's feed publish increments
// `feed.publishes` inside MULTI/EXEC and PUBLISHes afterwards, outside it.
// A subscription that derived its position by counting publish messages
// counted such a publish twice when its INCR landed before a sync read and
// its message after the sync marker, and then skipped a change after the
// next gap. So the only position the ledger trusts is the counter value read
// atomically with a sync marker (the *anchor*); everything delivered live
// after that marker is remembered per id (present with an item fingerprint,
// or absent), and a replay after a gap delivers exactly the changes after
// the anchor that the application does not already hold. Contract messages
// arriving on either side of a marker then do no harm: they are never
// counted, only remembered.
//
// Memory stays bounded because the subscription re-anchors (one cheap sync
// call) after every `reanchor_after` live events, which clears the ledger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>

namespace thoonk::detail {

/// A sync point: what the catch-up script read atomically with its marker.
struct sync_point {
  /// `feed.publishes` at the sync: changes after it are replayed.
  std::uint64_t seq = 0;
  /// Feeds: replay items scored at or above this (the newest score at the
  /// sync, "-inf" for an empty feed) that no library change accounts for:
  /// the changes of other contract clients. Unset: no such replay (sorted
  /// feeds, and a subscription resumed from a saved cursor).
  std::optional<std::string> window_from;
  /// Ids scored exactly `window_from` at the sync: not changes after it.
  std::unordered_set<std::string> window_excluded;
  /// Ids whose retraction was logged at exactly `seq` before the sync: a
  /// replay must not report them again.
  std::unordered_set<std::string> retracted_at_seq;
};

class catch_up_ledger {
 public:
  /// Live events after this many since the last anchor ask for a re-anchor.
  static constexpr std::size_t reanchor_after = 1024;

  const sync_point& anchor() const noexcept { return anchor_; }

  /// Starts over from `sp`: everything delivered so far is covered by it.
  void anchor_at(sync_point sp);

  // ---- live events (delivered to the application) ----
  void delivered_publish(std::string_view id, std::string_view item);
  void delivered_retract(std::string_view id);
  /// True once reanchor_after live events were recorded since the anchor.
  bool wants_reanchor() const noexcept { return since_anchor_ >= reanchor_after; }

  // ---- a re-anchor while live: the marker and the reply arrive on
  // ---- different connections, in either order
  /// The re-anchor's marker arrived: what was delivered before it is covered
  /// by the coming sync point; later deliveries go into a fresh ledger.
  void split();
  /// The re-anchor's sync point arrived after its marker: adopt it.
  void commit(sync_point sp);
  /// The re-anchor failed (or the connection dropped) after split(): keep
  /// the old anchor and everything delivered since it.
  void unsplit();
  bool split_pending() const noexcept { return split_; }

  // ---- replay after a gap (each call records what it lets through) ----
  /// A retraction logged at `seq` (>= anchor().seq): deliver it unless the
  /// application already knows the id is gone.
  bool take_retraction(std::string_view id, std::uint64_t seq);
  /// A library change after the anchor with the item's current content:
  /// deliver it unless the application holds exactly that item.
  bool take_change(std::string_view id, std::string_view item);
  /// An item in the score window (changed by another client): as
  /// take_change, and never an id of window_excluded at the window's start.
  bool take_window_item(std::string_view id, std::string_view score, std::string_view item);

  /// A live event buffered during a replay, about to be delivered (`item`
  /// null for a retraction or a move): false when it is a publish or edit
  /// of exactly the item the replay delivered for this id (the replay read
  /// the item after the change that sent this message). Only the first
  /// buffered event of an id is compared.
  bool take_buffered(std::string_view id, const std::string_view* item);
  /// Ends a replay: forget what it delivered (buffered events are flushed).
  void end_replay() { replayed_.clear(); }

  /// A live event after a replay (`item` null for a retraction or a move):
  /// true when it is the late message of a change the replay already showed
  /// from the score window. Another contract client's publish sends its
  /// message after its EXEC, so a replay that read the change can come
  /// before the message; the message is then not a new change. Only the
  /// first live event of such an id is compared; the expectations last
  /// until the next re-anchor.
  bool late_duplicate(std::string_view id, const std::string_view* item);

  std::size_t size() const noexcept { return log_.size() + before_split_.size(); }

 private:
  struct held {
    bool present = false;
    std::size_t fingerprint = 0;  // hash of the item when present
  };
  using map = std::unordered_map<std::string, held>;

  static std::size_t fingerprint(std::string_view item);
  const held* find(std::string_view id) const;
  void put(std::string_view id, held h);

  sync_point anchor_;
  map log_;           // delivered since the anchor (or since split())
  map before_split_;  // delivered between the anchor and a split()
  map replayed_;      // delivered by the current replay
  map window_shown_;  // shown from the score window, message maybe still to come
  bool split_ = false;
  std::size_t since_anchor_ = 0;
};

}  // namespace thoonk::detail
