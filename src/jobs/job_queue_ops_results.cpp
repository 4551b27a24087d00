// thoonk::job_queue's results: subscribe_finished (job.finish messages)
// and get_result, which waits for a job's stored result.
#include "jobs/job_queue_ops.hpp"

#include "subscriber/notify.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

namespace thoonk {

namespace detail {
namespace {

// Splits a `job.finish` payload, `id\0result`; false when it has no NUL
// or an empty id.
bool split_finish(std::string_view payload, job_finished& out) {
  const auto nul = payload.find('\0');
  if (nul == std::string_view::npos || nul == 0) return false;
  out.id.assign(payload.substr(0, nul));
  out.result.assign(payload.substr(nul + 1));
  return true;
}

}  // namespace
}  // namespace detail

// ---- results ----------------------------------------------------------------------

void job_queue::start_subscribe_finished(std::function<void(const job_finished&)> on_finished,
                                         handler<subscription> h) {
  auto& impl = detail::impl_of(core_);
  detail::subscribe_split<job_finished>(*client_core_, impl, impl.finish_channel,
                                        &detail::split_finish, std::move(on_finished),
                                        std::move(h));
}

void job_queue::start_get_result(std::string id, std::chrono::milliseconds timeout,
                                 handler<std::string> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string id,
               std::chrono::milliseconds timeout) -> asio::awaitable<op_result<std::string>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{op_status(ec), std::string{}};
    if (impl->closed)
      co_return std::tuple{op_status(asio::error::operation_aborted), std::string{}};
    const auto deadline = timeout == std::chrono::milliseconds::max()
                              ? clock_type::time_point::max()
                              : clock_type::now() + std::max(timeout, std::chrono::milliseconds(0));
    auto p = std::make_shared<pending<std::string>>(impl->cl.get_executor());
    impl->track(p);

    // 1. Listen on job.finish (so a finish from now on is seen), 2. read the
    // stored result (a finish before now), 3. re-read every poll interval
    // (a message lost in a subscriber reconnect).
    auto cb = [p, id](const message& m) {
      job_finished ev;
      if (!detail::split_finish(m.payload, ev) || ev.id != id) return;
      p->complete({}, std::move(ev.result));
    };
    // Waiting for the subscription is bounded (a subscriber that cannot
    // connect, or may not subscribe, must not hold the caller): without it
    // we still poll.
    subscription sub;
    {
      using namespace asio::experimental::awaitable_operators;
      auto soon = clock_type::now() + std::chrono::seconds(1);
      asio::steady_timer limit(impl->cl.get_executor(), std::min(deadline, soon));
      auto r = co_await (detail::subscribe_notifications(impl->cl, impl->finish_channel,
                                                         std::move(cb), use_nothrow) ||
                         limit.async_wait(use_nothrow));
      if (r.index() == 0) sub = std::move(std::get<1>(std::get<0>(r)));
    }
    const std::string key = impl->names.job_result_key(id);
    for (;;) {
      if (p->done) break;
      request req;
      req.push("LINDEX", key, 0);
      exec_options eo;
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      // Not the caller's remaining time: when waiting for the subscription
      // used it up, this last read must still get an answer (result or
      // result_timeout), not a request_timeout of its own.
      eo.timeout =
          std::clamp(left, std::chrono::milliseconds(1000), std::chrono::milliseconds(60000));
      auto [ec, resp] = co_await detail::exec_co(impl->cl, req, key, eo);
      if (p->done) break;
      if (ec) co_return std::tuple{op_status(ec), std::string{}};
      if (!resp.empty() && resp[0].is_error())
        co_return std::tuple{detail::reply_status(resp[0]), std::string{}};
      if (!resp.empty() && resp[0].is_string())
        co_return std::tuple{op_status{}, std::move(resp[0].str)};
      auto now = clock_type::now();
      if (now >= deadline) co_return std::tuple{op_status(error::result_timeout), std::string{}};
      auto next =
          deadline - now > impl->opts.poll_interval ? now + impl->opts.poll_interval : deadline;
      p->timer.expires_at(next);
      auto [wec] = co_await p->timer.async_wait(use_nothrow);
      if (p->done) break;
      if (wec) co_return std::tuple{op_status(asio::error::operation_aborted), std::string{}};
    }
    co_return std::tuple{op_status(p->ec), std::move(p->value)};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(id), timeout),
                   std::move(h));
}

}  // namespace thoonk
