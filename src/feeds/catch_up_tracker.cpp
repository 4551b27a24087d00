#include "feeds/catch_up_tracker.hpp"

namespace thoonk::detail {

namespace {

bool is_change(feed_event::kind_t k) { return k == feed_event::publish || k == feed_event::edit; }

}  // namespace

feed_event buffered_event::view(std::string_view feed) const {
  feed_event ev;
  ev.kind = kind;
  ev.feed = feed;
  ev.id = id;
  ev.item = item;
  ev.where = where;
  return ev;
}

void catch_up_tracker::resume_from(std::uint64_t seq) {
  sync_point from;
  from.seq = seq;
  cursor_ = seq;
  ledger_.anchor_at(std::move(from));
  have_cursor_ = true;
}

void catch_up_tracker::stop() {
  stopped_ = true;
  ++round_;
  ++reanchor_gen_;
  reanchoring_ = false;
  clear_buffer();
  flush_.clear();
}

// ---- live events ----

void catch_up_tracker::record_live(feed_event::kind_t kind, std::string_view id,
                                   std::string_view item) {
  if (is_change(kind)) {
    ++cursor_;
    ledger_.delivered_publish(id, item);
  } else if (kind == feed_event::retract) {
    ledger_.delivered_retract(id);
  }
  ++live_events_;
}

catch_up_tracker::live_action catch_up_tracker::on_live(const feed_event& ev) {
  switch (phase_) {
    case phase::live: {
      const bool change = is_change(ev.kind);
      if (ledger_.late_duplicate(ev.id, change ? &ev.item : nullptr))
        return live_action::late_duplicate;
      record_live(ev.kind, ev.id, ev.item);
      if (!reanchoring_ && ledger_.wants_reanchor() && live_events_ >= reanchor_retry_at_) {
        start_reanchor();
        return live_action::deliver_and_reanchor;
      }
      return live_action::deliver;
    }
    case phase::buffering:
      if (overflow_) return live_action::dropped;
      // The fixed part approximates the per-event overhead of the deque
      // entry and its strings.
      buffer_bytes_ += ev.id.size() + ev.item.size() + 64;
      buffer_.push_back(
          buffered_event{ev.kind, std::string(ev.id), std::string(ev.item), ev.where});
      if (buffer_.size() > opts_.buffer_max_events || buffer_bytes_ > opts_.buffer_max_bytes) {
        overflow_ = true;  // the next round replays them from the data
        clear_buffer();
        return live_action::dropped;
      }
      return live_action::buffered;
    default: return live_action::dropped;  // before the sync point: covered by the catch-up read
  }
}

// ---- subscriber connection ----

void catch_up_tracker::on_disconnected() {
  if (stopped_ || phase_ == phase::starting) return;
  abort_reanchor();
  phase_ = phase::gap;
  ++round_;  // abandons a catch-up in progress; what it delivered is in the ledger
  clear_buffer();
}

bool catch_up_tracker::on_connected() const noexcept {
  return !stopped_ && phase_ != phase::starting && phase_ != phase::live;
}

// ---- markers ----

catch_up_tracker::marker_action catch_up_tracker::on_marker(std::string_view payload) {
  if (stopped_) return marker_action::ignored;
  if (reanchoring_ && phase_ == phase::live && !ledger_.split_pending() &&
      payload == reanchor_token_) {
    ledger_.split();
    cursor_at_split_ = cursor_;
    if (reanchor_sync_) {
      finish_reanchor();
      return marker_action::reanchored;
    }
    return marker_action::split;
  }
  if (phase_ != phase::syncing || payload != token_) return marker_action::ignored;
  marker_seen_ = true;
  phase_ = phase::buffering;
  return replay_done_ ? marker_action::finish_round : marker_action::buffering;
}

// ---- rounds ----

void catch_up_tracker::clear_buffer() {
  buffer_.clear();
  buffer_bytes_ = 0;
}

void catch_up_tracker::new_attempt() {
  ++attempt_;
  token_ = tag_ + ":" + std::to_string(round_) + ":" + std::to_string(attempt_);
  phase_ = phase::syncing;
  marker_seen_ = false;
  replay_done_ = false;
  overflow_ = false;
  round_sync_.reset();
  clear_buffer();
}

std::uint64_t catch_up_tracker::start_round() {
  abort_reanchor();
  ++round_;
  new_attempt();
  ledger_.end_replay();
  counter_reset_ = false;
  round_from_cursor_ = cursor_;
  return round_;
}

catch_up_tracker::sync_request catch_up_tracker::next_sync() {
  initial_ = !have_cursor_;
  sync_request r;
  r.from = ledger_.anchor().seq;
  r.marker = token_;
  r.initial = initial_;
  if (!initial_) r.window_from = ledger_.anchor().window_from;
  return r;
}

catch_up_tracker::sync_action catch_up_tracker::on_sync(sync_point sp, bool retractions_complete) {
  const std::uint64_t upper = sp.seq;
  const std::uint64_t from = ledger_.anchor().seq;
  round_sync_ = std::move(sp);
  round_upper_ = upper;
  if (initial_) {
    cursor_ = upper;
    have_cursor_ = true;
    return sync_action::initial;
  }
  if (upper < from || upper < cursor_) {
    // The counter went backwards: the feed was re-created (or the server
    // lost its data). Replay this incarnation from its start; what was
    // delivered of the old one says nothing about the new. (The counted
    // cursor can also run ahead of the counter when other contract
    // clients' messages straddle a sync point; taking that for a reset
    // costs a replay of the whole feed, never a lost change.)
    counter_reset_ = true;
    sync_point start;
    if (opts_.score_window) start.window_from = "-inf";
    ledger_.anchor_at(std::move(start));
    cursor_ = 0;
    new_attempt();
    return sync_action::counter_reset;
  }
  info_ = catch_up_info{};
  info_.counter_reset = counter_reset_;
  info_.from = round_from_cursor_;
  info_.to = upper;
  info_.retractions_complete = retractions_complete;
  return sync_action::replay;
}

bool catch_up_tracker::take_change(std::string_view id, std::string_view item) {
  if (!ledger_.take_change(id, item)) return false;
  ++info_.items;
  return true;
}

bool catch_up_tracker::take_retraction(std::string_view id, std::uint64_t seq) {
  if (!ledger_.take_retraction(id, seq)) return false;
  ++info_.retractions;
  return true;
}

bool catch_up_tracker::take_window_item(std::string_view id, std::string_view score,
                                        std::string_view item) {
  if (!ledger_.take_window_item(id, score, item)) return false;
  ++info_.items;
  return true;
}

bool catch_up_tracker::replay_done() {
  cursor_ = round_upper_;
  replay_done_ = true;
  return marker_seen_;
}

catch_up_tracker::round_end catch_up_tracker::finish_round() {
  if (overflow_) return round_end::restart;  // live events were dropped: fetch them from the data
  phase_ = phase::live;
  if (round_sync_) {
    // Everything delivered so far, replayed or live, is covered by it.
    ledger_.anchor_at(std::move(*round_sync_));
    round_sync_.reset();
  }
  flush_ = std::move(buffer_);
  clear_buffer();
  return initial_ ? round_end::initial : round_end::caught_up;
}

std::optional<buffered_event> catch_up_tracker::next_buffered() {
  while (!flush_.empty()) {
    if (stopped_ || phase_ != phase::live) {
      flush_.clear();
      break;
    }
    buffered_event e = std::move(flush_.front());
    flush_.pop_front();
    const bool change = is_change(e.kind);
    const std::string_view item = e.item;
    if (!ledger_.take_buffered(e.id, change ? &item : nullptr)) {
      record_live(e.kind, e.id, e.item);  // the replay already showed this very item
      continue;
    }
    return e;
  }
  return std::nullopt;
}

void catch_up_tracker::end_flush() {
  flush_.clear();
  ledger_.end_replay();
}

bool catch_up_tracker::fail_round(boost::system::error_code ec) {
  if (!have_cursor_) return false;
  info_ = catch_up_info{};
  info_.from = info_.to = cursor_;
  info_.error = ec;
  phase_ = phase::live;  // nothing to replay; keep delivering whatever comes
  round_sync_.reset();
  clear_buffer();
  ledger_.end_replay();
  return true;
}

// ---- re-anchoring ----

void catch_up_tracker::start_reanchor() {
  reanchoring_ = true;
  reanchor_sync_.reset();
  reanchor_token_ = tag_ + ":a" + std::to_string(++reanchor_gen_);
}

catch_up_tracker::reanchor_request catch_up_tracker::current_reanchor() const {
  return reanchor_request{reanchor_gen_, ledger_.anchor().seq, reanchor_token_};
}

void catch_up_tracker::on_reanchor_read(std::uint64_t generation, std::optional<sync_point> sp) {
  if (stopped_ || generation != reanchor_gen_ || !reanchoring_) return;
  if (!sp) {
    abort_reanchor();
    return;
  }
  reanchor_sync_ = std::move(sp);
  if (ledger_.split_pending()) finish_reanchor();
}

void catch_up_tracker::finish_reanchor() {
  // The publish and edit events delivered after the marker are not in the
  // sync point's counter: keep counting them on top of it.
  const std::uint64_t counted = cursor_ - cursor_at_split_;
  cursor_ = reanchor_sync_->seq + counted;
  ledger_.commit(std::move(*reanchor_sync_));
  reanchor_sync_.reset();
  reanchoring_ = false;
}

void catch_up_tracker::abort_reanchor() {
  if (!reanchoring_) return;
  ++reanchor_gen_;
  if (ledger_.split_pending()) ledger_.unsplit();
  reanchor_sync_.reset();
  reanchoring_ = false;
  // Do not retry on the very next event: a failing server would be asked
  // once per event.
  reanchor_retry_at_ = live_events_ + catch_up_ledger::reanchor_after;
}

}  // namespace thoonk::detail
