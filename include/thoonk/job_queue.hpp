// A Redis-backed job queue (docs/contract.md "Job", durable job results,
// docs/design.md §5): atomic claims with claim tokens, finish with durable
// results, cancel/stall/retry/retract, maintenance with claim timeouts.
// See docs/jobs.md for the state diagram and the delivery guarantees.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/detail/queue_base.hpp>
#include <thoonk/job_runner.hpp>
#include <thoonk/job_types.hpp>
#include <thoonk/subscriber.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk {

/// Config field names of a job queue (in `feed.config:[f]`), the string
/// form of job_queue::settings (client::set_config, client::get_config and
/// contract clients use them). Read by the scripts on every call, so every
/// client of the queue agrees and changes apply at once.
namespace job_config {
/// A claim (or its last heartbeat) older than this many milliseconds is
/// lapsed: maintenance requeues it (counting a failure) or stalls it.
/// Default 60000.
inline constexpr std::string_view claim_timeout_ms = "claim_timeout_ms";
/// Queue defaults of the retry strategy (retry_strategy; per job a put may
/// set its own). Defaults 10, 3, 2000, 300000.
inline constexpr std::string_view max_retries = "max_retries";
inline constexpr std::string_view max_stalls = "max_stalls";
inline constexpr std::string_view min_backoff_ms = "min_backoff_ms";
inline constexpr std::string_view max_backoff_ms = "max_backoff_ms";
/// The name of a job queue that receives a JSON record `[id, data, error]`
/// for every job of this queue that becomes a dead letter. Default: none.
inline constexpr std::string_view dead_letter_queue = "dead_letter_queue";
/// "1": the scripts publish typed job events on `job.event:[f]`
/// (job_queue::subscribe_events). Default "0" (no PUBLISH per put, claim
/// and finish).
inline constexpr std::string_view events = "events";
/// How long a finish result is kept for get_result(), in milliseconds.
/// Default 300000 (5 minutes).
inline constexpr std::string_view result_ttl_ms = "result_ttl_ms";
/// "1": index jobs by put time in feed.published, as the contract's put
/// does. Default "0" (not written): no contract operation reads the index,
/// and it costs about 110 bytes of Redis memory per waiting job
/// (docs/jobs.md, "Why feed.published is off by default").
inline constexpr std::string_view published = "published";
/// At most this many jobs per second are claimed from the queue, across
/// every client and process (enforced by the claim scripts on the server;
/// docs/jobs.md "Rate limit" gives the exact guarantee). Integer 0 ..
/// 1000000; 0 or unset: no limit.
inline constexpr std::string_view rate_limit = "rate_limit";
/// "1": the queue is paused: no claim script hands out a job; puts go on.
/// Set by job_queue::pause() and cleared by resume() (which also wakes
/// waiting claimers). Default "0". Claims made with the contract's plain
/// commands do not read it.
inline constexpr std::string_view paused = "paused";
}  // namespace job_config

/// Tuning of a job_queue object (client side only). poll_interval,
/// max_put_batch and max_puts_in_flight: see detail::queue_options_base.
struct job_queue_options : detail::queue_options_base {
  /// Most jobs one claim script takes for this object's waiting claimers
  /// (clamped to 1..1000).
  std::size_t max_claim_batch = 256;
  /// Most finishes one finish script applies; finishes issued while one is
  /// in flight (or in the same tick) share the next call. Clamped 1..1000.
  std::size_t max_finish_batch = 512;
  /// Claim scripts in flight at once for this object's claimers (1..8).
  /// More overlap server work with round trips; each call takes fewer jobs.
  std::size_t max_claims_in_flight = 2;
  /// Finish scripts in flight at once (1..8), finish_and_claim's counted
  /// apart. With 2 or more, a call that carried 16 or more finishes while
  /// no other was out resumes its callers in two halves, the second once
  /// the first half's next call is out, so a loop of callers keeps the
  /// server busy while this process resumes them (docs/jobs.md "A large
  /// batch completes in two halves").
  std::size_t max_finishes_in_flight = 2;
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
  /// Hand-off (docs/jobs.md "Hand-off to claim()"): while claim() calls
  /// wait on a dry queue, this object offers them to puts, which claim
  /// their jobs for it and send them on its own channel
  /// (`job.take:<queue>:claim-<uuid>`): one hop from put to claim() instead
  /// of a wake-up and a claim round trip. Needs SUBSCRIBE and PUBLISH on
  /// that channel (without SUBSCRIBE, claims work by wake-ups as with
  /// false); producers need PUBLISH on it to hand off (else they wake).
  bool hand_off = true;
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
  /// time; a runner that dies frees it after this long. At most
  /// 2^53 - 1 ms (else error::invalid_argument, nothing sent).
  std::chrono::milliseconds lock_ttl{30000};
};

/// What a maintenance run did.
struct maintenance_report {
  /// false: another client held the maintenance lock; nothing was done.
  bool ran = false;
  std::int64_t requeued = 0;              ///< lapsed claims put back (stall counted)
  std::int64_t stalled = 0;               ///< lapsed claims dead-lettered (stalls exhausted)
  std::int64_t promoted = 0;              ///< due scheduled jobs made claimable
  std::int64_t held_released = 0;         ///< held puts applied (their claim had ended)
  std::int64_t unaccounted_requeued = 0;  ///< jobs in no state on two passes, requeued
  std::int64_t unaccounted_suspects = 0;  ///< in no state now; rechecked next run
  std::int64_t orphans_removed = 0;       ///< extension state of vanished jobs removed
  std::int64_t dead_workers = 0;          ///< workers whose registration lapsed, failed
  std::int64_t worker_jobs_requeued = 0;  ///< their claims put back (stall counted)
  std::int64_t worker_jobs_stalled = 0;   ///< their claims dead-lettered (stalls exhausted)
  job_counts counts;                      ///< after the run
  bool stats_published = false;
};

/// A job queue. Each job is claimed by one worker at a time; a worker
/// finishes it (optionally with a result), cancels it (back to the queue,
/// failure +1) or stalls it (out of circulation until retry()). A claim
/// that lapses (worker died or hung) is recovered by maintenance. run() is
/// the worker runner built on these: a registered worker with heartbeats, a
/// concurrency limit and a graceful stop.
///
/// Keys, channels and payloads are the contract's (feed.ids, feed.items,
/// feed.published, feed.claimed, feed.cancelled, feed.stalled,
/// feed.publishes, feed.finishes, `job.finish:[f]` with `id\0result`,
/// `feed.jobfinished:[f]\0<id>`); extensions sit beside them
/// (feed.attempts, feed.sleepers, feed.unaccounted, feed.maintenance,
/// channel feed.wake:[name]). Jobs put and claimed with the contract's
/// plain commands work with this class, and the reverse.
///
/// **Getting a handle**: open() checks an existing job queue,
/// create_or_open() creates it (with settings) when missing; the
/// constructor makes an unchecked handle without I/O.
///
/// **Batching**: claimers of one object share a dispatcher (one claim
/// script takes up to N jobs for N waiting coroutines), finishes and puts
/// issued in the same tick share one script call. Nothing ever blocks the
/// shared connection (no BRPOP): waiting claimers sleep until a wake-up
/// message or the next poll.
///
/// Copies, threading, lifetime and the errors common to every operation:
/// see detail::queue_base (put and put_many are documented there; a job
/// put's time goes to feed.published only with settings::published). When
/// the last copy is destroyed, pending claims and get_results complete with
/// operation_aborted and run_maintenance ends.
class job_queue : public detail::queue_base,
                  public detail::queue_handles<job_queue, job_queue_options> {
 public:
  /// A job queue's config (in `feed.config:[f]`, the job_config fields),
  /// as typed values. Unset fields (nullopt) mean "the default" when
  /// creating and "leave as it is" nowhere else: settings are written only
  /// by create_or_open (client::set_config changes one field). The scripts
  /// read the config on every call, so every client agrees and changes
  /// apply at once.
  struct settings {
    /// A claim (or its last heartbeat) older than this is lapsed:
    /// maintenance requeues it (counting a failure) or stalls it. At least
    /// 1 ms. Default 60 s.
    std::optional<std::chrono::milliseconds> claim_timeout;
    /// The queue's retry strategy: the default of every job that does not
    /// set its own (unset fields: 10 retries, 3 stalls, 2 s, 300 s).
    retry_strategy retry;
    /// The job queue that receives a dead-letter record for each job of
    /// this queue that runs out of retries or stalls. Empty: none.
    std::optional<std::string> dead_letter_queue;
    /// Publish typed job events (subscribe_events). Default false.
    std::optional<bool> events;
    /// How long a finish result is kept for get_result(). At least 1 ms.
    /// Default 5 minutes.
    std::optional<std::chrono::milliseconds> result_ttl;
    /// Index jobs by put time in feed.published, as the contract's put does.
    /// Default false (docs/jobs.md, "Why feed.published is off by default").
    std::optional<bool> published;
    /// At most this many jobs claimed per second across every client
    /// (job_config::rate_limit): 1 .. 1000000, 0 for no limit. Default: no
    /// limit.
    std::optional<std::int64_t> rate_limit;
    /// The queue is paused (job_config::paused): no claim hands out a job
    /// until resume(). Creating a queue paused is allowed. Default false.
    std::optional<bool> paused;

    /// The config fields (job_config names, the contract's string form) of
    /// the fields that are set.
    feed_config to_fields() const;
    /// Why to_fields() would be refused (config_field_problem's sentence
    /// for the first bad field), or empty when every set field is valid.
    std::string problem() const;
    /// Parses config fields; fields it does not know, and values the
    /// scripts would not use (a number that is not a decimal integer,
    /// ^-?[0-9]+$, within the field's range), stay unset: the scripts read
    /// them by the same rule and use the defaults too.
    static settings from_fields(const feed_config& fields);
  };

  /// An empty handle; only assign to it.
  job_queue() = default;
  /// An unchecked handle (no I/O): operations report feed_not_found /
  /// wrong_feed_type. Prefer open().
  job_queue(client& c, std::string name, job_queue_options opts = {});

  /// Reads the job queue's settings in one step. Completion
  /// `void(error_code, settings)`: fields not set in the config are
  /// nullopt (the defaults apply).
  template <class CompletionToken>
  auto read_settings(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, settings)>(
        std::forward<CompletionToken>(token), &job_queue::start_read_settings, *this);
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
  /// server; with hand_off, when no other claim of this object waits, only
  /// once its offer to puts is withdrawn, so a client stopped then leaves
  /// none), the common ones.
  ///
  /// Cancellation / lost replies: a cancelled claim completes with
  /// operation_aborted at once. A job that a script already in flight claims
  /// for it is handed to another waiting claimer of this object, or released
  /// back to the front of the queue (no failure counted). If the reply is
  /// lost (error::unknown_outcome, connection died), jobs may have been
  /// claimed on the server for nobody: they are recovered when their claim
  /// lapses (claim_timeout, by maintenance), with a failure counted.
  template <class CompletionToken>
  auto claim(std::chrono::milliseconds timeout, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, claimed_job)>(
        std::forward<CompletionToken>(token), &job_queue::start_claim, *this, timeout);
  }

  /// Finishes a claimed job (pass the claimed_job, or a claim_ref):
  /// removed from every structure, feed.finishes incremented. With a
  /// result, also PUBLISHes `id\0result` on `job.finish:[f]` and keeps it
  /// in `feed.jobfinished:[f]\0<id>` for the result_ttl setting (for
  /// get_result). Finishes issued in the same tick (or while one is in
  /// flight) share one script call; each succeeds or fails alone.
  ///
  /// Completion `void(error_code)`. Errors: invalid_id, item_too_large
  /// (result; before I/O), job_not_found (unknown, already finished or
  /// retracted), job_not_claimed (waiting or stalled), lost_claim (claimed
  /// under another token: this claim lapsed and the job was reclaimed, or
  /// it was claimed with plain commands), no_channel_permission, the common
  /// ones (unknown_outcome: it may have been finished; finishing again
  /// tells: job_not_found/lost_claim or success). Cancellation: before the
  /// script is sent nothing happens; after, it completes with
  /// operation_aborted and may have finished the job.
  template <class CompletionToken>
  auto finish(const claim_ref& claim, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &job_queue::start_finish, *this, claim,
                                                             std::optional<std::string>());
  }
  template <class CompletionToken>
  auto finish(const claim_ref& claim, std::string result, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token), &job_queue::start_finish, *this, claim,
        std::optional<std::string>(std::move(result)));
  }

  /// Finishes a claimed job as finish() does and, in the same script call,
  /// claims the next waiting job as claim() does: a worker loop that does
  /// not use run() takes each job without a round trip of its own. Calls
  /// made in the same tick (or while one is in flight) share one script
  /// call. It claims only on the server: jobs claimed ahead for this object
  /// (job_queue_options::prefetch) are left for claim().
  ///
  /// Completion `void(error_code, claimed_job)`:
  /// - success: `claim` is finished and the job passed is claimed;
  /// - error::queue_empty: `claim` IS finished, but no job was waiting (or
  ///   the queue is paused or at its rate limit); call claim() to wait;
  /// - the errors of finish() (invalid_id, item_too_large, job_not_found,
  ///   job_not_claimed, lost_claim, no_channel_permission, the common
  ///   ones): as there; no job is claimed for this call.
  ///
  /// Cancellation: before the script is sent nothing happens; after, it
  /// completes with operation_aborted, may have finished the job, and a
  /// job the script claimed for it is given back to the front of the queue
  /// (no failure counted). A lost reply (unknown_outcome) may have finished
  /// the job and claimed one for nobody, which is recovered when that claim
  /// lapses (claim_timeout), as for claim().
  template <class CompletionToken>
  auto finish_and_claim(const claim_ref& claim, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, claimed_job)>(
        std::forward<CompletionToken>(token), &job_queue::start_finish_and_claim, *this, claim,
        std::optional<std::string>());
  }
  template <class CompletionToken>
  auto finish_and_claim(const claim_ref& claim, std::string result, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, claimed_job)>(
        std::forward<CompletionToken>(token), &job_queue::start_finish_and_claim, *this, claim,
        std::optional<std::string>(std::move(result)));
  }

  /// Puts one job with options: scheduled (`run_at`, `delay`), with its own
  /// retry strategy, or under an explicit id that de-duplicates (an
  /// existing job with that id is updated under `opts.update`; a put for an
  /// id that is claimed now is held and applied when that claim ends, so one
  /// id never runs twice at once). One atomic script call per put (plain
  /// put() batches; use it when no option is needed).
  ///
  /// Completion `void(error_code, put_result)`. Errors: invalid_id (the
  /// id), item_too_large, invalid_argument (a retry strategy out of range),
  /// no_channel_permission, the common ones. Cancellation: as finish().
  template <class CompletionToken>
  auto put(std::string item, put_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, put_result)>(
        std::forward<CompletionToken>(token), &job_queue::start_put_with_options, *this,
        std::move(item), std::move(opts));
  }
  using detail::queue_base::put;

  /// Fails a claimed job with `error` (kept as its last error): its retry
  /// count and failure count go up by one; below max_retries it is
  /// scheduled again after the backoff (or at opts.retry_at), otherwise,
  /// or with opts.permanent, it becomes a dead letter (feed.stalled; a
  /// record `[id, data, error]` goes to the dead-letter queue if the queue
  /// names one). A put held for the job is applied after that.
  ///
  /// Completion `void(error_code, fail_result)`. Errors as finish(), and
  /// item_too_large for an error text over the item size limit.
  template <class CompletionToken>
  auto fail(const claim_ref& claim, std::string error, fail_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, fail_result)>(
        std::forward<CompletionToken>(token), &job_queue::start_fail, *this, claim,
        std::move(error), std::move(opts));
  }
  template <class CompletionToken>
  auto fail(const claim_ref& claim, std::string error, CompletionToken&& token) {
    return fail(claim, std::move(error), fail_options{}, std::forward<CompletionToken>(token));
  }

  /// Gives a claimed job back (contract "Cancel"): failure count +1, back to
  /// the end of the line. Completion `void(error_code, std::int64_t
  /// failures)`. Errors as finish().
  template <class CompletionToken>
  auto cancel(const claim_ref& claim, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::int64_t)>(
        std::forward<CompletionToken>(token), &job_queue::start_cancel, *this, claim);
  }

  /// Takes a claimed job out of circulation (contract "Stall"): into
  /// feed.stalled, failure count cleared, kept until retry() or retract().
  /// Completion `void(error_code)`. Errors as finish().
  template <class CompletionToken>
  auto stall(const claim_ref& claim, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &job_queue::start_stall, *this, claim);
  }

  /// Renews a claim: its claim time becomes now, so it does not lapse.
  /// Completion `void(error_code)`. Errors as finish().
  template <class CompletionToken>
  auto heartbeat(const claim_ref& claim, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token), &job_queue::start_heartbeat, *this, claim);
  }

  /// Renews many claims at once (a worker holding several jobs): one atomic
  /// script call per 1000 claims. Completion
  /// `void(error_code, std::vector<error_code>)`: the first error is the
  /// call's (invalid_id of any claim before any I/O, the common ones);
  /// otherwise the vector has one entry per claim, in order: success
  /// (renewed), job_not_found, job_not_claimed or lost_claim.
  /// Cancellation: as finish; renewals already sent may have happened.
  template <class CompletionToken>
  auto heartbeat_many(std::vector<claim_ref> claims, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code,
                                 std::vector<boost::system::error_code>)>(
        std::forward<CompletionToken>(token), &job_queue::start_heartbeat_many, *this,
        std::move(claims));
  }

  /// Ends the claim of job `id`, whoever holds it, from any client: the
  /// holder's token ends (its later finish, fail, cancel, stall, heartbeat
  /// or progress gets error::lost_claim) and the job ends as `opts` says:
  /// outcome cancelled as cancel() (back to the end of the line, failure
  /// count + 1), outcome failed as fail() with opts.error (retry after the
  /// backoff, or a dead letter when opts.permanent or out of retries, with
  /// the dead-letter record). A put held for the job is applied after that,
  /// as after every end of a claim. In the same atomic step the id is
  /// published on `job.abort:[name]` (always: subscribe_aborts() delivers
  /// it, so a runner can stop the handler) and, with the events setting,
  /// an `aborted` job event (plus `failed`, `retry_scheduled` or
  /// `dead_lettered` for outcome failed).
  ///
  /// Completion `void(error_code)`. Errors: job_not_claimed (the job is
  /// waiting, scheduled or stalled; nothing changed), job_not_found,
  /// invalid_id and item_too_large (opts.error) before any I/O,
  /// no_channel_permission (the user may not PUBLISH on `job.abort:[name]`,
  /// the queue's wake-up channel or, for a dead letter, the dead-letter
  /// queue's: nothing changed), the common ones. A job claimed with plain
  /// commands (no token) is aborted too. Cancellation: as finish; an abort
  /// already sent may still happen.
  template <class CompletionToken>
  auto abort(std::string id, abort_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &job_queue::start_abort, *this,
                                                             std::move(id), std::move(opts));
  }

  /// Reports progress on a claimed job: only the current claim holder may
  /// (same token check as heartbeat). The text is kept on the job
  /// (job_info::progress, read by get_job) until a later report replaces it
  /// or the job ends, and published as a `progress` job event (detail: the
  /// text) when the queue's events setting is on. It does not renew the
  /// claim (use heartbeat for that).
  ///
  /// Completion `void(error_code)`. Errors: lost_claim (the claim ended:
  /// lapsed, aborted, released), job_not_claimed, job_not_found,
  /// invalid_id and item_too_large (a text over config::max_item_size)
  /// before any I/O, no_channel_permission (events on and the user may not
  /// PUBLISH them: nothing stored), the common ones.
  template <class CompletionToken>
  auto progress(const claim_ref& claim, std::string text, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &job_queue::start_progress, *this,
                                                             claim, std::move(text));
  }

  /// Puts a stalled job back in the queue (contract "Retry").
  /// Completion `void(error_code)`. Errors: job_not_stalled (waiting or
  /// claimed), job_not_found, invalid_id, the common ones.
  template <class CompletionToken>
  auto retry(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token), &job_queue::start_retry, *this, std::move(id));
  }

  /// Removes a job in any state from every structure (contract "Retract").
  /// A worker holding it then gets job_not_found from finish.
  /// Completion `void(error_code)`. Errors: job_not_found, invalid_id, the
  /// common ones.
  template <class CompletionToken>
  auto retract(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token), &job_queue::start_retract, *this, std::move(id));
  }

  /// The failure count (contract getNumOfFailures).
  /// Completion `void(error_code, std::int64_t)`; job_not_found if unknown.
  template <class CompletionToken>
  auto failures(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::int64_t)>(
        std::forward<CompletionToken>(token), &job_queue::start_failures, *this, std::move(id));
  }

  /// A job with its item, state and failure count, read in one atomic
  /// step; nullopt when no live job has that id (never put, finished or
  /// retracted). A job that a plain-command client popped from feed.ids and
  /// has not yet added to feed.claimed reads as waiting. Completion
  /// `void(error_code, std::optional<job_info>)`. Errors: invalid_id
  /// (before any I/O), the common ones.
  template <class CompletionToken>
  auto get_job(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::optional<job_info>)>(
        std::forward<CompletionToken>(token), &job_queue::start_get_job, *this, std::move(id));
  }

  /// Every live job (any state) as get_job reads it, in one atomic step (a
  /// snapshot; on a large queue, one long script: prefer counts() or
  /// get_ids() for monitoring). Unordered. Completion
  /// `void(error_code, std::vector<job_info>)`.
  template <class CompletionToken>
  auto get_jobs(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<job_info>)>(
        std::forward<CompletionToken>(token), &job_queue::start_get_jobs, *this);
  }

  /// Scheduled jobs in run_at order, `count` per page (1..1000), starting
  /// at `cursor` (empty: the first page). Completion
  /// `void(error_code, job_page)`.
  template <class CompletionToken>
  auto get_scheduled(std::string cursor, std::size_t count, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, job_page)>(
        std::forward<CompletionToken>(token), &job_queue::start_list, *this,
        std::string("scheduled"), std::move(cursor), count);
  }

  /// Dead letters (feed.stalled) with their last error and counts, about
  /// `count` per page (SSCAN order; a job stalled or retried during the
  /// listing may be missed or seen twice). Completion
  /// `void(error_code, job_page)`.
  template <class CompletionToken>
  auto get_dead_letters(std::string cursor, std::size_t count, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, job_page)>(
        std::forward<CompletionToken>(token), &job_queue::start_list, *this, std::string("stalled"),
        std::move(cursor), count);
  }

  /// Ids of every live job, any state (contract: HKEYS feed.items).
  /// Completion `void(error_code, std::vector<std::string>)`.
  template <class CompletionToken>
  auto get_ids(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<std::string>)>(
        std::forward<CompletionToken>(token), &job_queue::start_get_ids, *this);
  }

  /// Counts per state, read atomically. Completion `void(error_code, job_counts)`.
  template <class CompletionToken>
  auto counts(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, job_counts)>(
        std::forward<CompletionToken>(token), &job_queue::start_counts, *this);
  }

  /// Pauses the queue: from now on no claim script hands out a job, for
  /// every client of the library and every claim path (claim(), prefetch
  /// top-ups); puts, finishes, fails and maintenance go on. Claims already
  /// made stay (jobs a process claimed ahead with prefetch are still handed
  /// to its workers). Waiting claimers keep waiting (their timeouts run).
  /// Stored as the config field `paused` = "1" (readable with
  /// read_settings()). Contract clients claim with plain commands and are
  /// not stopped. Idempotent. A config change: announced on `conffeed`
  /// (`name\0instance id`) as client::set_config does.
  ///
  /// Completion `void(error_code)`. Errors: no_channel_permission (the user
  /// may not PUBLISH on `conffeed`: nothing changes), invalid_name,
  /// feed_not_found, wrong_feed_type, the common ones.
  template <class CompletionToken>
  auto pause(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &job_queue::start_pause, *this);
  }

  /// Resumes a paused queue (clears `paused`) and publishes the queue's
  /// wake-up in the same atomic step, so waiting claimers of every client
  /// claim at once rather than at their next poll. Idempotent (a queue that
  /// is not paused gets the wake-up only). Announced on `conffeed` as pause()
  /// is.
  ///
  /// Completion `void(error_code)`. Errors: no_channel_permission (the user
  /// may not PUBLISH on `feed.wake:[name]` or `conffeed`: the queue stays
  /// paused),
  /// invalid_name, feed_not_found, wrong_feed_type, the common ones.
  template <class CompletionToken>
  auto resume(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &job_queue::start_resume, *this);
  }

  /// Calls `on_finished` for every job of this queue finished with a result
  /// from now on (by any client): the `job.finish:[f]` messages, split into
  /// id and result. A message that is not `id\0result` is ignored and
  /// counted (malformed_finish_events()).
  ///
  /// Completion `void(error_code, subscription)`, once the server confirmed
  /// the subscription (every finish after that is delivered; pub/sub is at
  /// most once: finishes during a subscriber reconnect are missed, see
  /// get_result for a durable wait). Keep the subscription: destroying it
  /// unsubscribes. Errors: invalid_name, subscribe_refused (ACL channel
  /// permissions; the server's text through with_diagnostics),
  /// client_stopped, operation_aborted on cancellation. The callback runs
  /// on the subscriber's executor (see thoonk::subscriber, "Delivery").
  template <class CompletionToken>
  auto subscribe_finished(std::function<void(const job_finished&)> on_finished,
                          CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, subscription)>(
        std::forward<CompletionToken>(token), &job_queue::start_subscribe_finished, *this,
        std::move(on_finished));
  }

  /// Calls `on_event` for every job event of this queue from now on (by any
  /// client), when the queue's `events` setting is on. Completion
  /// `void(error_code, subscription)` as subscribe_finished (same errors,
  /// same at-most-once delivery). A message that does not parse is ignored
  /// and counted in malformed_finish_events().
  template <class CompletionToken>
  auto subscribe_events(std::function<void(const job_event&)> on_event, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, subscription)>(
        std::forward<CompletionToken>(token), &job_queue::start_subscribe_events, *this,
        std::move(on_event));
  }

  /// Calls `on_abort(id)` for every job of this queue aborted from now on
  /// (abort(), by any client): the `job.abort:[name]` messages, sent
  /// whatever the events setting. Completion `void(error_code,
  /// subscription)` as subscribe_finished (same errors, same at-most-once
  /// delivery: an abort during a subscriber reconnect is missed, but the
  /// worker's next finish, heartbeat or progress still gets lost_claim). An
  /// empty message is ignored and counted in malformed_finish_events().
  template <class CompletionToken>
  auto subscribe_aborts(std::function<void(const std::string& id)> on_abort,
                        CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, subscription)>(
        std::forward<CompletionToken>(token), &job_queue::start_subscribe_aborts, *this,
        std::move(on_abort));
  }

  /// Finish messages subscribe_finished() ignored because they were not
  /// `id\0result` (written by some other client), for this object and its
  /// copies. Read it on the client's executor.
  std::uint64_t malformed_finish_events() const noexcept;

  /// Waits up to `timeout` for the result of job `id`, whether it was
  /// finished before or after the call (the result is kept for the
  /// result_ttl setting). Waits on `job.finish:[f]` through the subscriber
  /// and re-reads the stored result every poll interval (never blocks the
  /// shared connection). Jobs finished without a result have none.
  ///
  /// Completion `void(error_code, std::string result)`. Errors:
  /// error::result_timeout, invalid_name, invalid_id, transport errors.
  /// Cancellation: completes with operation_aborted; nothing changes.
  template <class CompletionToken>
  auto get_result(std::string id, std::chrono::milliseconds timeout, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::string)>(
        std::forward<CompletionToken>(token), &job_queue::start_get_result, *this, std::move(id),
        timeout);
  }

  /// Runs `handler` for the queue's jobs until stopped: the worker runner
  /// (docs/jobs.md "Workers and the runner"). It registers a worker in the
  /// queue's registry (run_options::worker_name, worker_ttl), then keeps up
  /// to run_options::concurrency handlers busy: each round is one script
  /// call that finishes the jobs just done and claims jobs for the idle
  /// slots. A handler's result finishes its job; an exception fails it
  /// (retried after the backoff, or a dead letter: permanent_job_error, or
  /// no retries left). A heartbeat on its own timer renews the registration
  /// and every lease the worker holds in one call; a claim found lost there,
  /// an abort() from any client, or a lapsed registration cancels the
  /// job's handler (job_context::cancelled, and its cancellation slot).
  /// While the queue is empty, paused or rate limited the runner waits for
  /// its wake-up (or the poll interval, or the due time) without polling
  /// the server in between.
  ///
  /// Stopping (graceful): cancel the operation (any
  /// cancellation type: a cancellation slot, `||` with a timer, ...) or let
  /// a signal of run_options::stop_signals arrive. No more jobs are claimed;
  /// jobs in flight finish within run_options::stop_timeout, then the rest
  /// are cancelled and go back to the front of the line with no failure
  /// counted; the registration is removed; then the operation completes.
  ///
  /// Completion `void(error_code, run_report)`: success after a stop asked
  /// for as above; otherwise the error that ended it: invalid_argument (bad
  /// options) and invalid_name (worker_name) before any I/O,
  /// worker_exists, feed_not_found / wrong_feed_type, no_*_permission,
  /// client_stopped (the client was stopped: the worker's jobs lapse with
  /// its registration), operation_aborted (the queue handle was closed).
  /// A dead connection does not end it: rounds and heartbeats are retried;
  /// if the registration lapses meanwhile, the worker registers again.
  ///
  /// Lifetimes: the job_queue (a copy is kept), the client and the signal
  /// set must outlive the operation. Handlers still running after the stop
  /// timeout may outlive it (their job_context stays valid).
  template <class CompletionToken>
  auto run(job_coroutine handler, run_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, run_report)>(
        std::forward<CompletionToken>(token), &job_queue::start_run, *this, std::move(handler),
        job_function{}, std::move(opts));
  }
  /// run() with a plain function handler (see job_function).
  template <class CompletionToken>
  auto run(job_function handler, run_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, run_report)>(
        std::forward<CompletionToken>(token), &job_queue::start_run, *this, job_coroutine{},
        std::move(handler), std::move(opts));
  }

  /// The workers registered in this queue (live or lapsed but not yet
  /// failed), with the claims each holds, read in one step. Completion
  /// `void(error_code, std::vector<worker_info>)`. Errors: the common ones.
  template <class CompletionToken>
  auto get_workers(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<worker_info>)>(
        std::forward<CompletionToken>(token), &job_queue::start_get_workers, *this);
  }

  /// Fails worker `name` now (worker liveness), whether it lapsed or
  /// not: every claim it holds ends as a lapsed lease does (a stall counted:
  /// back to the end of the line, or a dead letter past max_stalls), at
  /// once, and its registration goes; waiting claimers are woken. A runner
  /// still running under that name learns it at its next heartbeat (its
  /// handlers are cancelled) and registers again. Maintenance does the same
  /// for every worker whose registration lapsed. Completion
  /// `void(error_code, std::int64_t jobs_returned)`. Errors:
  /// worker_not_found, invalid_name (before any I/O), no_channel_permission,
  /// the common ones.
  template <class CompletionToken>
  auto fail_worker(std::string name, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::int64_t)>(
        std::forward<CompletionToken>(token), &job_queue::start_fail_worker, *this,
        std::move(name));
  }

  /// One maintenance run (contract "Maintenance", done properly), under the
  /// queue's maintenance lock: lapsed claims (older than claim_timeout)
  /// are requeued with a stall counted, or dead-lettered past max_stalls;
  /// due scheduled jobs become claimable; puts held for claims that ended
  /// without this library (plain commands) are applied;
  /// jobs found in feed.items but in no state are requeued when still so on
  /// the next run (two-pass); extension state of vanished jobs is removed;
  /// stats are published to the stats feed. Every step is a bounded script.
  ///
  /// Completion `void(error_code, maintenance_report)` (report.ran false:
  /// another runner holds the lock). Errors: the common ones. The lock is
  /// released before the run completes, also when it failed or was
  /// cancelled, so a process that runs maintenance once and exits leaves
  /// the queue free for the next runner (only if the release itself fails
  /// does the lock wait out its lock_ttl). Cancellation: stops between
  /// steps; every step done stays done.
  template <class CompletionToken>
  auto maintain(maintenance_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, maintenance_report)>(
        std::forward<CompletionToken>(token), &job_queue::start_maintain, *this, std::move(opts));
  }

  /// Runs maintain() every `interval` until cancelled or the queue object
  /// (all copies) is destroyed. Transport errors are retried on the next
  /// tick. Completion `void(error_code)`: operation_aborted when cancelled
  /// or closed; feed_not_found / wrong_feed_type when the queue disappears.
  template <class CompletionToken>
  auto run_maintenance(std::chrono::milliseconds interval, maintenance_options opts,
                       CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &job_queue::start_run_maintenance,
                                                             *this, interval, std::move(opts));
  }

 private:
  friend class detail::queue_handles<job_queue, job_queue_options>;
  void start_open(handler<job_queue> h);
  void start_create_or_open(settings s, handler<job_queue> h);
  void start_read_settings(handler<settings> h);
  void start_claim(std::chrono::milliseconds timeout, handler<claimed_job> h);
  void start_finish(claim_ref claim, std::optional<std::string> result, handler<> h);
  void start_finish_and_claim(claim_ref claim, std::optional<std::string> result,
                              handler<claimed_job> h);
  void start_cancel(claim_ref claim, handler<std::int64_t> h);
  void start_put_with_options(std::string item, put_options opts, handler<put_result> h);
  void start_fail(claim_ref claim, std::string error, fail_options opts, handler<fail_result> h);
  void start_list(std::string which, std::string cursor, std::size_t count, handler<job_page> h);
  void start_subscribe_events(std::function<void(const job_event&)> on_event,
                              handler<subscription> h);
  void start_stall(claim_ref claim, handler<> h);
  void start_heartbeat(claim_ref claim, handler<> h);
  void start_heartbeat_many(std::vector<claim_ref> claims,
                            handler<std::vector<boost::system::error_code>> h);
  void start_retry(std::string id, handler<> h);
  void start_retract(std::string id, handler<> h);
  void start_failures(std::string id, handler<std::int64_t> h);
  void start_get_job(std::string id, handler<std::optional<job_info>> h);
  void start_get_jobs(handler<std::vector<job_info>> h);
  void start_get_ids(handler<std::vector<std::string>> h);
  void start_counts(handler<job_counts> h);
  void start_subscribe_finished(std::function<void(const job_finished&)> on_finished,
                                handler<subscription> h);
  void start_get_result(std::string id, std::chrono::milliseconds timeout, handler<std::string> h);
  void start_maintain(maintenance_options opts, handler<maintenance_report> h);
  void start_run_maintenance(std::chrono::milliseconds interval, maintenance_options opts,
                             handler<> h);
  void start_abort(std::string id, abort_options opts, handler<> h);
  void start_progress(claim_ref claim, std::string text, handler<> h);
  void start_subscribe_aborts(std::function<void(const std::string&)> on_abort,
                              handler<subscription> h);
  void start_pause(handler<> h);
  void start_run(job_coroutine co, job_function fn, run_options opts, handler<run_report> h);
  void start_get_workers(handler<std::vector<worker_info>> h);
  void start_fail_worker(std::string name, handler<std::int64_t> h);
  void start_resume(handler<> h);
};

}  // namespace thoonk
