// The decisions of the claim/get dispatcher (jobs::fetcher<T>, common.hpp)
// without I/O: who waits, how many jobs one claim call asks for, which
// waiter gets which job, when a waiter's deadline may report queue_empty,
// what prefetch holds and when it returns it, when to wake up next.
//
// It is driven by events (a waiter added, cancelled or past its deadline;
// a claim call's reply with N jobs; a wake-up message; the loop's timer
// firing at a given time) and answers with actions the I/O layer carries
// out in order: issue claim call F for N jobs, complete waiter W with job
// i of a reply (or with an error), hold job i of a reply in the prefetch
// buffer, return jobs to the queue. Time comes in as an argument, so
// tests run it on a fake clock. The jobs themselves stay with the caller:
// actions name them by their index in a reply, and the buffer of held jobs
// is a FIFO the caller keeps in step (push on `hold`, pop the front on
// `take_buffered` and `return_buffered`).
//
// Rules (docs/jobs.md §5):
//  * One claim call serves up to max_batch waiters that have none in
//    flight, oldest first; at most max_in_flight calls are out at once.
//  * Jobs go to the call's own waiters first, then to other waiters (with
//    prefetch: any live waiter, so jobs go out in the order they were
//    claimed); with prefetch the rest is held for at most `hold`, without
//    it returned to the queue at once.
//  * A waiter's deadline reports queue_empty only once a claim call that
//    included it has completed ("one attempt on the server first").
//  * A call that comes back with at least as many jobs as waiters, a
//    wake-up message, a new waiter and the poll tick trigger another call.
//  * Prefetch: after a call that served waiters came back full, or a
//    waiter took a held job, one call with no waiters tops the buffer up to
//    `prefetch` jobs.
//  * Scheduled jobs: a claim reply may tell when the earliest scheduled job
//    becomes due (due_at). While anyone waits, the loop wakes up then (or
//    at the poll tick, if sooner) and issues a call; the time is forgotten
//    once used, and replaced by each reply's.
#pragma once

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace thoonk::detail::jobs {

class fetch_policy {
 public:
  using clock = std::chrono::steady_clock;
  using time_point = clock::time_point;
  using error_code = boost::system::error_code;
  using waiter_id = std::uint64_t;
  using fetch_id = std::uint64_t;

  struct options {
    std::chrono::milliseconds poll{1000};  ///< fallback poll interval (min 1 ms)
    std::size_t max_batch = 256;           ///< waiters per claim call (1..1000)
    std::size_t max_in_flight = 2;         ///< claim calls out at once (1..8)
    std::size_t prefetch = 0;              ///< jobs held ahead (at most max_batch)
    std::chrono::milliseconds hold{1000};  ///< how long a held job waits (min 1 ms)
  };

  struct action {
    enum class kind : std::uint8_t {
      claim,            ///< issue claim call `fetch` for `count` jobs
      deliver,          ///< complete `waiter` with job `index` of the reply
      fail,             ///< complete `waiter` with `ec`
      hold,             ///< push job `index` of the reply at the back of the buffer
      return_reply,     ///< return jobs [index, end) of the reply to the queue
      return_buffered,  ///< return the `count` oldest buffered jobs to the queue
    };
    kind what;
    fetch_id fetch = 0;
    waiter_id waiter = 0;
    std::size_t index = 0;
    std::size_t count = 0;
    error_code ec{};

    friend bool operator==(const action&, const action&) = default;
  };
  using actions = std::vector<action>;

  explicit fetch_policy(options o);

  // ---- events ---------------------------------------------------------------
  /// The loop starts (after the wake-up subscription): the poll clock runs
  /// from `now`. pump() issues nothing before.
  void start(time_point now);
  /// A new waiter (the caller checked take_buffered() first). Triggers a
  /// claim call at the next pump().
  waiter_id add_waiter();
  /// The waiter gave up (its cancellation slot fired): `fail` with
  /// operation_aborted, unless it was completed already.
  void cancel_waiter(waiter_id w, actions& out);
  /// The waiter's deadline passed: `fail` with queue_empty if an attempt
  /// including it completed and none is in flight; otherwise it fails when
  /// its attempt completes.
  void deadline(waiter_id w, actions& out);
  /// Takes the oldest held job for a caller (true: the caller pops the
  /// front of its buffer), and may top the buffer up (`claim`).
  bool take_buffered(actions& out);
  /// A wake-up message: something may have arrived.
  void notify();
  /// The earliest time a scheduled job becomes due, as the last claim
  /// reply said (time_point::max(): none). Call it before on_reply.
  void due_at(time_point t) noexcept { due_ = t; }
  /// Issues the claim calls that are due (what the loop does whenever it
  /// wakes up): forgets finished waiters, then one call per batch of
  /// waiters without a call in flight, while triggered and under
  /// max_in_flight.
  void pump(actions& out);
  /// The loop woke up at `now` (`timer_fired`: its timer expired rather than
  /// being poked): returns held jobs past their hold time; the poll tick.
  void on_wakeup(time_point now, bool timer_fired, actions& out);
  /// Claim call `f` completed at `now` with `ec` or `jobs` jobs.
  void on_reply(fetch_id f, time_point now, error_code ec, std::size_t jobs, actions& out);
  /// `jobs` jobs came at `now` without a claim call: a put claimed them for
  /// the waiters this object offered (docs/jobs.md "Hand-off"). They go to
  /// live waiters, oldest first, those without a call in flight before
  /// those with one (whose call's jobs then go on as any call's do); the
  /// rest are held (prefetch) or returned, as a reply's are. Actions name
  /// the jobs by their index in the message.
  void on_handed(time_point now, std::size_t jobs, actions& out);
  /// Fails every live waiter with `ec`, returns every held job; no more
  /// claim calls. A second close does nothing.
  void close(error_code ec, actions& out);

  // ---- queries -------------------------------------------------------------
  /// When the loop should wake up by itself: the poll tick or the due time
  /// of a scheduled job, whichever is first, if anyone waits and no call is
  /// out; the oldest held job's expiry; max() for never.
  time_point next_wakeup() const;
  bool closed() const noexcept { return closed_; }
  std::size_t in_flight() const noexcept { return in_flight_; }
  std::size_t buffered() const noexcept { return buffer_.size(); }
  /// Live waiters (not yet completed).
  std::size_t waiting() const noexcept;
  bool triggered() const noexcept { return trigger_; }
  const options& opts() const noexcept { return opts_; }

 private:
  struct waiter_rec {
    waiter_id id;
    bool live = true;           // not completed yet
    bool in_batch = false;      // a claim call for it is in flight
    bool attempt_done = false;  // a claim call including it completed
    bool expired = false;       // deadline passed while an attempt was due
  };
  struct fetch_rec {
    fetch_id id;
    std::size_t asked;
    std::vector<waiter_id> batch;
  };

  waiter_rec* find(waiter_id w);
  void complete(waiter_rec& w, action a, actions& out);
  void refill(actions& out);
  fetch_rec& new_fetch(std::size_t asked);

  options opts_;
  std::deque<waiter_rec> waiters_;                     // arrival order, ids ascending
  std::vector<fetch_rec> fetches_;                     // calls in flight
  std::vector<std::vector<waiter_id>> spare_batches_;  // reused, no allocation per call
  std::deque<time_point> buffer_;                      // expiry of each held job, oldest first
  waiter_id next_waiter_ = 1;
  fetch_id next_fetch_ = 1;
  std::size_t prefetching_ = 0;  // jobs asked for by prefetch calls in flight
  std::size_t in_flight_ = 0;
  bool last_full_ = false;  // the last call got all it asked for
  bool trigger_ = false;
  bool started_ = false;
  bool closed_ = false;
  time_point next_poll_{};
  time_point due_ = time_point::max();  // a scheduled job becomes due
};

}  // namespace thoonk::detail::jobs
