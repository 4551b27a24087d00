#include "jobs/runner_book.hpp"

#include <algorithm>

namespace thoonk::detail::jobs {

runner_book::runner_book(settings s) : s_(s) {
  s_.concurrency = std::max<std::size_t>(1, s_.concurrency);
  s_.max_claim_batch = std::max<std::size_t>(1, s_.max_claim_batch);
  s_.max_rounds_in_flight = std::max<std::size_t>(1, s_.max_rounds_in_flight);
  s_.max_finishes_per_round = std::max<std::size_t>(1, s_.max_finishes_per_round);
}

void runner_book::handler_ended(std::optional<finish> done) {
  if (busy_ > 0) --busy_;
  if (done) pending_.push_back(std::move(*done));
}

void runner_book::round_done(std::size_t asked, std::size_t got, std::optional<time_point> retry_at,
                             time_point now) {
  if (in_flight_ > 0) --in_flight_;
  requested_ -= std::min(requested_, asked);
  busy_ += got;
  if (got < asked) {
    // Dry (or held back by pause or the rate limit): ask again at the time
    // the queue named, else at a wake-up, else after the poll interval.
    // A wake-up that came while this round was in flight may predate the
    // jobs it announced being claimable... or not: it counts, and costs at
    // most one more empty round.
    dry_ = true;
    retry_at_ = retry_at ? *retry_at : now + s_.poll_interval;
  } else if (asked > 0) {
    dry_ = false;
  }
}

void runner_book::round_failed(round r, time_point now) {
  if (in_flight_ > 0) --in_flight_;
  requested_ -= std::min(requested_, r.claim);
  // Back to the front, in their order: they are the oldest outcomes.
  pending_.insert(pending_.begin(), std::make_move_iterator(r.finishes.begin()),
                  std::make_move_iterator(r.finishes.end()));
  dry_ = true;
  retry_at_ = now + s_.retry_delay;
  hold_until_ = now + s_.retry_delay;
  holding_ = true;
}

void runner_book::stop(time_point now) {
  if (stopping_) return;
  stopping_ = true;
  deadline_ = now + s_.stop_timeout;
}

std::optional<runner_book::round> runner_book::next_round(time_point now) {
  if (in_flight_ >= s_.max_rounds_in_flight) return std::nullopt;
  if (holding_) {
    if (now < hold_until_) return std::nullopt;
    holding_ = false;
  }
  round r;
  const std::size_t n = std::min(pending_.size(), s_.max_finishes_per_round);
  std::size_t free = 0;
  if (!stopping_ && registered_) {
    const std::size_t taken = busy_ + requested_;
    free = taken < s_.concurrency ? s_.concurrency - taken : 0;
  }
  // A dry queue is asked again only at a wake-up or its retry time, unless
  // finishes go out anyway (then asking costs nothing more).
  const bool may_ask = !dry_ || woken_ || now >= retry_at_ || n > 0;
  if (free > 0 && may_ask) r.claim = std::min(free, s_.max_claim_batch);
  if (n == 0 && r.claim == 0) return std::nullopt;
  r.finishes.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    r.finishes.push_back(std::move(pending_.front()));
    pending_.pop_front();
  }
  if (r.claim > 0) woken_ = false;
  ++in_flight_;
  requested_ += r.claim;
  return r;
}

runner_book::time_point runner_book::next_timer() const noexcept {
  time_point t = time_point::max();
  if (dry_ && !stopping_ && registered_) t = std::min(t, retry_at_);
  if (stopping_) t = std::min(t, deadline_);
  if (holding_) t = std::min(t, hold_until_);
  return t;
}

bool runner_book::ready_to_leave(time_point now) const noexcept {
  if (!stopping_ || in_flight_ > 0 || !pending_.empty()) return false;
  return busy_ == 0 || now >= deadline_;
}

}  // namespace thoonk::detail::jobs
