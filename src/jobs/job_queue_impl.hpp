// The state behind thoonk::job_queue (shared by its copies): key names,
// the claim dispatcher, the put and finish batchers, the wake-up
// subscription and the list of operations close() must end.
#pragma once

#include "jobs/common.hpp"
#include "jobs/job_keys.hpp"
#include "jobs/wake.hpp"

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

class job_queue_impl : public std::enable_shared_from_this<job_queue_impl> {
 public:
  using error_code = boost::system::error_code;
  template <class T>
  using awaitable = boost::asio::awaitable<T>;

  job_queue_impl(client& c, std::string name, job_queue_options o);
  /// Creates the dispatcher and batchers (needs weak_from_this()).
  void init();
  /// Ends everything pending with operation_aborted. On the executor.
  void close();

  // ---- script calls used by the dispatcher and batchers ------------------
  static awaitable<std::tuple<error_code, std::vector<std::string>>> put_batch(
      std::shared_ptr<job_queue_impl> self, bool high, std::vector<std::string> items);
  static awaitable<std::tuple<error_code, std::vector<claimed_job>>> claim_batch(
      std::shared_ptr<job_queue_impl> self, std::size_t n);
  static awaitable<void> release(std::shared_ptr<job_queue_impl> self, std::vector<claimed_job> js);
  static awaitable<std::tuple<error_code, std::vector<error_code>>> finish_batch(
      std::shared_ptr<job_queue_impl> self, std::vector<finish_request> reqs);
  static awaitable<void> prepare(std::shared_ptr<job_queue_impl> self);
  /// Renews claims (validated here; chunks of 1000 per script call).
  static awaitable<std::tuple<error_code, std::vector<error_code>>> heartbeat_batch(
      std::shared_ptr<job_queue_impl> self, std::vector<claim_ref> claims);
  /// Per-job statuses of job_finish / job_heartbeat as error codes.
  static std::vector<error_code> claim_statuses(const resp3::value& v);

  /// Runs a job script with the job key layout.
  awaitable<std::tuple<error_code, resp3::value>> call(const script& s,
                                                       std::vector<std::string> args);

  // ---- maintenance (maintenance.cpp) --------------------------------------
  static awaitable<std::tuple<error_code, maintenance_report>> maintain(
      std::shared_ptr<job_queue_impl> self, maintenance_options opts);
  static awaitable<std::tuple<error_code>> run_maintenance(std::shared_ptr<job_queue_impl> self,
                                                           std::chrono::milliseconds interval,
                                                           maintenance_options opts);

  /// A timer close() cancels (waits of get_result and run_maintenance).
  void track(const std::shared_ptr<jobs::pending<std::string>>& p);

  client& cl;
  error_code name_ec;
  jobs::job_keys k;
  job_queue_options opts;
  std::shared_ptr<jobs::fetcher<claimed_job>> claims;
  std::shared_ptr<jobs::batcher<std::string, std::string>> puts[2];
  std::shared_ptr<jobs::batcher<finish_request, error_code>> finishes;
  jobs::wake_subscription wake;
  std::vector<std::weak_ptr<jobs::pending<std::string>>> tracked;
  bool closed = false;
};

}  // namespace thoonk::detail
