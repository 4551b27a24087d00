// The runner's registration and heartbeat (runner.hpp): the worker
// registers (jobs/register_worker.lua), a heartbeat loop renews the
// registration and every lease it holds in one jobs/worker_heartbeat.lua
// call and cancels the handlers of the claims the server says it lost; a
// registration that lapsed is made again.
#include "jobs/runner/runner.hpp"

#include "detail/unix_time.hpp"
#include "jobs/job_queue_impl.hpp"
#include "thoonk_lua_scripts.hpp"

namespace thoonk::detail {

namespace asio = boost::asio;

asio::awaitable<op_status> runner::register_worker() {
  std::vector<std::string> args{worker_, std::to_string(opts_.worker_ttl.count()), description_,
                                impl_->wake_channel};
  auto [st, v] =
      co_await impl_->call_with_dlq(scripts::jobs_register_worker(), std::move(args), {});
  if (!st) ++report_.registrations;
  co_return st;
}

void runner::lapsed() {
  book_.registration_lapsed();
  cancel_all(false);
  // The server gave back every claim of the lapsed registration, those
  // claimed ahead too.
  book_.ready_dropped(ready_.size());
  ready_.clear();
  if (reregistering_ || leaving_) return;
  reregistering_ = true;
  auto op = [](std::shared_ptr<runner> self) -> asio::awaitable<void> {
    for (;;) {
      if (self->leaving_ || self->book_.stopping()) break;
      auto st = co_await self->register_worker();
      if (!st) {
        self->book_.registered();
        break;
      }
      if (!jobs::is_transient(st.ec)) {
        self->fail_run(std::move(st));
        break;
      }
      asio::steady_timer t(self->ex_, self->impl_->opts.poll_interval);
      co_await t.async_wait(use_nothrow);
    }
    self->reregistering_ = false;
  };
  spawn(op(shared_from_this()));
}

asio::awaitable<void> runner::heartbeats(std::shared_ptr<runner> self) {
  asio::steady_timer t(self->ex_);
  self->heartbeat_timer_ = &t;
  while (!self->leaving_) {
    t.expires_after(self->book_.heartbeat_interval());
    co_await t.async_wait(use_nothrow);
    if (self->leaving_) break;
    if (self->reregistering_) continue;
    // Jobs claimed ahead that waited a whole interval sit behind handlers
    // that turned out long: back to the line, for idle workers.
    self->give_back_ready(book_type::clock::now() - self->book_.heartbeat_interval(), true);
    std::vector<std::string> args{self->worker_, std::to_string(self->opts_.worker_ttl.count()),
                                  unix_ms_string(), self->impl_->wake_channel};
    // The claims to renew, named by the worker (the server's records are
    // indexed by job, not by worker): those its handlers hold and those
    // whose finish waits for the next round.
    std::vector<std::string> held = self->held_claims();
    auto [st, v] = co_await self->impl_->call_with_dlq(scripts::jobs_worker_heartbeat(),
                                                       std::move(args), std::move(held));
    if (self->leaving_) break;
    if (st) {
      if (!jobs::is_transient(st.ec)) self->fail_run(std::move(st));
      continue;
    }
    auto& e = v.elements;
    if (!e.empty() && e[0].str == "lapsed") {
      self->lapsed();
      continue;
    }
    for (std::size_t i = 2; i + 1 < e.size(); i += 2) self->lose(e[i].str, jobs::as_int(e[i + 1]));
  }
  self->heartbeat_timer_ = nullptr;
}

}  // namespace thoonk::detail
