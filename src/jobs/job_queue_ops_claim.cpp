// thoonk::job_queue's claims and the claim holder's operations besides the
// finish (job_queue_ops_finish.cpp): claim, cancel, stall, heartbeat.
// Claims wait in the impl's claim fetcher (jobs/fetcher.hpp), heartbeats go
// through its batcher.
#include "jobs/job_queue_ops.hpp"

namespace thoonk {

// ---- claims and the claimed job's operations --------------------------------------

void job_queue::start_claim(std::chrono::milliseconds timeout, handler<claimed_job> h) {
  // No coroutine per claim: the waiter holds h (a job claimed ahead is
  // handed out at once).
  if (core_->name_ec) {
    detail::post_handler(std::move(h), client_core_->get_executor(), core_->name_ec, claimed_job{});
    return;
  }
  detail::impl_of(core_).claims->wait(timeout, std::move(h.handler), h.diag);
}

void job_queue::start_cancel(claim_ref claim, handler<std::int64_t> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               claim_ref c) -> asio::awaitable<op_result<std::int64_t>> {
    std::vector<std::string> args{std::to_string(c.token), impl->wake_channel,
                                  detail::unix_ms_string()};
    auto [st, v] =
        co_await detail::job_script(impl, scripts::jobs_cancel(), std::move(c.id), std::move(args));
    co_return std::tuple{std::move(st), st ? std::int64_t{0} : as_int(v)};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(claim)), std::move(h));
}

void job_queue::start_stall(claim_ref claim, handler<> h) {
  std::vector<std::string> args{std::to_string(claim.token), detail::unix_ms_string(),
                                core_->wake_channel};
  detail::spawn_op(client_core_,
                   detail::job_script_status(detail::shared_impl(core_), scripts::jobs_stall(),
                                             std::move(claim.id), std::move(args)),
                   std::move(h));
}

void job_queue::start_heartbeat(claim_ref claim, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, claim_ref c) -> asio::awaitable<op_result<>> {
    std::vector<claim_ref> one{std::move(c)};
    auto [st, statuses] = co_await job_queue_impl::heartbeat_batch(impl, std::move(one));
    if (st) co_return std::tuple{std::move(st)};
    co_return std::tuple{op_status(statuses.at(0))};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(claim)), std::move(h));
}

void job_queue::start_heartbeat_many(std::vector<claim_ref> claims,
                                     handler<std::vector<error_code>> h) {
  detail::spawn_op(client_core_,
                   job_queue_impl::heartbeat_batch(detail::shared_impl(core_), std::move(claims)),
                   std::move(h));
}

}  // namespace thoonk
