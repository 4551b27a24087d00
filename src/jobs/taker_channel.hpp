// A taker's own channel, `job.take:[f]:<taker>` (docs/jobs.md "Hand-off"),
// as the runner and a job_queue handle's claim_taker both use it: the
// subscription, and the fence that tells when every hand-off sent before it
// has arrived. The messages themselves (jobs/hand_off.hpp) and what a taker
// does with them, its offers and its reconciliation stay with the taker.
#pragma once

#include "detail/op_status.hpp"

#include <thoonk/subscriber.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <tuple>

namespace thoonk::detail {

class job_queue_impl;

/// Used on the client's executor only; a member of its taker, which keeps
/// itself alive across subscribe() and fence() and calls stop() when done.
class taker_channel {
 public:
  /// Subscribes to the channel of taker `taker` on the queue `q` (the name
  /// fence() sends under too), waiting at most a second: false when refused
  /// (the user may not SUBSCRIBE there) or slower, and the taker then works
  /// by wake-ups alone. `on_message` gets
  /// every message (it asks seen_fence() first), `on_event` the
  /// subscriber's connection events.
  boost::asio::awaitable<bool> subscribe(job_queue_impl& q, std::string taker,
                                         std::function<void(const message&)> on_message,
                                         std::function<void(const subscriber_event&)> on_event);
  bool active() const noexcept { return takes_.active(); }

  /// Whether `payload` is a fence. Only the one this taker sent last counts
  /// (any client allowed to publish on the channel could send another): it
  /// is recorded as seen and ends fence()'s wait.
  bool seen_fence(std::string_view payload);

  /// Sends the next fence (jobs/take_fence.lua, which also withdraws the
  /// taker's offer) and, when `wait` and stop() was not called meanwhile,
  /// waits until it comes back, at most the longer of 2 s and two poll
  /// intervals from the call's reply (a call made while the connection
  /// reconnects takes longer). Completes with the
  /// call's status and whether the fence came.
  boost::asio::awaitable<std::tuple<op_status, bool>> fence(job_queue_impl& q, bool wait);

  /// Unsubscribes and ends a fence wait in progress; a fence() from now on
  /// does not wait.
  void stop();

 private:
  std::string taker_;
  subscription takes_;
  subscription events_;
  std::uint64_t fences_sent_ = 0;
  std::uint64_t fence_seen_ = 0;
  boost::asio::steady_timer* fence_wait_ = nullptr;
  bool stopped_ = false;
};

}  // namespace thoonk::detail
