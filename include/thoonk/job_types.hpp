// The value types of the job engine (docs/jobs.md): claims, put options
// (scheduling, de-duplication by id, retry strategies), failure options,
// what reads return and the typed job events. No I/O here; job_queue.hpp
// has the operations.
#pragma once

#include <thoonk/completion.hpp>
#include <thoonk/export.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace thoonk {

/// Milliseconds since the Unix epoch (system clock): when a job runs
/// (`run_at`), when a retry is due. The server's clock is not used: the
/// client that puts or fails a job supplies the time, as it does for every
/// other time the library stores.
using epoch_ms = std::int64_t;

/// Now, as epoch_ms.
inline epoch_ms now_epoch_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// A claim a worker holds: the job id and its claim token. finish, fail,
/// cancel, stall and heartbeat take one; a claimed_job is one.
///
/// The constructors are declared on purpose, so a claim_ref is not an
/// aggregate: g++ 12 destroys an aggregate temporary with a std::string
/// member twice when it is built inside a co_await expression
/// (`co_await q.finish(claim_ref(id, token), ...)` would crash;
/// docs/threading.md, "g++ 12 and temporaries inside co_await").
struct THOONK_API claim_ref {
  claim_ref() = default;
  /// A claim of job `job_id` under `claim_token` (the token async_claim() returned).
  claim_ref(std::string job_id, std::int64_t claim_token)
      : id(std::move(job_id)), token(claim_token) {}

  std::string id;  ///< the job id
  /// The claim token: the attempt number (1 for the first claim; it grows
  /// with every claim of this id and may skip values). finish/cancel/stall/
  /// heartbeat must present it; once the claim ended (lapsed and
  /// requeued, cancelled, stalled, retracted) it is refused with
  /// error::lost_claim.
  std::int64_t token = 0;
};

/// A job handed to a worker by async_claim(): its claim (id and token), item and
/// failure count. Pass it to finish/fail/cancel/stall/heartbeat as it is.
struct THOONK_API claimed_job : claim_ref {
  std::string item;  ///< the job's payload
  /// The job's failure count (feed.cancelled: cancels, failures and lapsed
  /// leases) when it was claimed.
  std::int64_t failures = 0;
};

/// How often a job is retried and how long it waits in between. Every
/// field left unset takes the queue's default (job_queue::settings, whose
/// own defaults are 10, 3, 2 s, 300 s).
struct THOONK_API retry_strategy {
  /// A failure (async_fail()) that brings the job's retry count to this makes it
  /// a dead letter; below it, the job is scheduled again after a backoff.
  /// At least 1: with 1 the first failure is final.
  std::optional<std::int64_t> max_retries;
  /// A lapsed lease that brings the job's stall count to this makes it a
  /// dead letter; below it, the job goes back to the queue at once.
  /// At least 1.
  std::optional<std::int64_t> max_stalls;
  /// The wait after the first failure; it doubles with every failure up to
  /// max_backoff, minus up to 20 % jitter, never below min_backoff.
  /// At least 0.
  std::optional<std::chrono::milliseconds> min_backoff;
  /// The longest wait between retries. At least min_backoff.
  std::optional<std::chrono::milliseconds> max_backoff;

  friend bool operator==(const retry_strategy&, const retry_strategy&) = default;
};

/// When a put names an existing job (put_options::id), how it changes it
/// (update flags). A put for an id that no job has adds the job
/// whatever the flags.
struct THOONK_API update_flags {
  /// The item: replaced, or kept when the put has none.
  enum class data_mode : std::uint8_t {
    replace,  ///< the put's item replaces the job's
    keep,     ///< the job keeps its item
  };
  /// The run-at time: set always, only if earlier, or only if later.
  enum class run_at_mode : std::uint8_t {
    always,      ///< the put's run_at replaces the job's
    if_later,    ///< only when later than the job's
    if_earlier,  ///< only when earlier than the job's
    never,       ///< the job keeps its run_at
  };
  /// The retry strategy: replaced or kept.
  enum class strategy_mode : std::uint8_t {
    replace,  ///< the put's retry strategy (unset: the queue's) replaces the job's
    keep,     ///< the job keeps its retry strategy
  };
  /// The failure and retry counters: kept or reset.
  enum class counters_mode : std::uint8_t {
    keep,   ///< retry count, stall count and failure count stay
    reset,  ///< all three go back to 0 (the last error stays readable)
  };
  data_mode data = data_mode::replace;              ///< how the item is updated
  run_at_mode run_at = run_at_mode::always;         ///< how the run-at time is updated
  strategy_mode strategy = strategy_mode::replace;  ///< how the retry strategy is updated
  counters_mode counters = counters_mode::keep;     ///< how the counters are updated

  friend bool operator==(const update_flags&, const update_flags&) = default;
};

/// Options of job_queue::async_put(item, put_options, token).
struct THOONK_API put_options {
  /// The job's id. Unset: a new id is made (never de-duplicated). Set: the
  /// put de-duplicates: an existing job with this id is updated under
  /// `update` instead of a second one being added; a job with this id that
  /// is claimed right now gets the put **held** until that claim ends.
  std::optional<std::string> id;
  /// When the job may run (epoch ms). Unset, or not after now: at once.
  /// Later: the job is *scheduled* and becomes claimable at run_at.
  /// Times (run_at, delay, now + delay) beyond +/-(2^53 - 1) ms, what a
  /// Lua number holds exactly, are error::invalid_argument before any I/O.
  std::optional<epoch_ms> run_at;
  /// Or: run this long after now (ignored when run_at is set, but checked).
  std::optional<std::chrono::milliseconds> delay;
  /// The job's own retry strategy (unset fields: the queue's defaults).
  std::optional<retry_strategy> retry;
  /// How a put for an existing id changes it.
  update_flags update;
  /// High priority: next out rather than end of the line (for a job that is
  /// claimable at once; a scheduled job joins the end of the line when due).
  bool high_priority = false;
};
template <>
inline constexpr bool is_operation_argument_v<put_options> = true;

/// What a put with options did.
struct THOONK_API put_result {
  /// What the put did.
  enum class outcome_t : std::uint8_t {
    added,    ///< a new job
    updated,  ///< an existing job (waiting, scheduled or stalled) was updated
    held,     ///< the id is claimed: the put waits for that claim to end
  };
  /// Shorthands: `r.outcome == put_result::held`.
  static constexpr outcome_t added = outcome_t::added;
  static constexpr outcome_t updated = outcome_t::updated;  ///< `outcome_t::updated`
  static constexpr outcome_t held = outcome_t::held;        ///< `outcome_t::held`

  std::string id;                        ///< the job id (generated, or the one given)
  outcome_t outcome = outcome_t::added;  ///< what the put did
};

/// Options of job_queue::async_fail.
struct THOONK_API fail_options {
  /// Retry at this time (epoch ms) instead of after the backoff (still
  /// counted against max_retries). Beyond +/-(2^53 - 1) ms:
  /// error::invalid_argument before any I/O.
  std::optional<epoch_ms> retry_at;
  /// A permanent error: no retry, the job becomes a dead letter at once.
  bool permanent = false;
};
template <>
inline constexpr bool is_operation_argument_v<fail_options> = true;

/// Options of job_queue::async_abort: how a job whose claim is ended by another
/// client (or by the worker itself) ends.
struct THOONK_API abort_options {
  /// What becomes of the aborted job.
  enum class outcome_t : std::uint8_t {
    /// As async_cancel(): back to the end of the line, failure count + 1, no
    /// retry counted, no backoff.
    cancelled,
    /// As async_fail() with `error`: retry count and failure count + 1; retried
    /// after the backoff below max_retries, else (or with `permanent`) a
    /// dead letter.
    failed,
  };
  /// Shorthands: `abort_options{abort_options::failed, "why"}`.
  static constexpr outcome_t cancelled = outcome_t::cancelled;
  static constexpr outcome_t failed = outcome_t::failed;  ///< `outcome_t::failed`

  outcome_t outcome = outcome_t::cancelled;  ///< what becomes of the job
  /// The error kept as the job's last error (outcome failed; ignored for
  /// cancelled). At most config::max_item_size bytes.
  std::string error;
  /// outcome failed: no retry, the job becomes a dead letter at once.
  bool permanent = false;
};
template <>
inline constexpr bool is_operation_argument_v<abort_options> = true;

/// What async_fail() did.
struct THOONK_API fail_result {
  /// What became of the failed job.
  enum class outcome_t : std::uint8_t {
    retry_scheduled,  ///< the job runs again at `run_at`
    dead_lettered,    ///< out of retries (or permanent): in feed.stalled
  };
  /// Shorthands: `r.outcome == fail_result::dead_lettered`.
  static constexpr outcome_t retry_scheduled = outcome_t::retry_scheduled;
  /// `outcome_t::dead_lettered`.
  static constexpr outcome_t dead_lettered = outcome_t::dead_lettered;

  outcome_t outcome = outcome_t::retry_scheduled;  ///< what became of the job
  /// When the retry is due (epoch ms); 0 for a dead letter.
  epoch_ms run_at = 0;
  /// The job's retry count after this failure.
  std::int64_t retry_count = 0;
};

/// Where a job is (docs/jobs.md §2).
enum class job_state {
  waiting,    ///< in feed.ids, claimable
  claimed,    ///< in feed.claimed: a worker holds it
  stalled,    ///< in feed.stalled: out of circulation (a dead letter) until retry()
  scheduled,  ///< in feed.scheduled, claimable from its run_at
};

/// A put held for a claimed job (applied when the claim ends).
struct THOONK_API held_put {
  std::optional<std::string> item;  ///< unset: the job keeps its item
  epoch_ms run_at = 0;              ///< the run-at time to apply (epoch ms; 0: none)
  update_flags update;              ///< how the held put updates the job
};

/// A job as get_job / get_jobs / the listings read it (in one atomic step).
struct THOONK_API job_info {
  std::string id;                        ///< the job id
  std::string item;                      ///< the job's payload
  job_state state = job_state::waiting;  ///< the job's state
  /// The failure count (feed.cancelled): cancels, failures, lapsed leases.
  std::int64_t failures = 0;
  /// Scheduled: when it becomes claimable (epoch ms); otherwise 0.
  epoch_ms run_at = 0;
  /// Failures counted against max_retries (async_fail()).
  std::int64_t retry_count = 0;
  /// Lapsed leases counted against max_stalls.
  std::int64_t stall_count = 0;
  /// The job's own strategy (unset fields: the queue's defaults apply).
  retry_strategy retry;
  /// The error of the last async_fail() or stall, empty if none.
  std::string last_error;
  /// A put waiting for this job's claim to end.
  std::optional<held_put> held;
  /// The last progress a worker reported for it (job_queue::async_progress),
  /// empty if none. Kept across retries until the job ends (finish,
  /// retract) or a later report replaces it.
  std::string progress;
};

/// One page of a listing (get_scheduled, get_dead_letters).
struct THOONK_API job_page {
  std::vector<job_info> jobs;  ///< the jobs of this page, in the listing's order
  /// Pass it back for the next page; empty when this was the last one.
  std::string next;
};

/// A finish event of a job queue (subscribe_finished): a job finished with
/// a result. The contract's payload `id\0result` on `job.finish:[f]`,
/// split; the result may itself contain NUL bytes.
struct THOONK_API job_finished {
  std::string id;      ///< the finished job's id
  std::string result;  ///< its result
};

/// A job event (subscribe_events), published on `job.event:[f]` by the
/// scripts when the queue's `events` setting is on.
struct THOONK_API job_event {
  /// What happened to the job.
  enum class kind_t : std::uint8_t {
    put,              ///< a new job (detail: run_at if scheduled, else empty)
    updated,          ///< a put with an id updated a job
    held,             ///< a put with an id was held (the id is claimed)
    claimed,          ///< detail: the claim token
    finished,         ///< finished (with or without a result)
    failed,           ///< fail() or a lapsed lease; detail: the error
    retry_scheduled,  ///< detail: run_at (epoch ms)
    stalled,          ///< a lapsed lease was counted; detail: the stall count
    dead_lettered,    ///< out of retries or stalls; detail: the last error
    promoted,         ///< a scheduled job became claimable
    progress,         ///< the claim holder reported progress; detail: the progress text
    aborted,          ///< job_queue::abort ended its claim; detail: "cancelled" or "failed"
  };
  kind_t kind = kind_t::put;  ///< which event this is
  std::string id;             ///< the job id
  std::string detail;
};

/// The event kind's name as published ("put", "retry_scheduled", ...).
THOONK_API std::string_view to_string(job_event::kind_t k) noexcept;

/// Counts per state and the contract's counters.
struct THOONK_API job_counts {
  std::int64_t waiting = 0;    ///< LLEN feed.ids
  std::int64_t claimed = 0;    ///< ZCARD feed.claimed
  std::int64_t stalled = 0;    ///< SCARD feed.stalled
  std::int64_t items = 0;      ///< HLEN feed.items (waiting, claimed and stalled jobs)
  std::int64_t puts = 0;       ///< feed.publishes
  std::int64_t finishes = 0;   ///< feed.finishes
  std::int64_t scheduled = 0;  ///< ZCARD feed.scheduled
  std::int64_t held = 0;       ///< puts held for claimed jobs
};

}  // namespace thoonk
