// The wake-up side shared by queue and job_queue: a subscription to the
// queue's `feed.wake:name` channel and to the subscriber's reconnect event,
// both poking the queue's fetcher (so waiting getters re-check the server).
#pragma once

#include "jobs/fetcher.hpp"
#include "jobs/pending.hpp"
#include "subscriber/notify.hpp"

#include <thoonk/client.hpp>
#include <thoonk/subscriber.hpp>

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace thoonk::detail::jobs {

class wake_subscription {
 public:
  /// Starts the subscription (once) and waits until the server confirmed it
  /// or `max_wait` passed (milliseconds::max(): no limit). A wake-up
  /// published after the confirmation is delivered; when the confirmation
  /// comes after `max_wait` the fetcher is poked then, so a wake-up lost in
  /// between costs nothing. Returns the subscription's error with the
  /// server's text (or error::request_timeout when it is still pending).
  /// `poke` tells the fetcher to look again (it must not keep the fetcher
  /// alive). Call on the client's executor.
  asio::awaitable<op_status> ensure(detail::client_core& c, std::string channel,
                                    std::function<void()> poke,
                                    std::chrono::milliseconds max_wait) {
    auto st = st_;
    if (st->closed) co_return error_code(asio::error::operation_aborted);
    if (!st->events.active()) {
      st->events = c.sub().on_event([poke](const subscriber_event& ev) {
        // After a reconnect every wake-up published meanwhile is lost:
        // look again.
        if (ev.kind == subscriber_event::connected) poke();
      });
    }
    if (st->done) co_return op_status(st->ec, st->diag.server_message());
    if (!st->started) {
      st->started = true;
      asio::co_spawn(c.get_executor(), subscribe(&c, std::move(channel), std::move(poke), st),
                     asio::detached);
      // co_spawn may run it inline, and a channel this client subscribed
      // already is confirmed at once: then it is done here.
      if (st->done) co_return op_status(st->ec, st->diag.server_message());
    }
    auto t = std::make_shared<asio::steady_timer>(c.get_executor());
    if (max_wait == std::chrono::milliseconds::max()) t->expires_at(clock_type::time_point::max());
    else t->expires_after(max_wait);
    st->waiting.push_back(t);
    co_await t->async_wait(use_nothrow);
    if (st->done) co_return op_status(st->ec, st->diag.server_message());
    if (st->closed) co_return error_code(asio::error::operation_aborted);
    co_return error_code(error::request_timeout);
  }

  void close() {
    auto st = st_;
    st->closed = true;
    st->channel.reset();
    st->events.reset();
    for (auto& w : st->waiting)
      if (auto t = w.lock()) t->cancel();
    st->waiting.clear();
  }

 private:
  struct state {
    subscription channel;
    subscription events;
    bool started = false;
    bool done = false;
    bool closed = false;
    error_code ec;
    diagnostics diag;  // the subscribe's server text (subscribe_refused)
    std::vector<std::weak_ptr<asio::steady_timer>> waiting;
  };

  static asio::awaitable<void> subscribe(detail::client_core* c, std::string channel,
                                         std::function<void()> poke, std::shared_ptr<state> st) {
    auto cb = [poke](const message&) { poke(); };
    auto [ec, s] = co_await subscribe_notifications(*c, std::move(channel), std::move(cb),
                                                    capture_diagnostics(st->diag, use_nothrow));
    st->done = true;
    st->ec = ec;
    if (!ec && !st->closed) st->channel = std::move(s);  // else `s` unsubscribes
    for (auto& w : st->waiting)
      if (auto t = w.lock()) t->cancel();
    st->waiting.clear();
    // A wake-up published before the confirmation was not seen: look again.
    if (!ec) poke();
  }

  std::shared_ptr<state> st_ = std::make_shared<state>();
};

/// A token whose destruction closes `impl` on `ex`: the public queue
/// handles hold one, so the last copy of a handle closes the queue.
template <class Impl>
std::shared_ptr<void> close_when_released(std::shared_ptr<Impl> impl,
                                          const asio::any_io_executor& ex) {
  return std::shared_ptr<void>(
      nullptr, [impl = std::move(impl), ex](void*) { on_executor(ex, [impl] { impl->close(); }); });
}

}  // namespace thoonk::detail::jobs
