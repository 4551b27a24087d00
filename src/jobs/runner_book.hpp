// The decisions of job_queue::run without I/O (docs/jobs.md "Workers and
// the runner"): how many jobs each round claims and when a round goes out,
// which finishes ride along, when a dry queue is asked again, what a stop
// waits for, when handlers are cancelled at the stop deadline, how often
// heartbeats go and how long an offer lasts. The runner (jobs/runner/)
// reports events to it and does what it says;
// test/unit/runner_book_test.cpp drives it on a fake clock.
#pragma once

#include <thoonk/job_types.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

namespace thoonk::detail::jobs {

class runner_book {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;

  struct settings {
    std::size_t concurrency = 1;
    std::size_t max_claim_batch = 256;
    /// Rounds (script calls) in flight at once: a second one overlaps the
    /// first's round trip with the handlers that end meanwhile.
    std::size_t max_rounds_in_flight = 2;
    /// Most finishes one round carries.
    std::size_t max_finishes_per_round = 512;
    /// A dry queue is asked again after this long without a wake-up.
    std::chrono::milliseconds poll_interval{1000};
    /// A round that failed (connection lost, timeout) is retried after this.
    std::chrono::milliseconds retry_delay{100};
    std::chrono::milliseconds stop_timeout{10000};
    /// Most jobs claimed ahead, beyond the idle slots, while handlers run
    /// shorter than a round trip (see prefetching()). 0: never.
    std::size_t prefetch = 0;
    /// Whether rounds offer the idle slots for hand-off (round::offer).
    bool hand_off = false;
    /// The worker's registration lapses after this long without a
    /// heartbeat (run_options::worker_ttl).
    std::chrono::milliseconds worker_ttl{10000};
    /// Between two heartbeats (run_options::heartbeat_interval); 0: a third
    /// of worker_ttl.
    std::chrono::milliseconds heartbeat_interval{0};
  };

  /// A handler's successful outcome, to be finished in a round.
  struct finish {
    claim_ref claim;
    std::optional<std::string> result;
  };

  /// What to send in one script call: finish these, claim that many.
  struct round {
    std::vector<finish> finishes;
    std::size_t claim = 0;
    /// Hand-off (jobs/work.lua ARGV 5): the idle slots this round offers
    /// when it finds the queue dry; 0 withdraws an earlier offer; -1 leaves
    /// none (the runner has made none since it last withdrew).
    std::int64_t offer = -1;
  };

  explicit runner_book(settings s);

  // ---- events ----------------------------------------------------------------
  /// A handler ended after running for `ran`; `done` is its job's finish
  /// when it succeeded (and was not cancelled). Frees its slot.
  void handler_ended(std::optional<finish> done, clock::duration ran = {});
  /// A round came back after `round_trip`: it asked for `asked` jobs and
  /// got `got`. Returns how many of them start now (the first ones, in
  /// order: one per idle slot); the rest wait, claimed ahead, for
  /// take_ready(). When got < asked, `retry_at` is when the queue said to
  /// ask again (rate limit, a scheduled job becoming due), or nullopt for
  /// "at a wake-up" (then at the poll interval at the latest).
  std::size_t round_done(std::size_t asked, std::size_t got, std::optional<time_point> retry_at,
                         time_point now, clock::duration round_trip = {});
  /// Whether a job claimed ahead starts now: true when one waits, a slot
  /// is idle and no stop was asked for (the slot is then counted busy).
  bool take_ready() noexcept;
  /// `n` jobs claimed ahead will not start: their claims were lost, they
  /// were aborted, or the runner gives them back (at a stop, a lapse).
  void ready_dropped(std::size_t n) noexcept;
  /// `n` jobs claimed ahead waited for a slot for a heartbeat interval and
  /// go back: a handler runs long, so no more is claimed ahead until a
  /// handler ends (and the averages allow it again).
  void ready_waited_too_long(std::size_t n) noexcept;
  /// A round failed before its outcome was known. Its finishes are sent
  /// again in a later round (a finish applied twice is refused the second
  /// time, never applied twice); no round goes out before retry_delay.
  void round_failed(round r, time_point now);
  /// `n` jobs arrived by hand-off (claimed for this worker by a put).
  /// Returns how many start now, as round_done does; the rest wait for
  /// take_ready(). During a stop none start: the caller gives them back
  /// (ready_dropped).
  std::size_t handed_off(std::size_t n) noexcept;
  /// Whether rounds may offer slots for hand-off now (the runner's channel
  /// is subscribed). Turned off, the next round withdraws the offer.
  void set_offering(bool on) noexcept { offering_ = on; }
  /// While held, no round goes out: the runner checks for hand-offs it
  /// missed, and must know every claim it holds, with no claim or finish
  /// on its way. Finishes wait for the release.
  void hold_rounds(bool on) noexcept { rounds_held_ = on; }
  bool rounds_held() const noexcept { return rounds_held_; }
  /// Hand-off: the runner may hold claims it never received (its
  /// subscriber reconnected, a message could not be read), so a check
  /// (reconciliation) is wanted; rounds are held until it ran. Refused
  /// (false) during a stop, which gives back every claim anyway.
  bool want_check() noexcept;
  /// Whether the wanted check starts now: none runs and no round is in
  /// flight (so every claim a round made is known). It then runs and is no
  /// longer wanted.
  bool start_check() noexcept;
  /// The running check failed for the connection: it is wanted again
  /// after the runner's pause, unless `again` is false or a stop came.
  void check_again(bool again) noexcept;
  /// The running check ended: rounds go on, unless another check is
  /// wanted.
  void check_done() noexcept;
  bool check_wanted() const noexcept { return check_wanted_; }
  bool checking() const noexcept { return checking_; }
  /// A wake-up: jobs may have arrived (or the queue resumed).
  void woken() noexcept { woken_ = true; }
  /// The registration lapsed: no claims until registered() again.
  void registration_lapsed() noexcept { registered_ = false; }
  void registered() noexcept { registered_ = true; }
  /// A stop was asked for: no more claims; jobs in flight have until
  /// now + stop_timeout. A check wanted and not running is dropped (the
  /// stop gives back every claim).
  void stop(time_point now);

  // ---- decisions -------------------------------------------------------------
  /// The next round to send, or nullopt when none should go now.
  std::optional<round> next_round(time_point now);
  /// When next_round() may say something new without another event: the
  /// dry queue's retry time, the stop deadline; time_point::max() if none.
  time_point next_timer() const noexcept;
  /// Whether the handlers still running are cancelled now: stopping, the
  /// stop deadline passed, and a handler is busy. True once per run: the
  /// runner cancels them then (and gives back their claims).
  bool cancel_due(time_point now) noexcept;
  /// How long the runner waits between two heartbeats: the setting, or a
  /// third of worker_ttl (1 ms at least) when it is 0; cut to what a steady
  /// timer can wait (jobs::timer_capped).
  std::chrono::milliseconds heartbeat_interval() const noexcept;
  /// How long a round's offer lasts (jobs/work.lua ARGV 6): a dry runner
  /// renews it every poll interval, and one that died stops getting jobs
  /// soon after, well before its registration lapses: twice the poll
  /// interval (saturated, jobs::twice_capped), at most worker_ttl.
  std::chrono::milliseconds offer_ttl() const noexcept;
  /// Stopping, and nothing left to wait for: every finish sent and
  /// answered, and every handler ended or the stop deadline passed. The
  /// runner then gives back what is still claimed and leaves.
  bool ready_to_leave(time_point now) const noexcept;

  bool stopping() const noexcept { return stopping_; }
  /// When a stop's grace ends (meaningful once stopping()).
  time_point stop_deadline() const noexcept { return deadline_; }
  std::size_t busy() const noexcept { return busy_; }
  /// Jobs claimed ahead, waiting for a slot.
  std::size_t ready() const noexcept { return ready_; }
  /// Whether rounds claim ahead now: prefetch is set, and the handlers
  /// that ended lately ran shorter, on average, than the rounds took to
  /// come back, and so did the last one. Then an idle slot would wait for
  /// the server longer than a handler works, and a job claimed ahead waits
  /// for a slot less than a round trip: it starts no later than it would
  /// have, claimed once a slot was idle. One handler longer than the
  /// rounds' average turns it off (with long handlers, a job held back
  /// behind a busy slot would start sooner at an idle worker).
  bool prefetching() const noexcept;
  /// How many jobs rounds claim ahead now: while prefetching(), what the
  /// slots get through in one round trip at the handlers' average pace
  /// (concurrency x round trip / handler run), at most settings.prefetch;
  /// else 0.
  std::size_t ahead() const noexcept;
  std::size_t rounds_in_flight() const noexcept { return in_flight_; }
  std::size_t pending_finishes() const noexcept { return pending_.size(); }
  /// Calls f(claim_ref) for each finish waiting for the next round.
  template <class F>
  void for_each_pending(F&& f) const {
    for (const auto& p : pending_) f(p.claim);
  }

 private:
  settings s_;
  std::size_t busy_ = 0;       // handlers running
  std::size_t requested_ = 0;  // jobs asked for by rounds in flight
  std::size_t in_flight_ = 0;  // rounds in flight
  std::size_t ready_ = 0;      // jobs claimed ahead, not started
  // Moving averages (weight 1/8 for the newest), nanoseconds; < 0: none yet.
  double handler_avg_ = -1;
  double round_avg_ = -1;
  double handler_last_ = -1;
  std::deque<finish> pending_;
  bool dry_ = false;  // the last claim got fewer than it asked for
  bool woken_ = false;
  bool registered_ = true;
  bool offering_ = false;      // rounds may offer slots (settings.hand_off)
  bool offer_made_ = false;    // a round offered since the last withdrawal
  bool rounds_held_ = false;   // hold_rounds()
  bool check_wanted_ = false;  // want_check()
  bool checking_ = false;      // start_check() until check_done()
  time_point retry_at_{};      // when a dry queue is asked again
  bool holding_ = false;       // a round failed: none goes out before hold_until_
  time_point hold_until_{};
  bool stopping_ = false;
  bool cancelled_at_deadline_ = false;  // cancel_due() said so
  time_point deadline_{};
};

}  // namespace thoonk::detail::jobs
