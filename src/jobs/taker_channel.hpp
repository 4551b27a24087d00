// A taker's own channel, `job.take:[f]:<taker>` (docs/jobs.md "Hand-off"),
// as the runner and a job_queue handle's claim_taker both use it: the
// subscription and its reading (fences apart, hand-offs parsed with
// jobs/hand_off.hpp), the subscriber's connection events as the taker needs
// them, the fence that tells when every hand-off sent before it has
// arrived, and the call that gives back the claims a taker did not
// receive. What a taker does with its jobs, its offers and when it
// reconciles stay with the taker.
#pragma once

#include "detail/op_status.hpp"

#include <thoonk/job_types.hpp>
#include <thoonk/subscriber.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace thoonk::detail {

class job_queue_impl;

/// What a taker does with its channel's news: called on the client's
/// executor, while the taker lives.
class taker_events {
 public:
  virtual ~taker_events() = default;
  /// Jobs handed off to the taker (claimed for it by a put).
  virtual void handed(std::vector<claimed_job> jobs) = 0;
  /// The subscriber's connection dropped: hand-offs sent from now on are
  /// lost, so the taker offers no more.
  virtual void channel_lost() = 0;
  /// Claims may have been made for the taker that it did not receive (the
  /// subscriber is back, or a message could not be read): it reconciles.
  virtual void check_claims() = 0;
};

/// Used on the client's executor only; a member of its taker, which keeps
/// itself alive across subscribe() and fence() and calls stop() when done.
class taker_channel {
 public:
  /// Subscribes to the channel of taker `taker` on the queue `q` (the name
  /// fence() and give_back_unknown() send under too), waiting at most a
  /// second: false when refused (the user may not SUBSCRIBE there) or
  /// slower, and the taker then works by wake-ups alone. `events` (the
  /// taker, which holds this channel) hears of each hand-off, and of the
  /// subscriber's connection being lost and back.
  boost::asio::awaitable<bool> subscribe(job_queue_impl& q, std::string taker,
                                         std::weak_ptr<taker_events> events);
  bool active() const noexcept { return takes_.active(); }

  /// Sends the next fence (jobs/take_fence.lua, which also withdraws the
  /// taker's offer) and, when `wait` and stop() was not called meanwhile,
  /// waits until it comes back, at most the longer of 2 s and two poll
  /// intervals from the call's reply (a call made while the connection
  /// reconnects takes longer). Completes with the
  /// call's status and whether the fence came.
  boost::asio::awaitable<std::tuple<op_status, bool>> fence(job_queue_impl& q, bool wait);

  /// Gives back the claims recorded under the taker that it did not
  /// receive (jobs/reconcile.lua): all but `held` (id, token pairs).
  /// `closing`: the taker's entry goes too. Run once a fence came (or,
  /// closing, without one). Completes with the call's status and how many
  /// claims went back.
  boost::asio::awaitable<std::tuple<op_status, std::int64_t>> give_back_unknown(
      job_queue_impl& q, bool closing, std::vector<std::string> held);

  /// Unsubscribes and ends a fence wait in progress; a fence() from now on
  /// does not wait.
  void stop();

 private:
  /// Whether `payload` is a fence. Only the one this taker sent last counts
  /// (any client allowed to publish on the channel could send another): it
  /// is recorded as seen and ends fence()'s wait.
  bool seen_fence(std::string_view payload);
  void message_came(taker_events& events, std::string_view payload);

  std::string taker_;
  subscription takes_;
  subscription events_;
  std::uint64_t fences_sent_ = 0;
  std::uint64_t fence_seen_ = 0;
  boost::asio::steady_timer* fence_wait_ = nullptr;
  bool stopped_ = false;
};

}  // namespace thoonk::detail
