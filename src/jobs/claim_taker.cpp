#include "jobs/claim_taker.hpp"

#include "detail/unix_time.hpp"
#include "detail/uuid.hpp"
#include "jobs/hand_off.hpp"
#include "jobs/job_queue_impl.hpp"
#include "jobs/time_limits.hpp"
#include "scripts/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

#include <algorithm>

namespace thoonk::detail {

using jobs::is_transient;

claim_taker::claim_taker(const std::shared_ptr<job_queue_impl>& q)
    : q_(q), ex_(q->cl.get_executor()), name_("claim-" + make_uuid()) {}

std::chrono::milliseconds claim_taker::offer_ttl() const {
  auto q = q_.lock();
  return jobs::twice_capped(q ? q->opts.poll_interval : std::chrono::milliseconds(1000));
}

asio::awaitable<void> claim_taker::start(std::shared_ptr<claim_taker> self) {
  auto q = self->q_.lock();
  if (!q || self->closed_) co_return;
  const bool subscribed =
      co_await self->channel_.subscribe(*q, self->name_, std::weak_ptr<taker_events>(self));
  // Refused or slow: claims work by wake-ups alone, as without hand-off.
  if (!subscribed) co_return;
  if (self->closed_) {
    self->channel_.stop();
    co_return;
  }
  self->offering_ = true;
}

bool claim_taker::add_offer(std::vector<std::string>& args, std::size_t waiting) {
  if (!offering_ || closed_) return false;
  args.push_back(name_);
  args.push_back(std::to_string(waiting));
  args.push_back(std::to_string(offer_ttl().count()));
  ++offers_in_flight_;
  offered_ = true;  // until the reply says whether it stands
  return true;
}

void claim_taker::offer_done(bool dry) {
  --offers_in_flight_;
  // The replies come in the order the server ran the calls: the last one
  // says whether an offer stands (an error leaves that open: assume so).
  offered_ = dry;
  if (offers_in_flight_ > 0) return;
  if (waiting_) waiting_->cancel();
  if (!withdraw_wanted_) return;
  withdraw_wanted_ = false;
  // Waiters of this reply (the fetcher learns of it after this) ask again
  // when they leave.
  auto q = q_.lock();
  if (q && q->claims && q->claims->waiting() == 0) idle();
  wake_settled();
}

void claim_taker::idle() {
  if (closed_ || reconciling_) return;  // the fence withdraws the offer
  if (offers_in_flight_ > 0) {
    // A reply still to come may leave an offer: offer_done withdraws it.
    withdraw_wanted_ = true;
    return;
  }
  if (!offered_) return;
  auto q = q_.lock();
  if (!q) return;
  offered_ = false;
  ++withdrawals_;
  asio::co_spawn(ex_, withdraw(shared_from_this(), std::move(q)), asio::detached);
}

asio::awaitable<void> claim_taker::withdraw(std::shared_ptr<claim_taker> self,
                                            std::shared_ptr<job_queue_impl> q) {
  // Should it fail, the offer lapses by itself, and what it brings
  // meanwhile comes back: the fetcher gives back jobs nobody waits for,
  // and a hand-off that reaches no live handle lapses unconfirmed.
  const std::string now = unix_ms_string();
  const std::vector<std::string_view> keys(q->keys.begin(), q->keys.end());
  const std::vector<std::string_view> args{now, "0", q->wake_channel, self->name_};
  exec_options eo;
  eo.wait_for_connection = false;
  eo.timeout = self->offer_ttl();
  co_await eval_script(q->cl, scripts::jobs_claim(), keys, args, eo);
  --self->withdrawals_;
  self->wake_settled();
}

void claim_taker::wake_settled() {
  for (auto* t : settle_waits_) t->cancel();
}

asio::awaitable<void> claim_taker::settled(std::weak_ptr<claim_taker> weak) {
  auto self = weak.lock();
  if (!self) co_return;
  const auto until = jobs::clock_type::now() + self->offer_ttl();
  while ((self->withdraw_wanted_ || self->withdrawals_ > 0) && jobs::clock_type::now() < until) {
    asio::steady_timer t(self->ex_, until);
    self->settle_waits_.push_back(&t);
    co_await t.async_wait(use_nothrow);
    std::erase(self->settle_waits_, &t);
  }
}

void claim_taker::channel_lost() {
  // Hand-offs sent while the subscriber is down are lost: offer no more;
  // once it is back (check_claims), find and give back what was sent
  // meanwhile.
  offering_ = false;
}

void claim_taker::check_claims() { want_reconcile(); }

void claim_taker::handed(std::vector<claimed_job> js) {
  auto q = q_.lock();
  if (!q) return;
  for (const auto& j : js) {
    known_[j.id] = j.token;
    unconfirmed_.emplace_back(j.id, j.token);
  }
  if (!confirming_) {
    confirming_ = true;
    asio::co_spawn(ex_, confirm(shared_from_this(), q), asio::detached);
  }
  q->claims->handed(std::move(js));
  if (known_.size() >= prune_at_ && !pruning_)
    asio::co_spawn(ex_, prune(shared_from_this()), asio::detached);
}

asio::awaitable<void> claim_taker::confirm(std::shared_ptr<claim_taker> self,
                                           std::shared_ptr<job_queue_impl> q) {
  // Holds q: jobs its callers received before a close stay theirs.
  while (!self->unconfirmed_.empty()) {
    asio::steady_timer gather(self->ex_, confirm_delay);
    co_await gather.async_wait(use_nothrow);
    const std::size_t n = std::min(self->unconfirmed_.size(), confirm_batch);
    std::vector<std::string> args;
    args.reserve(2 * n);
    for (std::size_t i = 0; i < n; ++i) {
      args.push_back(std::move(self->unconfirmed_[i].first));
      args.push_back(std::to_string(self->unconfirmed_[i].second));
    }
    self->unconfirmed_.erase(self->unconfirmed_.begin(),
                             self->unconfirmed_.begin() + static_cast<std::ptrdiff_t>(n));
    // A failed call leaves them provisional: they go back when they lapse,
    // and their holders' finishes get lost_claim (the connection that
    // failed the call may have failed those too).
    co_await q->call(scripts::jobs_take_confirm(), std::move(args));
  }
  self->confirming_ = false;
}

asio::awaitable<void> claim_taker::prune(std::shared_ptr<claim_taker> self) {
  auto q = self->q_.lock();
  if (!q) co_return;
  self->pruning_ = true;
  const auto sent = self->known_;
  std::vector<std::string> args{self->name_};
  args.reserve(1 + 2 * sent.size());
  for (const auto& [id, token] : sent) {
    args.push_back(id);
    args.push_back(std::to_string(token));
  }
  auto [st, v] = co_await q->call(scripts::jobs_claim_records(), std::move(args));
  // Each claim named ended before the read. The same id may have come
  // again meanwhile, with another token: that claim stays known.
  if (!st)
    for (const auto& e : v.elements) {
      auto it = self->known_.find(e.str);
      auto was = sent.find(e.str);
      if (it != self->known_.end() && was != sent.end() && it->second == was->second)
        self->known_.erase(it);
    }
  self->prune_at_ = std::max<std::size_t>(min_prune, 2 * self->known_.size());
  self->pruning_ = false;
}

void claim_taker::want_reconcile() {
  if (!channel_.active()) return;
  offering_ = false;
  reconcile_wanted_ = true;
  if (!reconciling_) asio::co_spawn(ex_, reconcile(shared_from_this()), asio::detached);
}

void claim_taker::close() {
  if (closed_) return;
  closed_ = true;
  offering_ = false;
  if (!channel_.active()) return;
  // The entry is withdrawn behind a fence: hand-offs sent before it arrive
  // (the closed fetcher gives them back), and the claims of any that were
  // lost go back too. A check in progress runs once more for this.
  want_reconcile();
}

asio::awaitable<void> claim_taker::quiesce() {
  const auto until = jobs::clock_type::now() + std::chrono::seconds(2);
  while (offers_in_flight_ > 0 && jobs::clock_type::now() < until) {
    asio::steady_timer t(ex_, until);
    waiting_ = &t;
    co_await t.async_wait(use_nothrow);
    waiting_ = nullptr;
  }
}

asio::awaitable<void> claim_taker::reconcile(std::shared_ptr<claim_taker> self) {
  self->reconciling_ = true;
  while (self->reconcile_wanted_) {
    self->reconcile_wanted_ = false;
    // Held for the whole check: a closed handle's last check keeps its
    // state alive until the fence came.
    auto q = self->q_.lock();
    if (!q) break;
    const bool leaving = self->closed_;
    // A claim call in flight with an offer could put the entry back after
    // the fence: its reply comes first.
    co_await self->quiesce();
    // Closing, the handle needs no fence to come: what arrives from now
    // on goes back through the closed fetcher, so every claim recorded
    // under the taker that it did not receive can go back at once.
    auto [st, came] = co_await self->channel_.fence(*q, !leaving);
    if (!st) self->offered_ = false;
    if (!st && (came || leaving)) {
      // Every hand-off sent before the fence has arrived: the claims
      // recorded under this taker that it did not receive go back.
      std::vector<std::string> known;
      known.reserve(2 * self->known_.size());
      for (const auto& [id, token] : self->known_) {
        known.push_back(id);
        known.push_back(std::to_string(token));
      }
      auto [rst, back] = co_await self->channel_.give_back_unknown(*q, leaving, std::move(known));
      if (!rst) {
        if (!self->closed_) self->offering_ = true;
        continue;  // done, unless another check was asked for meanwhile
      }
      st = std::move(rst);
    }
    if (leaving) break;
    // Refused (the user may not PUBLISH on its own channel): no hand-off
    // for this handle. Otherwise (the connection, or the fence, was lost)
    // try again after a poll interval while the subscriber is up; a
    // reconnect asks again anyway.
    if (st && !is_transient(st.ec)) break;
    asio::steady_timer pause(self->ex_, q->opts.poll_interval);
    self->waiting_ = &pause;
    co_await pause.async_wait(use_nothrow);
    self->waiting_ = nullptr;
    if (self->closed_ || q->cl.sub().is_connected()) self->reconcile_wanted_ = true;
  }
  self->reconciling_ = false;
  if (self->closed_) self->channel_.stop();
}

}  // namespace thoonk::detail
