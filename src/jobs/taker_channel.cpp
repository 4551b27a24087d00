#include "jobs/taker_channel.hpp"

#include "detail/use_nothrow.hpp"
#include "jobs/hand_off.hpp"
#include "jobs/job_keys.hpp"
#include "jobs/job_queue_impl.hpp"
#include "subscriber/notify.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

#include <algorithm>
#include <chrono>

namespace thoonk::detail {

namespace asio = boost::asio;

asio::awaitable<bool> taker_channel::subscribe(job_queue_impl& q, std::string taker,
                                               std::weak_ptr<taker_events> events) {
  taker_ = std::move(taker);
  // Named, not temporaries in the co_await expression: g++ 12 destroys
  // such temporaries twice. A live taker means a live channel (its member).
  std::function<void(const message&)> on_message = [this, events](const message& m) {
    if (auto e = events.lock()) message_came(*e, m.payload);
  };
  std::function<void(const subscriber_event&)> on_event = [events](const subscriber_event& ev) {
    auto e = events.lock();
    if (!e) return;
    if (ev.kind == subscriber_event::disconnected) e->channel_lost();
    else if (ev.kind == subscriber_event::connected) e->check_claims();
  };
  asio::steady_timer limit(q.cl.get_executor(), std::chrono::seconds(1));
  using namespace asio::experimental::awaitable_operators;
  auto r = co_await (
      subscribe_notifications(q.cl, jobs::take_channel(q.key(jobs::job_keys::config), taker_),
                              std::move(on_message), use_nothrow) ||
      limit.async_wait(use_nothrow));
  if (r.index() != 0 || std::get<0>(std::get<0>(r))) co_return false;
  takes_ = std::move(std::get<1>(std::get<0>(r)));
  events_ = q.cl.sub().on_event(std::move(on_event));
  co_return true;
}

void taker_channel::message_came(taker_events& events, std::string_view payload) {
  if (seen_fence(payload)) return;
  auto js = jobs::parse_hand_off(payload);
  // Unreadable: claims were made for the taker that it cannot read.
  if (!js) events.check_claims();
  else events.handed(std::move(*js));
}

bool taker_channel::seen_fence(std::string_view payload) {
  auto n = jobs::parse_fence(payload);
  if (!n) return false;
  if (*n == fences_sent_) {
    fence_seen_ = *n;
    if (fence_wait_) fence_wait_->cancel();
  }
  return true;
}

asio::awaitable<std::tuple<op_status, bool>> taker_channel::fence(job_queue_impl& q, bool wait) {
  const std::uint64_t n = ++fences_sent_;
  std::vector<std::string> args{taker_, jobs::fence_message(n)};
  auto [st, v] = co_await q.call(scripts::jobs_take_fence(), std::move(args));
  if (!st && wait && !stopped_ && fence_seen_ < n) {
    asio::steady_timer t(
        q.cl.get_executor(),
        std::max<std::chrono::milliseconds>(std::chrono::seconds(2), 2 * q.opts.poll_interval));
    fence_wait_ = &t;
    co_await t.async_wait(use_nothrow);
    fence_wait_ = nullptr;
  }
  co_return std::tuple{std::move(st), !st && fence_seen_ >= n};
}

asio::awaitable<std::tuple<op_status, std::int64_t>> taker_channel::give_back_unknown(
    job_queue_impl& q, bool closing, std::vector<std::string> held) {
  std::vector<std::string> args{taker_, q.wake_channel, closing ? "1" : "0"};
  args.reserve(3 + held.size());
  for (auto& c : held) args.push_back(std::move(c));
  auto [st, v] = co_await q.call(scripts::jobs_reconcile(), std::move(args));
  co_return std::tuple{std::move(st), st ? std::int64_t{0} : jobs::as_int(v)};
}

void taker_channel::stop() {
  stopped_ = true;
  takes_.reset();
  events_.reset();
  if (fence_wait_) fence_wait_->cancel();
}

}  // namespace thoonk::detail
