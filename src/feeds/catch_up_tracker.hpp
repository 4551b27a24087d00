// The decisions of a catch-up feed subscription, without I/O: the phase the
// subscription is in, what to do with each live event in that phase, the
// buffer of live events held back during a replay, the reported cursor, the
// replay rounds and the re-anchors that keep the ledger small.
//
// The subscription's coroutines (subscription.cpp) only read from the
// server and invoke callbacks; every "what now" is asked of this class, so
// the whole state machine can be driven by unit tests with no server:
//
//   starting --start_round--> syncing --marker--> buffering --replay done--> live
//       any --disconnected--> gap --connected--> syncing (a new round)
//
// In `syncing` the catch-up read has been sent but its marker not seen:
// live events before the marker are covered by the read and dropped. In
// `buffering` the marker was seen and the replay is still being delivered:
// live events are kept, then flushed in order once the replay is done,
// minus those the replay already showed (catch_up_ledger::take_buffered).
// The buffer is bounded; on overflow it is dropped and the round repeats,
// fetching the dropped events from the data instead (memory stays bounded,
// nothing is lost).
//
// Rounds and re-anchors are numbered so that a read answering an abandoned
// round or re-anchor is recognised and ignored by its caller.
#pragma once

#include "feeds/catch_up_ledger.hpp"

#include <thoonk/feed_events.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

namespace thoonk::detail {

/// A live event held back during a replay (owns its bytes).
struct buffered_event {
  feed_event::kind_t kind = feed_event::publish;
  std::string id, item;
  feed_position where;

  /// A view for the callback (valid while this object lives).
  feed_event view(std::string_view feed) const;
};

class catch_up_tracker {
 public:
  enum class phase {
    starting,   // subscribe() is registering: events are not ours yet
    gap,        // subscriber disconnected: waiting for `connected`
    syncing,    // catch-up read sent, its marker not seen: live events are covered, drop
    buffering,  // marker seen, replay not finished: keep live events
    live,
  };

  struct options {
    /// Feeds: sync points carry a score window (changes of other contract
    /// clients); a replay after a counter reset scans the whole feed.
    /// Sorted feeds have no scores.
    bool score_window = false;
    /// Bounds of the buffer kept during a replay.
    std::size_t buffer_max_events = 100000;
    std::size_t buffer_max_bytes = 64u << 20;
  };

  catch_up_tracker() = default;
  /// `tag` makes this subscription's marker payloads unique within the
  /// client (all catch-up subscriptions share one marker channel).
  catch_up_tracker(std::string tag, options opts) : tag_(std::move(tag)), opts_(opts) {}
  explicit catch_up_tracker(std::string tag) : tag_(std::move(tag)) {}

  phase current_phase() const noexcept { return phase_; }
  /// What feed_subscription::cursor() reports: the counter value of the
  /// last sync point plus the publish and edit events delivered live since.
  std::uint64_t cursor() const noexcept { return cursor_; }
  bool has_cursor() const noexcept { return have_cursor_; }
  const catch_up_ledger& ledger() const noexcept { return ledger_; }
  /// The report of the current (or last) round, for on_catch_up.
  const catch_up_info& info() const noexcept { return info_; }
  std::size_t buffered() const noexcept { return buffer_.size(); }
  std::size_t buffered_bytes() const noexcept { return buffer_bytes_; }

  /// Starts from a saved cursor instead of "now" (before the first round).
  void resume_from(std::uint64_t seq);

  /// The subscription ends: abandons the round and re-anchor in flight.
  void stop();

  // ---- live events ----

  enum class live_action {
    deliver,               // give it to the callback
    deliver_and_reanchor,  // give it, and run the re-anchor read (current_reanchor())
    late_duplicate,        // the late message of a change a replay showed: skip
    buffered,              // held until the replay is delivered
    dropped,               // covered by the sync read (or the buffer overflowed)
  };
  /// A live message of the feed, in any phase. deliver* record it in the
  /// ledger and the cursor before returning.
  live_action on_live(const feed_event& ev);

  // ---- subscriber connection ----

  /// The subscriber dropped its connection: the round (or re-anchor) in
  /// flight is abandoned; what it delivered stays in the ledger.
  void on_disconnected();
  /// The subscriber (re)connected: true when a new round must start (after
  /// a gap, or when a round's marker may have been published while the
  /// subscriber was away and will never be seen).
  bool on_connected() const noexcept;

  // ---- markers ----

  enum class marker_action {
    ignored,      // not ours, stale, or not expected now
    reanchored,   // a re-anchor's marker, and its sync point had come: committed
    split,        // a re-anchor's marker, sync point still to come
    buffering,    // the round's marker: now keeping live events
    finish_round  // the round's marker after its replay: call finish_round()
  };
  marker_action on_marker(std::string_view payload);

  // ---- rounds ----

  /// Starts a catch-up round (abandoning a re-anchor and any round in
  /// flight); returns its number, for is_round().
  std::uint64_t start_round();
  bool is_round(std::uint64_t r) const noexcept { return !stopped_ && r == round_; }

  /// What the next sync read of the round must ask for.
  struct sync_request {
    std::uint64_t from = 0;                  // replay changes after this counter value
    std::string marker;                      // marker payload to publish with the read
    bool initial = false;                    // the first sync: no replay, only a cursor
    std::optional<std::string> window_from;  // score window start (feeds)
  };
  sync_request next_sync();

  enum class sync_action {
    initial,        // the first sync point: wake subscribe(); then replay_done()
    counter_reset,  // the counter went backwards: read again (next_sync()) from 0
    replay,         // replay the changes the read returned, then replay_done()
  };
  /// The sync read's answer. `retractions_complete` as the script said.
  sync_action on_sync(sync_point sp, bool retractions_complete);

  /// A failed sync read that will be retried: a new attempt, with a new
  /// marker (the old one may still arrive and must be ignored).
  void retry_sync() { new_attempt(); }

  // Replay decisions (each counts what it lets through in info()).
  bool take_change(std::string_view id, std::string_view item);
  bool take_retraction(std::string_view id, std::uint64_t seq);
  bool take_window_item(std::string_view id, std::string_view score, std::string_view item);

  /// The replay has been delivered: true when the marker was seen too, and
  /// finish_round() is due (otherwise on_marker will say so).
  bool replay_done();

  enum class round_end {
    restart,    // the buffer overflowed: start_round() again
    initial,    // the first sync: live now, nothing to report
    caught_up,  // live now: report info() to on_catch_up, then flush
  };
  /// Both the marker and the replay are in: adopt the round's sync point.
  /// Then the caller drains next_buffered() and calls end_flush().
  round_end finish_round();
  /// The next buffered event to pass through on_live() (in order), or none
  /// when the buffer is drained or the subscription left `live`. Events the
  /// replay already showed are recorded and skipped here.
  std::optional<buffered_event> next_buffered();
  /// Ends the flush: forgets what the replay delivered.
  void end_flush();

  /// The round cannot run (feed deleted, wrong type, client stopped).
  /// Before the first sync point: false (subscribe() fails). Later: true,
  /// the subscription goes live with nothing replayed and info() carries
  /// `ec` for on_catch_up.
  bool fail_round(boost::system::error_code ec);

  // ---- re-anchoring while live ----

  struct reanchor_request {
    std::uint64_t generation = 0;  // for on_reanchor_read
    std::uint64_t from = 0;
    std::string marker;
  };
  /// The read to run after deliver_and_reanchor.
  reanchor_request current_reanchor() const;
  /// The re-anchor read answered (`sp` unset: it failed). Stale answers
  /// (abandoned re-anchors) are ignored.
  void on_reanchor_read(std::uint64_t generation, std::optional<sync_point> sp);
  bool reanchoring() const noexcept { return reanchoring_; }

 private:
  void record_live(feed_event::kind_t kind, std::string_view id, std::string_view item);
  void new_attempt();
  void clear_buffer();
  void start_reanchor();
  void finish_reanchor();
  void abort_reanchor();

  std::string tag_;
  options opts_;
  phase phase_ = phase::starting;
  bool stopped_ = false;

  bool have_cursor_ = false;
  std::uint64_t cursor_ = 0;
  catch_up_ledger ledger_;

  // The current round.
  std::uint64_t round_ = 0, attempt_ = 0;
  std::string token_;  // marker payload of the current attempt
  bool marker_seen_ = false, replay_done_ = false, overflow_ = false;
  bool initial_ = false, counter_reset_ = false;
  std::uint64_t round_from_cursor_ = 0, round_upper_ = 0;
  std::optional<sync_point> round_sync_;
  std::deque<buffered_event> buffer_;
  std::size_t buffer_bytes_ = 0;
  std::deque<buffered_event> flush_;  // the buffer being delivered after a round
  catch_up_info info_;

  // Re-anchoring.
  std::uint64_t reanchor_gen_ = 0;
  bool reanchoring_ = false;
  std::string reanchor_token_;
  std::optional<sync_point> reanchor_sync_;  // when it came before the marker
  std::uint64_t cursor_at_split_ = 0;
  std::uint64_t live_events_ = 0, reanchor_retry_at_ = 0;
};

}  // namespace thoonk::detail
