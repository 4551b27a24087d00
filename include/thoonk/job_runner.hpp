// The types of job_queue::async_run (docs/jobs.md "Workers and the runner"): the
// handler a runner calls per job, what it is told, its options and report,
// and what the worker registry lists. No I/O here; job_queue.hpp has the
// operations.
#pragma once

#include <thoonk/export.hpp>
#include <thoonk/job_types.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <vector>

namespace boost::asio {
template <typename Executor>
class basic_signal_set;
}  // namespace boost::asio

namespace thoonk {

namespace detail {
class job_slot;
}  // namespace detail

/// Thrown by a job handler (or let escape from it): the job fails with the
/// exception's what() and becomes a dead letter at once, whatever retries
/// it has left (job_queue::async_fail with fail_options::permanent). Any other
/// exception fails the job with its retry strategy (retried after the
/// backoff, or a dead letter once its retries are used up).
class THOONK_API permanent_job_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a runner's handler gets for one job. Copies share one state; it
/// stays valid as long as a copy exists (also after async_run() completed).
///
/// Thread safety: every member may be called from any thread, at once.
class THOONK_API job_context {
 public:
  /// The job as claimed: id, token, item, failure count.
  const claimed_job& job() const noexcept;
  /// True once the runner no longer waits for this job's outcome: its claim
  /// was lost (the lease lapsed and the job was claimed again, async_abort() from
  /// any client, a heartbeat found it gone, the worker's registration
  /// lapsed) or the runner stopped and the job went back to the queue. A
  /// coroutine handler is also cancelled (its cancellation slot is emitted,
  /// so the operation it awaits ends with operation_aborted); a plain
  /// function handler should poll this and return early. Whatever a
  /// cancelled handler returns is dropped.
  bool cancelled() const noexcept;
  /// Reports progress on the job (job_queue::async_progress: kept on the job and
  /// published as a `progress` event when the queue's events are on). Does
  /// not wait; a report the server refuses (the claim was lost, a text too
  /// large) is dropped and counted in run_report::progress_refused. A
  /// report made after the run has completed (a context kept past its
  /// handler) is dropped without a count: there is no report left to count
  /// it in, and the claim has ended anyway.
  void progress(std::string text) const;

  /// Made by the runner.
  explicit job_context(std::shared_ptr<detail::job_slot> slot) noexcept;

 private:
  std::shared_ptr<detail::job_slot> slot_;
};

/// A handler run as a coroutine, on run_options::handler_executor (or the
/// client's executor). It returns the job's result (nullopt: finished
/// without a result; a string: finished with that result, as
/// job_queue::async_finish(claim, result)); an exception fails the job (see
/// permanent_job_error).
using job_coroutine =
    std::function<boost::asio::awaitable<std::optional<std::string>>(job_context)>;
/// A handler run as a plain function, on run_options::handler_executor (or
/// the client's executor, where it blocks all I/O while it runs: give
/// blocking or CPU-bound work a thread pool). Result and exceptions as
/// job_coroutine.
using job_function = std::function<std::optional<std::string>(job_context)>;

/// How job_queue::async_run works.
struct THOONK_API run_options {
  /// Handlers running at once (1 .. 10000). Idle slots are filled with jobs
  /// claimed in one script call, together with the finishes of the jobs
  /// just done (one round trip per round, not per job).
  std::size_t concurrency = 1;
  /// The worker's name in the queue's registry (not empty: at most 200
  /// bytes, no NUL). Empty: `<host>:<pid>:<random>`, unique. A live worker
  /// of the same name makes async_run() fail with error::worker_exists.
  std::string worker_name;
  /// The registration's time to live: a worker that has not renewed it for
  /// this long is dead, and its jobs go back (maintenance, or the next
  /// registration under its name). At least 100 ms, at most 2^53 - 1 ms.
  std::chrono::milliseconds worker_ttl{10000};
  /// How often the worker renews its registration and the leases of all its
  /// jobs (one script call). 0: worker_ttl / 3. Keep it well below both
  /// worker_ttl and the queue's claim_timeout.
  std::chrono::milliseconds heartbeat_interval{0};
  /// After a stop is asked for, jobs in flight have this long to finish;
  /// then they are cancelled and go back to the front of the line with no
  /// failure counted.
  std::chrono::milliseconds stop_timeout{10000};
  /// Where handlers run (a thread pool's executor, say). The runner's I/O,
  /// heartbeats included, stays on the client's executor, so a handler that
  /// holds its thread does not delay them. Unset: the client's executor.
  std::optional<boost::asio::any_io_executor> handler_executor;
  /// A stop handle: the runner stops gracefully (as when the operation is
  /// cancelled) once a stop is requested through the std::stop_source this
  /// token came from, from any thread, before or during the run:
  ///
  ///     std::stop_source stop;
  ///     opts.stop = stop.get_token();
  ///     signals.async_wait([stop](auto, int) mutable { stop.request_stop(); });
  ///     co_await q.async_run(handler, opts);
  ///
  /// Default: a token that never stops (the cancellation slot still does).
  std::stop_token stop;
  /// Most jobs one script call claims (1 .. 1000).
  std::size_t max_claim_batch = 256;
  /// Most jobs claimed ahead of the idle slots (0 .. 10000; unset: 64, or
  /// `concurrency` when larger). The runner claims ahead only while its
  /// handlers run shorter than a round trip to the server (on average, and
  /// the last one), and then only what the slots get through in one round
  /// trip at the handlers' pace: the next job is at hand when a handler
  /// ends, instead of an idle slot waiting for the server, and a job
  /// claimed ahead waits for a slot about one round trip. One handler
  /// longer than a round trip turns it off. A job claimed ahead counts as
  /// claimed by this worker (the heartbeats renew it); it goes back to the
  /// front of the line, no failure counted, when a stop is asked for or
  /// when it still waits for a slot one heartbeat interval later (it sits
  /// behind a handler that turned out long). 0: never claim ahead.
  std::optional<std::size_t> prefetch;
  /// Hand-off (docs/jobs.md "Hand-off"): while the queue is dry, this
  /// runner offers its idle slots, and a put from this library claims its
  /// jobs for the runner and sends them on the runner's own channel
  /// (`job.take:name:worker`), so a job reaches an idle runner in one hop
  /// instead of a wake-up and a claim. A job handed off is claimed by this
  /// worker like any other. Needs the user to be allowed to SUBSCRIBE to
  /// that channel (else the runner works without it) and the producers to
  /// PUBLISH on it (else they wake the runner instead). After its
  /// subscriber reconnects, the runner gives back the hand-offs it missed
  /// (run_report::released). false: never offer.
  bool hand_off = true;
};
template <>
inline constexpr bool is_operation_argument_v<run_options> = true;

/// What a run did, when it completed.
struct THOONK_API run_report {
  std::string worker_name;          ///< the name the runner registered under
  std::uint64_t started = 0;        ///< handlers started
  std::uint64_t finished = 0;       ///< jobs finished (accepted by the server)
  std::uint64_t failed = 0;         ///< handlers that threw: retry scheduled
  std::uint64_t dead_lettered = 0;  ///< handlers that threw: dead letter
  std::uint64_t lost = 0;           ///< outcomes refused because the claim had been lost
  std::uint64_t cancelled = 0;      ///< handlers signalled to stop (lost claims, stop timeout)
  /// Jobs given back, no failure counted: those still held at the stop,
  /// and jobs claimed ahead that did not start (see run_options::prefetch).
  std::uint64_t released = 0;
  /// Jobs that reached this runner by hand-off (run_options::hand_off),
  /// counted in `started` too when they started.
  std::uint64_t handed_off = 0;
  std::uint64_t registrations = 0;     ///< 1, plus one for each time the registration lapsed
  std::uint64_t progress_refused = 0;  ///< job_context::progress reports the server refused
};

/// A worker as the queue's registry lists it (job_queue::async_get_workers).
struct THOONK_API worker_info {
  std::string name;  ///< the worker's registered name
  /// When its registration lapses, and "now", both by the server's clock
  /// (ms): lapses_at < server_now means the worker is dead, and its jobs go
  /// back at the next maintenance run.
  epoch_ms lapses_at = 0;
  /// The server's clock when the registry was read (epoch ms), to compare lapses_at with.
  epoch_ms server_now = 0;
  /// The last heartbeat (server ms): lapses_at minus its time to live.
  epoch_ms last_heartbeat = 0;
  /// JSON the worker wrote when it registered: host, pid, queue,
  /// concurrency, ttl_ms, started_ms.
  std::string description;
  /// The claims it holds now.
  std::vector<claim_ref> claims;
};

}  // namespace thoonk
