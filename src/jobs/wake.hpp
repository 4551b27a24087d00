// The wake-up side shared by queue and job_queue: a subscription to the
// queue's `feed.wake:name` channel and to the subscriber's reconnect event,
// both poking a fetcher (so waiting getters re-check the server).
#pragma once

#include "jobs/common.hpp"

#include <thoonk/client.hpp>
#include <thoonk/subscriber.hpp>

#include <memory>
#include <string>

namespace thoonk::detail::jobs {

class wake_subscription {
 public:
  /// Subscribes (once; later calls return at once when active) and
  /// completes when the server confirmed, so a wake-up published after an
  /// empty fetch that follows is delivered. On error the fetcher still
  /// polls. Call on the client's executor.
  template <class T>
  asio::awaitable<error_code> ensure(client& c, const std::string& channel,
                                     std::weak_ptr<fetcher<T>> f) {
    if (closed_) co_return error_code(asio::error::operation_aborted);
    if (!events_.active()) {
      events_ = c.sub().on_event([f](const subscriber_event& ev) {
        // After a reconnect every wake-up published meanwhile is lost:
        // look again.
        if (ev.kind == subscriber_event::connected)
          if (auto p = f.lock()) p->notify();
      });
    }
    if (channel_.active()) co_return error_code{};
    auto cb = [f](const message&) {
      if (auto p = f.lock()) p->notify();
    };
    auto [ec, s] = co_await c.sub().subscribe(channel, std::move(cb), use_nothrow);
    if (ec) co_return ec;
    if (closed_) co_return error_code(asio::error::operation_aborted);  // s unsubscribes
    channel_ = std::move(s);
    co_return error_code{};
  }

  void close() {
    closed_ = true;
    channel_.reset();
    events_.reset();
  }

 private:
  subscription channel_;
  subscription events_;
  bool closed_ = false;
};

/// Runs `fn` on `ex` now if we are there, else posts it (destructors of
/// queue handles may run on any thread).
template <class Fn>
void on_executor(const asio::any_io_executor& ex, Fn fn) {
  if (running_in(ex)) fn();
  else asio::post(ex, std::move(fn));
}

}  // namespace thoonk::detail::jobs
