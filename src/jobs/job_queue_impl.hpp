// The state behind thoonk::job_queue (shared by its copies): what every
// queue has (queue_core: keys, put batchers, wake-ups), and the claim
// dispatcher, the finish batcher and the operations close() must end.
#pragma once

#include "detail/keys.hpp"
#include "jobs/batcher.hpp"
#include "jobs/fetcher.hpp"
#include "jobs/job_keys.hpp"
#include "jobs/pending.hpp"
#include "jobs/queue_core.hpp"
#include "jobs/reply_parse.hpp"
#include "scripts/script_exec.hpp"
#include "subscriber/notify.hpp"

#include <thoonk/job_queue.hpp>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace thoonk::detail {

struct finish_request {
  std::string id;
  std::int64_t token = 0;
  std::optional<std::string> result;
};

/// What one finish_and_claim got: the finish's status and, when it
/// finished, the job claimed for it (none when the queue had none).
struct finish_claim_outcome {
  boost::system::error_code status;
  std::optional<claimed_job> next;
};

class claim_taker;

class job_queue_impl final : public queue_core {
 public:
  template <class T>
  using awaitable = boost::asio::awaitable<T>;

  job_queue_impl(std::shared_ptr<client_core> c, std::string_view name, job_queue_options o);
  /// Creates the dispatcher and batchers (needs weak_from_this()).
  void init();
  /// Ends everything pending with operation_aborted. On the executor.
  void close() override;
  void poke() override {
    claims->notify();
    for (auto& [id, f] : wake_listeners) f();
  }
  /// Calls `f` (on the executor) at every poke: a wake-up message, a
  /// subscriber reconnect. Returns the id to remove it with.
  std::uint64_t add_wake_listener(std::function<void()> f) {
    wake_listeners.emplace_back(++last_listener, std::move(f));
    return last_listener;
  }
  void remove_wake_listener(std::uint64_t id) {
    std::erase_if(wake_listeners, [id](const auto& l) { return l.first == id; });
  }

  std::shared_ptr<job_queue_impl> shared() {
    return std::static_pointer_cast<job_queue_impl>(shared_from_this());
  }

  // ---- script calls used by the dispatcher and batchers ------------------
  static awaitable<op_result<std::vector<claimed_job>>> claim_batch(
      std::shared_ptr<job_queue_impl> self, std::size_t n);
  /// Gives claims back (no failure counted); how many were still held.
  /// Errors count as none given back: the claims then lapse with their
  /// leases and maintenance requeues them.
  static awaitable<std::uint64_t> release(std::shared_ptr<job_queue_impl> self,
                                          std::vector<claimed_job> js);
  /// release() for the claim fetcher, which ignores the count.
  static awaitable<void> give_back(std::shared_ptr<job_queue_impl> self,
                                   std::vector<claimed_job> js);
  static awaitable<op_result<std::vector<error_code>>> finish_batch(
      std::shared_ptr<job_queue_impl> self, std::vector<finish_request> reqs);
  /// Finishes the jobs and claims one for each that finished, in one script
  /// call (jobs/finish_claim.lua).
  static awaitable<op_result<std::vector<finish_claim_outcome>>> finish_claim_batch(
      std::shared_ptr<job_queue_impl> self, std::vector<finish_request> reqs);
  static awaitable<void> prepare(std::shared_ptr<job_queue_impl> self);
  /// Renews claims (validated here; chunks of 1000 per script call).
  static awaitable<op_result<std::vector<error_code>>> heartbeat_batch(
      std::shared_ptr<job_queue_impl> self, std::vector<claim_ref> claims);
  /// Per-job statuses of job_finish / job_heartbeat as error codes.
  static std::vector<error_code> claim_statuses(const resp3::value& v);
  /// The error code of one such status (0 success, 1 job_not_found,
  /// 2 job_not_claimed, 3 lost_claim, 4 no_channel_permission).
  static error_code claim_status(std::int64_t s);
  /// The jobs of a claim_jobs reply (includes/claims.lua) in `e` from
  /// `first` on: {id, item, failures, token} per job; when the reply says
  /// when to ask again (one more value), `*due` is set to it (epoch ms,
  /// 0: at a wake-up).
  static std::vector<claimed_job> parse_claims(resp3::value_list& e, std::size_t first,
                                               std::optional<std::int64_t>* due);
  /// Fails a claimed job (jobs/fail.lua) held by `worker` ('' for none).
  static awaitable<op_result<fail_result>> fail_job(std::shared_ptr<job_queue_impl> self,
                                                    claim_ref c, std::string text, fail_options o,
                                                    std::string worker);

  /// Runs a job script with the job key layout.
  awaitable<std::tuple<op_status, resp3::value>> call(const script& s,
                                                      std::vector<std::string> args);
  /// Runs a script that can make dead letters (jobs/fail.lua,
  /// maintenance/expire.lua): the dead-letter queue's keys follow the job
  /// layout and its name and wake-up channel follow `args`. The scripts
  /// check the name against the config and report a different one without
  /// doing anything; then it runs again with that one (and remembers it).
  /// `after` goes after the dead-letter queue's arguments.
  awaitable<std::tuple<op_status, resp3::value>> call_with_dlq(const script& s,
                                                               std::vector<std::string> args,
                                                               std::vector<std::string> after);

  // ---- the worker registry (workers.cpp) ----------------------------------
  struct fail_worker_result {
    std::int64_t workers = 0, requeued = 0, dead_lettered = 0;
  };
  /// jobs/fail_worker.lua: fails worker `name`, or (empty) up to `batch`
  /// workers whose registration lapsed.
  static awaitable<op_result<fail_worker_result>> fail_workers(std::shared_ptr<job_queue_impl> self,
                                                               std::string name, std::size_t batch);

  // ---- maintenance (maintenance.cpp) --------------------------------------
  static awaitable<op_result<maintenance_report>> maintain(std::shared_ptr<job_queue_impl> self,
                                                           maintenance_options opts);
  static awaitable<op_result<>> run_maintenance(std::shared_ptr<job_queue_impl> self,
                                                std::chrono::milliseconds interval,
                                                maintenance_options opts);

  /// In cluster mode: whether queue `dlq`'s keys hash to another slot than
  /// this queue's, so that no script can reach both (error::cluster_cross_slot).
  bool other_slot(std::string_view dlq) const;

  /// The dead-letter queue as last read from the config; nullopt before
  /// the first call_with_dlq (the first one that meets a configured queue
  /// then costs one more round trip).
  std::optional<std::string> dead_letter_queue;

  /// A timer close() cancels (waits of get_result and run_maintenance).
  void track(const std::shared_ptr<jobs::pending<std::string>>& p);

  /// The key of the job layout at `i`.
  const std::string& key(jobs::job_keys::index i) const { return keys[i]; }

  /// `feed.maintenance:[f]`: the maintenance lock (SET NX PX).
  std::string lock_key;
  /// `job.finish:name` (docs/contract.md).
  std::string finish_channel;
  job_queue_options opts;
  std::shared_ptr<jobs::fetcher<claimed_job>> claims;
  /// The hand-off to waiting claim() calls (null with hand_off = false).
  std::shared_ptr<claim_taker> taker;
  std::shared_ptr<jobs::batcher<finish_request, error_code>> finishes;
  std::shared_ptr<jobs::batcher<finish_request, finish_claim_outcome>> finish_claims;
  std::vector<std::weak_ptr<jobs::pending<std::string>>> tracked;
  std::vector<std::pair<std::uint64_t, std::function<void()>>> wake_listeners;
  std::uint64_t last_listener = 0;
  /// Finish messages subscribe_finished ignored (not `id\0result`).
  std::shared_ptr<std::uint64_t> malformed_finishes = std::make_shared<std::uint64_t>(0);
};

/// invalid_name unless `name` can name a worker (the rules of ids, at most
/// 200 bytes).
boost::system::error_code validate_worker_name(const config& cfg, std::string_view name);
/// Jitter of a retry's backoff, in [0, 1) (jobs/fail.lua, jobs/abort.lua).
double backoff_jitter();

// Shared by the job_queue operations (job_queue_ops_*.cpp, job_engine.cpp).
job_queue_impl& impl_of(const std::shared_ptr<queue_core>& core);
std::shared_ptr<job_queue_impl> shared_impl(const std::shared_ptr<queue_core>& core);
/// A new job_queue_impl, initialised: a job_queue handle's state.
std::shared_ptr<queue_core> make_job_queue(const std::shared_ptr<client_core>& c,
                                           std::string_view name, job_queue_options o);
/// invalid_name (the queue's) or invalid_id, before any I/O.
boost::system::error_code check_id(const job_queue_impl& impl, std::string_view id);
/// A script of one job: `args` after the id; the reply, or the status.
boost::asio::awaitable<op_result<resp3::value>> job_script(std::shared_ptr<job_queue_impl> impl,
                                                           const script& s, std::string id,
                                                           std::vector<std::string> args);
/// A job script whose reply the caller does not need.
boost::asio::awaitable<op_result<>> job_script_status(std::shared_ptr<job_queue_impl> impl,
                                                      const script& s, std::string id,
                                                      std::vector<std::string> args);
/// Subscribes to one of the queue's channels (subscribe_finished,
/// subscribe_events): each message is split into one Event, reused (its
/// strings keep their capacity, so a steady stream allocates nothing per
/// message), by `split` (false: malformed, counted in malformed_finishes)
/// and handed to `f`. The subscriber completes `h` and fills its
/// diagnostics.
template <class Event, class Split>
void subscribe_split(detail::client_core& c, job_queue_impl& impl, const std::string& channel,
                     Split split, std::function<void(const Event&)> f,
                     op_handler<void(boost::system::error_code, subscription)> h) {
  if (impl.name_ec) {
    post_handler(std::move(h), c.get_executor(), impl.name_ec, subscription{});
    return;
  }
  auto event = std::make_shared<Event>();
  auto cb = [event, split, malformed = impl.malformed_finishes,
             f = std::move(f)](const message& m) {
    if (!split(m.payload, *event)) {
      ++*malformed;
      return;
    }
    f(*event);
  };
  if (h.diag)
    subscribe_notifications(c, channel, std::move(cb),
                            capture_diagnostics(*h.diag, std::move(h.handler)));
  else subscribe_notifications(c, channel, std::move(cb), std::move(h.handler));
}

/// One job as includes/describe.lua `describe` returns it (14 values).
job_info parse_job(resp3::value* g);
/// The jobs of an inspect or list reply, from element `first`.
std::vector<job_info> parse_jobs(resp3::value&& v, std::size_t first = 0);
/// The counts of jobs/read.lua's 'counts' query (waiting, claimed, stalled,
/// items, puts, finishes, scheduled, held) into `out`; false, and `out`
/// unchanged, when the reply has fewer than 8 elements.
bool parse_counts(const resp3::value& v, job_counts& out);

}  // namespace thoonk::detail
