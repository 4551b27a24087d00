#include "jobs/runner_book.hpp"

#include "jobs/time_limits.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

namespace thoonk::detail::jobs {

runner_book::runner_book(settings s) : s_(s) {
  s_.concurrency = std::max<std::size_t>(1, s_.concurrency);
  s_.max_claim_batch = std::max<std::size_t>(1, s_.max_claim_batch);
  s_.max_rounds_in_flight = std::max<std::size_t>(1, s_.max_rounds_in_flight);
  s_.max_finishes_per_round = std::max<std::size_t>(1, s_.max_finishes_per_round);
}

namespace {

double nanos(runner_book::clock::duration d) {
  return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(d).count());
}

void average_in(double& avg, double x) { avg = avg < 0 ? x : avg + (x - avg) / 8; }

}  // namespace

void runner_book::handler_ended(std::optional<finish> done, clock::duration ran) {
  if (busy_ > 0) --busy_;
  if (done) pending_.push_back(std::move(*done));
  handler_last_ = nanos(ran);
  average_in(handler_avg_, handler_last_);
}

bool runner_book::prefetching() const noexcept {
  return s_.prefetch > 0 && handler_avg_ >= 0 && round_avg_ >= 0 && handler_avg_ < round_avg_ &&
         handler_last_ < round_avg_;
}

std::size_t runner_book::ahead() const noexcept {
  if (!prefetching()) return 0;
  // What the slots get through in one round trip, at the handlers' pace:
  // claimed ahead, it keeps them busy until the next round comes back, and
  // none waits much longer than that round trip. Handlers are taken to run
  // a microsecond at least.
  const double per_slot = round_avg_ / std::max(handler_avg_, 1000.0);
  const double want = std::ceil(per_slot * static_cast<double>(s_.concurrency));
  return want >= static_cast<double>(s_.prefetch) ? s_.prefetch : static_cast<std::size_t>(want);
}

bool runner_book::take_ready() noexcept {
  if (ready_ == 0 || busy_ >= s_.concurrency || stopping_) return false;
  --ready_;
  ++busy_;
  return true;
}

void runner_book::ready_dropped(std::size_t n) noexcept { ready_ -= std::min(ready_, n); }

void runner_book::ready_waited_too_long(std::size_t n) noexcept {
  ready_dropped(n);
  handler_last_ = std::numeric_limits<double>::infinity();
}

std::size_t runner_book::round_done(std::size_t asked, std::size_t got,
                                    std::optional<time_point> retry_at, time_point now,
                                    clock::duration round_trip) {
  if (in_flight_ > 0) --in_flight_;
  requested_ -= std::min(requested_, asked);
  if (asked > 0) average_in(round_avg_, nanos(round_trip));
  // Jobs a round brings during a stop run like the others (their claims are
  // made): only jobs beyond the slots wait.
  const std::size_t idle = busy_ < s_.concurrency ? s_.concurrency - busy_ : 0;
  const std::size_t now_started = std::min(got, idle);
  busy_ += now_started;
  ready_ += got - now_started;
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
  return now_started;
}

std::size_t runner_book::handed_off(std::size_t n) noexcept {
  const std::size_t idle = !stopping_ && busy_ < s_.concurrency ? s_.concurrency - busy_ : 0;
  const std::size_t now_started = std::min(n, idle);
  busy_ += now_started;
  ready_ += n - now_started;
  return now_started;
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
  if (check_wanted_ && !checking_) {
    check_wanted_ = false;
    rounds_held_ = false;
  }
  if (stopping_) return;
  stopping_ = true;
  deadline_ = now + s_.stop_timeout;
}

bool runner_book::want_check() noexcept {
  if (stopping_) return false;
  check_wanted_ = true;
  rounds_held_ = true;
  return true;
}

bool runner_book::start_check() noexcept {
  if (!check_wanted_ || checking_ || in_flight_ > 0) return false;
  check_wanted_ = false;
  checking_ = true;
  return true;
}

void runner_book::check_again(bool again) noexcept { check_wanted_ = again && !stopping_; }

void runner_book::check_done() noexcept {
  checking_ = false;
  if (!check_wanted_) rounds_held_ = false;
}

bool runner_book::cancel_due(time_point now) noexcept {
  if (!stopping_ || cancelled_at_deadline_ || now < deadline_ || busy_ == 0) return false;
  cancelled_at_deadline_ = true;
  return true;
}

std::chrono::milliseconds runner_book::heartbeat_interval() const noexcept {
  if (s_.heartbeat_interval.count() > 0) return timer_capped(s_.heartbeat_interval);
  return timer_capped(std::max(s_.worker_ttl / 3, std::chrono::milliseconds(1)));
}

std::chrono::milliseconds runner_book::offer_ttl() const noexcept {
  return std::min(s_.worker_ttl, twice_capped(s_.poll_interval));
}

std::optional<runner_book::round> runner_book::next_round(time_point now) {
  if (in_flight_ >= s_.max_rounds_in_flight || rounds_held_) return std::nullopt;
  if (holding_) {
    if (now < hold_until_) return std::nullopt;
    holding_ = false;
  }
  round r;
  const std::size_t n = std::min(pending_.size(), s_.max_finishes_per_round);
  std::size_t free = 0, idle = 0;
  if (!stopping_ && registered_) {
    const std::size_t room = s_.concurrency + ahead();
    const std::size_t taken = busy_ + ready_ + requested_;
    free = taken < room ? room - taken : 0;
    idle = taken < s_.concurrency ? s_.concurrency - taken : 0;
  }
  // A dry queue is asked again only at a wake-up or its retry time, unless
  // finishes go out anyway (then asking costs nothing more).
  const bool may_ask = !dry_ || woken_ || now >= retry_at_ || n > 0;
  if (free > 0 && may_ask) r.claim = std::min(free, s_.max_claim_batch);
  // Hand-off: a round that claims offers the slots it leaves idle (the
  // script registers them only if the queue ran dry); an offer made
  // earlier is withdrawn by the first round once offering stops (a stop,
  // the channel lost). The offer counts only slots no round in flight will
  // fill, so it never exceeds what is idle.
  const bool may_offer = s_.hand_off && offering_ && !stopping_ && registered_;
  if (r.claim > 0 && may_offer && idle > 0) {
    r.offer = static_cast<std::int64_t>(idle);
    offer_made_ = true;
  } else if (offer_made_ && (r.claim > 0 || !may_offer)) {
    r.offer = 0;
    offer_made_ = false;
  }
  if (n == 0 && r.claim == 0 && r.offer != 0) return std::nullopt;
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
