#include "jobs/claim_taker.hpp"

#include "detail/unix_time.hpp"
#include "detail/uuid.hpp"
#include "jobs/hand_off.hpp"
#include "jobs/job_queue_impl.hpp"
#include "jobs/time_limits.hpp"
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
  std::weak_ptr<claim_taker> weak = self;
  // Named, not temporaries in the co_await expression: g++ 12 destroys
  // such temporaries twice.
  std::function<void(const message&)> on_message = [weak](const message& m) {
    if (auto s = weak.lock()) s->taken(m.payload);
  };
  std::function<void(const subscriber_event&)> on_event = [weak](const subscriber_event& ev) {
    auto s = weak.lock();
    if (!s) return;
    // Hand-offs sent while the subscriber is down are lost: offer no more,
    // and once it is back, find and give back what was sent meanwhile.
    if (ev.kind == subscriber_event::disconnected) s->offering_ = false;
    else if (ev.kind == subscriber_event::connected) s->want_reconcile();
  };
  const bool subscribed = co_await self->channel_.subscribe(*q, self->name_, std::move(on_message),
                                                            std::move(on_event));
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
  if (offers_in_flight_ == 0 && waiting_) waiting_->cancel();
}

void claim_taker::idle() {
  if (!offered_ || closed_ || reconciling_ || offers_in_flight_ > 0) return;
  auto q = q_.lock();
  if (!q) return;
  offered_ = false;
  // jobs/claim.lua with n = 0 withdraws the offer. Should it fail, the offer
  // lapses by itself, and what it brings meanwhile goes back (the fetcher
  // gives back jobs nobody waits for).
  auto withdraw = [](std::shared_ptr<job_queue_impl> q, std::string name) -> asio::awaitable<void> {
    std::vector<std::string> args{unix_ms_string(), "0", std::move(name)};
    co_await q->call(scripts::jobs_claim(), std::move(args));
  };
  asio::co_spawn(ex_, withdraw(std::move(q), name_), asio::detached);
}

void claim_taker::taken(std::string_view payload) {
  if (channel_.seen_fence(payload)) return;
  auto q = q_.lock();
  if (!q) return;
  auto js = jobs::parse_hand_off(payload);
  if (!js) {
    // Claims were made for this handle that it cannot read: find them.
    want_reconcile();
    return;
  }
  for (const auto& j : *js) known_[j.id] = j.token;
  q->claims->handed(std::move(*js));
  if (known_.size() >= prune_at_ && !pruning_)
    asio::co_spawn(ex_, prune(shared_from_this()), asio::detached);
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
      std::vector<std::string> known{self->name_, q->wake_channel, leaving ? "1" : "0"};
      known.reserve(2 + 2 * self->known_.size());
      for (const auto& [id, token] : self->known_) {
        known.push_back(id);
        known.push_back(std::to_string(token));
      }
      auto [rst, back] = co_await q->call(scripts::jobs_reconcile(), std::move(known));
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
