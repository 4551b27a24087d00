// A Redis-backed job queue (contract 002 "Job", contract 001 "Get Result",
// docs/design.md §5): atomic claims with claim tokens, finish with durable
// results, cancel/stall/retry/retract, maintenance with claim timeouts.
// See docs/jobs.md for the state diagram and the delivery guarantees.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/queue.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk {

/// Config fields of a job queue (in `feed.config:[f]`, set with
/// client::create_feed(name, feed_type::job, {{field, value}, ...}) or
/// client::set_config). Read by the scripts on every call, so every client
/// of the queue agrees and changes apply at once.
namespace job_config {
/// A claim (or its last heartbeat) older than this many milliseconds is
/// lapsed: maintenance requeues it (counting a failure) or stalls it.
/// Default 60000.
inline constexpr std::string_view claim_timeout_ms = "claim_timeout_ms";
/// A job whose failure count (feed.cancelled) exceeds this when its claim
/// lapses is stalled instead of requeued. Default 5. Explicit cancel()
/// never stalls (as the contract's Cancel).
inline constexpr std::string_view max_failures = "max_failures";
/// How long a finish result is kept for get_result(), in milliseconds.
/// Default 300000 (5 minutes).
inline constexpr std::string_view result_ttl_ms = "result_ttl_ms";
/// "1": index jobs by put time in feed.published, as the contract's put
/// does. Default "0" (not written): no contract operation reads the index,
/// and it costs about 110 bytes of Redis memory per waiting job
/// (docs/jobs.md, "Why feed.published is off by default").
inline constexpr std::string_view published = "published";
}  // namespace job_config

/// A job handed to a worker by claim().
struct claimed_job {
  std::string id;
  std::string item;
  /// The job's failure count (feed.cancelled) when it was claimed.
  std::int64_t failures = 0;
  /// The claim token: the attempt number (1 for the first claim; it grows
  /// with every claim of this id and may skip values). finish/cancel/stall/
  /// heartbeat must present it; once the claim ended (lapsed and
  /// requeued, cancelled, stalled, retracted) it is refused with
  /// error::lost_claim.
  std::int64_t token = 0;
};

/// A claim a worker holds: the job id and its claim token.
struct claim_ref {
  std::string id;
  std::int64_t token = 0;
};

/// Counts per state and the contract's counters.
struct job_counts {
  std::int64_t waiting = 0;   ///< LLEN feed.ids
  std::int64_t claimed = 0;   ///< ZCARD feed.claimed
  std::int64_t stalled = 0;   ///< SCARD feed.stalled
  std::int64_t items = 0;     ///< HLEN feed.items (every live job)
  std::int64_t puts = 0;      ///< feed.publishes
  std::int64_t finishes = 0;  ///< feed.finishes
};

/// Tuning of a job_queue object (client side only).
struct job_queue_options {
  /// As queue_options::poll_interval, for waiting claims and get_result.
  std::chrono::milliseconds poll_interval{1000};
  /// Most jobs one claim script takes for this object's waiting claimers
  /// (clamped to 1..1000).
  std::size_t max_claim_batch = 256;
  /// Most finishes one finish script applies; finishes issued while one is
  /// in flight (or in the same tick) share the next call. Clamped 1..1000.
  std::size_t max_finish_batch = 512;
  /// As queue_options::max_put_batch.
  std::size_t max_put_batch = 1000;
  /// Claim scripts in flight at once for this object's claimers (1..8).
  /// More overlap server work with round trips; each call takes fewer jobs.
  std::size_t max_claims_in_flight = 2;
  /// Finish scripts in flight at once (1..8).
  std::size_t max_finishes_in_flight = 2;
  /// Put scripts in flight at once per priority (1..8).
  std::size_t max_puts_in_flight = 2;
  /// Claim ahead: once claims are being served from a busy queue, keep up
  /// to this many jobs claimed for this object before any worker asks
  /// (capped at max_claim_batch). A worker loop then gets its next job
  /// without a round trip, and the server claims while this process runs
  /// its workers. A prefetched job's claim (lease) starts when it is
  /// prefetched; one that no claim() takes within prefetch_hold, or that is
  /// still held at close(), is released: back to the front of the line, no
  /// failure counted, its token ended. If the process dies, its prefetched
  /// jobs lapse like its running ones (maintenance requeues them, counting
  /// a failure). 0 (default): claim() claims exactly one job, when called.
  std::size_t prefetch = 0;
  /// How long a prefetched job waits for a claim() before it is released.
  std::chrono::milliseconds prefetch_hold{1000};
};

/// What one maintenance run does.
struct maintenance_options {
  /// Ids handled per script call (each call is atomic and bounded).
  std::size_t batch = 500;
  /// Look for jobs in feed.items that are in no state (two-pass: requeued
  /// only when still unaccounted for on the next run). Reads every id, so
  /// on big queues run it less often than the lease check.
  bool check_unaccounted = true;
  /// Publish a JSON stats item to the stats feed.
  bool publish_stats = true;
  /// The stats feed; empty: "<queue name>.stats". Created (type `feed`,
  /// max_length stats_max_length) when missing.
  std::string stats_feed;
  std::size_t stats_max_length = 100;
  /// The maintenance lock's time to live: only one runner per queue at a
  /// time; a runner that dies frees it after this long.
  std::chrono::milliseconds lock_ttl{30000};
};

/// What a maintenance run did.
struct maintenance_report {
  /// false: another client held the maintenance lock; nothing was done.
  bool ran = false;
  std::int64_t requeued = 0;              ///< lapsed claims put back (failure counted)
  std::int64_t stalled = 0;               ///< lapsed claims stalled (failures exhausted)
  std::int64_t unaccounted_requeued = 0;  ///< jobs in no state on two passes, requeued
  std::int64_t unaccounted_suspects = 0;  ///< in no state now; rechecked next run
  std::int64_t orphans_removed = 0;       ///< extension state of vanished jobs removed
  job_counts counts;                      ///< after the run
  bool stats_published = false;
};

namespace detail {
class job_queue_impl;
}

/// A job queue. Each job is claimed by one worker at a time; a worker
/// finishes it (optionally with a result), cancels it (back to the queue,
/// failure +1) or stalls it (out of circulation until retry()). A claim
/// that lapses (worker died or hung) is recovered by maintenance.
///
/// Keys, channels and payloads are the contract's (feed.ids, feed.items,
/// feed.published, feed.claimed, feed.cancelled, feed.stalled,
/// feed.publishes, feed.finishes, `job.finish:[f]` with `id\0result`,
/// `feed.jobfinished:[f]\0<id>`); extensions sit beside them
/// (feed.attempts, feed.sleepers, feed.unaccounted, feed.maintenance,
/// channel feed.wake:[name]). Jobs put and claimed with the contract's
/// plain commands work with this class, and the reverse.
///
/// **Batching**: claimers of one object share a dispatcher (one claim
/// script takes up to N jobs for N waiting coroutines), finishes and puts
/// issued in the same tick share one script call. Nothing ever blocks the
/// shared connection (no BRPOP): waiting claimers sleep until a wake-up
/// message or the next poll.
///
/// **Copies** share state. When the last copy is destroyed, pending claims
/// and get_results complete with operation_aborted (and run_maintenance
/// ends). **Threading and lifetime**: as thoonk::queue.
class job_queue {
 public:
  job_queue(client& c, std::string name, job_queue_options opts = {});
  ~job_queue();
  job_queue(const job_queue&) = default;
  job_queue(job_queue&&) noexcept = default;
  job_queue& operator=(const job_queue&) = default;
  job_queue& operator=(job_queue&&) noexcept = default;

  const std::string& name() const noexcept;
  client& get_client() const noexcept { return *client_; }

  /// Checks that the feed exists with type `job` and subscribes to the
  /// wake-up channel. Optional (every operation checks the type).
  /// Completion `void(error_code)`: invalid_name, feed_not_found,
  /// wrong_feed_type, transport errors.
  template <class CompletionToken>
  auto open(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [self = *this](auto h) mutable { self.start_open(std::move(h)); });
  }

  /// Puts a job (waiting), returns its generated id. Normal priority: the
  /// end of the line (LPUSH); high: the next one out (RPUSH). Puts issued in
  /// the same tick share one script call. The put time goes to
  /// feed.published only with the queue config `published` = "1".
  ///
  /// Completion `void(error_code, std::string id)`. Errors: invalid_name,
  /// item_too_large (before any I/O), feed_not_found, wrong_feed_type,
  /// transport errors (unknown_outcome: it may have been put).
  /// Cancellation: before the script is sent the put is dropped; after, it
  /// completes with operation_aborted but may have happened.
  template <class CompletionToken>
  auto put(std::string item, CompletionToken&& token) {
    return put(std::move(item), priority::normal, std::forward<CompletionToken>(token));
  }
  template <class CompletionToken>
  auto put(std::string item, priority p, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::string)>(
        token, [self = *this, i = std::move(item), p](auto h) mutable {
          self.start_put(std::move(i), p, std::move(h));
        });
  }

  /// Puts many jobs, chunks of max_put_batch per (atomic) script call.
  /// Completion `void(error_code, std::vector<std::string> ids)` in the
  /// order of `items` (with priority::high the first is the next out).
  /// On an error after some chunks, ids holds the ids of those put.
  template <class CompletionToken>
  auto put_many(std::vector<std::string> items, priority p, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<std::string>)>(
        token, [self = *this, i = std::move(items), p](auto h) mutable {
          self.start_put_many(std::move(i), p, std::move(h));
        });
  }

  /// Claims the next waiting job, waiting up to `timeout` (0: one attempt;
  /// milliseconds::max(): forever). One atomic script pops the id, records
  /// the claim in feed.claimed (score: claim time, ms), assigns the token
  /// and reads item and failure count: no step where a crash loses the job.
  /// With job_queue_options::prefetch, a job this object already claimed
  /// ahead is handed out at once (no I/O), in queue order.
  ///
  /// Completion `void(error_code, claimed_job)`. Errors: error::queue_empty
  /// (never before `timeout`, and only after at least one attempt on the
  /// server), invalid_name, feed_not_found, wrong_feed_type, transport
  /// errors.
  ///
  /// Cancellation / lost replies: a cancelled claim completes with
  /// operation_aborted at once. A job that a script already in flight claims
  /// for it is handed to another waiting claimer of this object, or released
  /// back to the front of the queue (no failure counted). If the reply is
  /// lost (error::unknown_outcome, connection died), jobs may have been
  /// claimed on the server for nobody: they are recovered when their claim
  /// lapses (claim_timeout_ms, by maintenance), with a failure counted.
  template <class CompletionToken>
  auto claim(std::chrono::milliseconds timeout, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, claimed_job)>(
        token,
        [self = *this, timeout](auto h) mutable { self.start_claim(timeout, std::move(h)); });
  }

  /// Finishes a claimed job: removed from every structure, feed.finishes
  /// incremented. With a result, also PUBLISHes `id\0result` on
  /// `job.finish:[f]` and keeps it in `feed.jobfinished:[f]\0<id>` for
  /// result_ttl_ms (for get_result). Finishes issued in the same tick (or
  /// while one is in flight) share one script call; each succeeds or fails
  /// alone.
  ///
  /// Completion `void(error_code)`. Errors: invalid_name, invalid_id,
  /// item_too_large (result; before I/O), job_not_found (unknown, already
  /// finished or retracted), job_not_claimed (waiting or stalled),
  /// lost_claim (claimed under another token: this claim lapsed and the job
  /// was reclaimed, or it was claimed with plain commands), feed_not_found,
  /// wrong_feed_type, transport errors (unknown_outcome: it may have been
  /// finished; finishing again tells: job_not_found/lost_claim or success).
  /// Cancellation: before the script is sent nothing happens; after, it
  /// completes with operation_aborted and may have finished the job.
  template <class CompletionToken>
  auto finish(std::string id, std::int64_t claim_token, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [self = *this, i = std::move(id), claim_token](auto h) mutable {
          self.start_finish(std::move(i), claim_token, std::nullopt, std::move(h));
        });
  }
  template <class CompletionToken>
  auto finish(std::string id, std::int64_t claim_token, std::string result,
              CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token,
        [self = *this, i = std::move(id), claim_token, r = std::move(result)](auto h) mutable {
          self.start_finish(std::move(i), claim_token, std::optional<std::string>(std::move(r)),
                            std::move(h));
        });
  }

  /// Gives a claimed job back (contract "Cancel"): failure count +1, back to
  /// the end of the line. Completion `void(error_code, std::int64_t
  /// failures)`. Errors as finish().
  template <class CompletionToken>
  auto cancel(std::string id, std::int64_t claim_token, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::int64_t)>(
        token, [self = *this, i = std::move(id), claim_token](auto h) mutable {
          self.start_cancel(std::move(i), claim_token, std::move(h));
        });
  }

  /// Takes a claimed job out of circulation (contract "Stall"): into
  /// feed.stalled, failure count cleared, kept until retry() or retract().
  /// Completion `void(error_code)`. Errors as finish().
  template <class CompletionToken>
  auto stall(std::string id, std::int64_t claim_token, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [self = *this, i = std::move(id), claim_token](auto h) mutable {
          self.start_stall(std::move(i), claim_token, std::move(h));
        });
  }

  /// Renews a claim: its claim time becomes now, so it does not lapse.
  /// Completion `void(error_code)`. Errors as finish().
  template <class CompletionToken>
  auto heartbeat(std::string id, std::int64_t claim_token, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [self = *this, i = std::move(id), claim_token](auto h) mutable {
          self.start_heartbeat(std::move(i), claim_token, std::move(h));
        });
  }

  /// Renews many claims at once (a worker holding several jobs): one atomic
  /// script call per 1000 claims. Completion
  /// `void(error_code, std::vector<error_code>)`: the first error is the
  /// call's (invalid_name, invalid_id of any claim before any I/O,
  /// feed_not_found, wrong_feed_type, transport errors); otherwise the
  /// vector has one entry per claim, in order: success (renewed),
  /// job_not_found, job_not_claimed or lost_claim. Cancellation: as finish;
  /// renewals already sent may have happened.
  template <class CompletionToken>
  auto heartbeat_many(std::vector<claim_ref> claims, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<boost::system::error_code>)>(
        token, [self = *this, c = std::move(claims)](auto h) mutable {
          self.start_heartbeat_many(std::move(c), std::move(h));
        });
  }

  /// Puts a stalled job back in the queue (contract "Retry").
  /// Completion `void(error_code)`. Errors: job_not_stalled (waiting or
  /// claimed), job_not_found, invalid_id, feed_not_found, wrong_feed_type.
  template <class CompletionToken>
  auto retry(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [self = *this, i = std::move(id)](auto h) mutable {
          self.start_retry(std::move(i), std::move(h));
        });
  }

  /// Removes a job in any state from every structure (contract "Retract").
  /// A worker holding it then gets job_not_found from finish.
  /// Completion `void(error_code)`. Errors: job_not_found, invalid_id, ...
  template <class CompletionToken>
  auto retract(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [self = *this, i = std::move(id)](auto h) mutable {
          self.start_retract(std::move(i), std::move(h));
        });
  }

  /// The failure count (contract getNumOfFailures).
  /// Completion `void(error_code, std::int64_t)`; job_not_found if unknown.
  template <class CompletionToken>
  auto failures(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::int64_t)>(
        token, [self = *this, i = std::move(id)](auto h) mutable {
          self.start_failures(std::move(i), std::move(h));
        });
  }

  /// Ids of every live job, any state (contract: HKEYS feed.items).
  /// Completion `void(error_code, std::vector<std::string>)`.
  template <class CompletionToken>
  auto get_ids(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<std::string>)>(
        token, [self = *this](auto h) mutable { self.start_get_ids(std::move(h)); });
  }

  /// Counts per state, read atomically. Completion `void(error_code, job_counts)`.
  template <class CompletionToken>
  auto counts(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, job_counts)>(
        token, [self = *this](auto h) mutable { self.start_counts(std::move(h)); });
  }

  /// Waits up to `timeout` for the result of job `id`, whether it was
  /// finished before or after the call (the result is kept for
  /// result_ttl_ms). Waits on `job.finish:[f]` through the subscriber and
  /// re-reads the stored result every poll interval (never blocks the
  /// shared connection). Jobs finished without a result have none.
  ///
  /// Completion `void(error_code, std::string result)`. Errors:
  /// error::result_timeout, invalid_name, invalid_id, transport errors.
  /// Cancellation: completes with operation_aborted; nothing changes.
  template <class CompletionToken>
  auto get_result(std::string id, std::chrono::milliseconds timeout, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::string)>(
        token, [self = *this, i = std::move(id), timeout](auto h) mutable {
          self.start_get_result(std::move(i), timeout, std::move(h));
        });
  }

  /// One maintenance run (contract "Maintenance", done properly), under the
  /// queue's maintenance lock: lapsed claims (older than claim_timeout_ms)
  /// are requeued with a failure counted, or stalled past max_failures;
  /// jobs found in feed.items but in no state are requeued when still so on
  /// the next run (two-pass); extension state of vanished jobs is removed;
  /// stats are published to the stats feed. Every step is a bounded script.
  ///
  /// Completion `void(error_code, maintenance_report)` (report.ran false:
  /// another runner holds the lock). Errors: feed_not_found,
  /// wrong_feed_type, transport errors. The lock is released before the
  /// run completes, also when it failed or was cancelled, so a process that
  /// runs maintenance once and exits leaves the queue free for the next
  /// runner (only if the release itself fails does the lock wait out its
  /// lock_ttl). Cancellation: stops between steps; every step done stays
  /// done.
  template <class CompletionToken>
  auto maintain(maintenance_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, maintenance_report)>(
        token, [self = *this, o = std::move(opts)](auto h) mutable {
          self.start_maintain(std::move(o), std::move(h));
        });
  }

  /// Runs maintain() every `interval` until cancelled or the queue object
  /// (all copies) is destroyed. Transport errors are retried on the next
  /// tick. Completion `void(error_code)`: operation_aborted when cancelled
  /// or closed; feed_not_found / wrong_feed_type when the queue disappears.
  template <class CompletionToken>
  auto run_maintenance(std::chrono::milliseconds interval, maintenance_options opts,
                       CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [self = *this, interval, o = std::move(opts)](auto h) mutable {
          self.start_run_maintenance(interval, std::move(o), std::move(h));
        });
  }

 private:
  template <class... Ts>
  using handler = boost::asio::any_completion_handler<void(boost::system::error_code, Ts...)>;

  void start_open(handler<> h);
  void start_put(std::string item, priority p, handler<std::string> h);
  void start_put_many(std::vector<std::string> items, priority p,
                      handler<std::vector<std::string>> h);
  void start_claim(std::chrono::milliseconds timeout, handler<claimed_job> h);
  void start_finish(std::string id, std::int64_t claim_token, std::optional<std::string> result,
                    handler<> h);
  void start_cancel(std::string id, std::int64_t claim_token, handler<std::int64_t> h);
  void start_stall(std::string id, std::int64_t claim_token, handler<> h);
  void start_heartbeat(std::string id, std::int64_t claim_token, handler<> h);
  void start_heartbeat_many(std::vector<claim_ref> claims,
                            handler<std::vector<boost::system::error_code>> h);
  void start_retry(std::string id, handler<> h);
  void start_retract(std::string id, handler<> h);
  void start_failures(std::string id, handler<std::int64_t> h);
  void start_get_ids(handler<std::vector<std::string>> h);
  void start_counts(handler<job_counts> h);
  void start_get_result(std::string id, std::chrono::milliseconds timeout, handler<std::string> h);
  void start_maintain(maintenance_options opts, handler<maintenance_report> h);
  void start_run_maintenance(std::chrono::milliseconds interval, maintenance_options opts,
                             handler<> h);

  client* client_;
  std::shared_ptr<detail::job_queue_impl> impl_;
  std::shared_ptr<void> closer_;  // closes impl_ when the last copy goes
};

}  // namespace thoonk
