// The runner's hand-off (runner.hpp; docs/jobs.md "Hand-off"): rounds that
// find the queue dry offer the idle slots (runner_book::round::offer), and
// puts claim jobs for them and send them on the runner's own channel
// (jobs/taker_channel.hpp). A message lost while the subscriber reconnected
// leaves a claim this runner does not know: after every reconnect,
// reconcile() finds and gives back such claims.
#include "jobs/runner/runner.hpp"

#include "jobs/job_queue_impl.hpp"
#include "thoonk_lua_scripts.hpp"

namespace thoonk::detail {

namespace asio = boost::asio;

asio::awaitable<void> runner::start_taking(std::shared_ptr<runner> self) {
  const bool subscribed = co_await self->takes_.subscribe(*self->impl_, self->worker_,
                                                          std::weak_ptr<taker_events>(self));
  if (subscribed) self->book_.set_offering(true);
}

void runner::channel_lost() {
  // Hand-offs sent now are lost: offer no more (the next round withdraws
  // the offer), and check once the channel is back (check_claims).
  book_.set_offering(false);
  poke();
}

void runner::check_claims() {
  want_reconcile();
  poke();
}

void runner::handed(std::vector<claimed_job> js) {
  // Leaving: the stop gives back every claim recorded under this worker.
  if (leaving_) return;
  report_.handed_off += js.size();
  const std::size_t starting = book_.handed_off(js.size());
  start_or_keep(std::move(js), starting, book_type::clock::now());
  if (book_.stopping()) give_back_ready(time_point::max(), false);
  poke();
}

void runner::want_reconcile() {
  if (!takes_.active() || leaving_) return;
  if (book_.want_check()) poke();
}

/// Gives back the claims recorded under this worker that it does not know.
/// Runs with rounds held and none in flight, so every claim a round made
/// is known; a fence on the runner's channel, sent after its offer was
/// withdrawn, says when every hand-off sent before has arrived. If the
/// fence does not come (the subscriber is down again), the next reconnect
/// tries again; the claims of lost messages lapse with their leases
/// meanwhile.
asio::awaitable<void> runner::reconcile(std::shared_ptr<runner> self) {
  // Started by the round loop once the book said so (start_check()).
  self->book_.set_offering(false);
  auto [st, came] = co_await self->takes_.fence(*self->impl_, !self->leaving_);
  const bool fence_lost = !st && !came;
  if (!st && came && !self->leaving_) {
    std::vector<std::string> known = self->held_claims();
    for (const auto& [id, token] : self->failing_) {
      known.push_back(id);
      known.push_back(std::to_string(token));
    }
    auto [rst, back] =
        co_await self->takes_.give_back_unknown(*self->impl_, false, std::move(known));
    if (!rst) {
      self->report_.released += static_cast<std::uint64_t>(back);
      self->book_.set_offering(true);
    } else if (jobs::is_transient(rst.ec)) {
      st = std::move(rst);  // try again after a pause, as below
    }
  }
  if (st && jobs::is_transient(st.ec) && !self->leaving_) {
    asio::steady_timer pause(self->ex_, self->impl_->opts.poll_interval);
    co_await pause.async_wait(use_nothrow);
    self->book_.check_again(!self->leaving_);
  }
  // Other errors (the user may not PUBLISH on its own channel): no
  // hand-off for this run.
  self->book_.check_done();
  self->poke();
  if (fence_lost && !self->leaving_) {
    // The fence did not come while the subscriber is up again (its
    // connection was lost once more, or the fence was): the rounds go on
    // meanwhile, and the check is tried again after a poll interval, so
    // offering does not stay off until another reconnect.
    asio::steady_timer later(self->ex_, self->impl_->opts.poll_interval);
    self->reconcile_retry_ = &later;
    co_await later.async_wait(use_nothrow);
    self->reconcile_retry_ = nullptr;
    if (self->impl_->cl.sub().is_connected()) self->want_reconcile();
  }
}

}  // namespace thoonk::detail
