// Small helpers around executors and handler completion shared by the I/O
// layer.
#pragma once

#include <thoonk/detail/async.hpp>
#include <thoonk/diagnostics.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>

#include <utility>

namespace thoonk::detail {

/// Holds a type-erased handler in containers. Boost 1.81's
/// any_completion_handler::operator=(any_completion_handler&&) copies its
/// argument as an lvalue, which re-enters the converting constructor and
/// recurses until the stack overflows (fixed in later Boost). Containers
/// move-assign on erase, so stored handlers live in this box, whose
/// move-assignment uses only move-construction and swap.
template <class Signature>
class handler_box {
 public:
  using handler_type = boost::asio::any_completion_handler<Signature>;

  handler_box() noexcept = default;
  handler_box(handler_type&& h) noexcept : h_(std::move(h)) {}
  handler_box(handler_box&& o) noexcept : h_(std::move(o.h_)) {}
  handler_box& operator=(handler_box&& o) noexcept {
    handler_type tmp(std::move(o.h_));
    h_.swap(tmp);
    return *this;
  }
  handler_box(const handler_box&) = delete;
  handler_box& operator=(const handler_box&) = delete;

  explicit operator bool() const noexcept { return static_cast<bool>(h_); }
  /// Moves the handler out, leaving the box empty.
  handler_type take() noexcept { return handler_type(std::move(h_)); }
  handler_type& get() noexcept { return h_; }

 private:
  handler_type h_;
};

/// True when the calling thread is inside `ex` (so work may run inline).
/// Unknown executor types answer false, which only costs a copy + dispatch.
inline bool running_in(const boost::asio::any_io_executor& ex) {
  namespace asio = boost::asio;
  if (auto* p = ex.target<asio::io_context::executor_type>()) return p->running_in_this_thread();
  if (auto* p = ex.target<asio::strand<asio::io_context::executor_type>>())
    return p->running_in_this_thread();
  if (auto* p = ex.target<asio::strand<asio::any_io_executor>>())
    return p->running_in_this_thread();
  return false;
}

/// Runs `fn` on `ex`: inline when already there, else posted (for state
/// that only the executor's thread may touch).
template <class Fn>
void on_executor(const boost::asio::any_io_executor& ex, Fn fn) {
  if (running_in(ex)) fn();
  else boost::asio::post(ex, std::move(fn));
}

/// Invokes a type-erased handler the way Asio requires: its cancellation slot
/// is cleared first (the slot's handler may refer to the operation that is
/// completing), and it runs on its associated executor (`fallback` when it
/// has none), inline when we are already there.
template <class Handler, class... Args>
void complete_handler(Handler h, const boost::asio::any_io_executor& fallback, Args&&... args) {
  namespace asio = boost::asio;
  auto slot = asio::get_associated_cancellation_slot(h);
  if (slot.is_connected()) slot.clear();
  auto ex = asio::get_associated_executor(h, fallback);
  asio::dispatch(ex, [h = std::move(h), ... a = std::forward<Args>(args)]() mutable {
    std::move(h)(std::move(a)...);
  });
}

/// complete_handler for an operation's handler whose outcome did not come
/// from a server reply: the caller's diagnostics are cleared.
template <class Signature, class... Args>
void complete_handler(op_handler<Signature> h, const boost::asio::any_io_executor& fallback,
                      Args&&... args) {
  diagnostics_access::set(h.diag, {});
  complete_handler(std::move(h.handler), fallback, std::forward<Args>(args)...);
}

/// As complete_handler, but never inline: for completions produced inside a
/// cancellation handler, where clearing the slot inline would destroy the
/// handler that is running.
template <class Handler, class... Args>
void post_handler(Handler h, const boost::asio::any_io_executor& ex, Args&&... args) {
  boost::asio::post(ex, [h = std::move(h), ex, ... a = std::forward<Args>(args)]() mutable {
    complete_handler(std::move(h), ex, std::move(a)...);
  });
}

template <class Signature, class... Args>
void post_handler(op_handler<Signature> h, const boost::asio::any_io_executor& ex, Args&&... args) {
  diagnostics_access::set(h.diag, {});
  post_handler(std::move(h.handler), ex, std::forward<Args>(args)...);
}

/// A handler for a producer of results (a batcher) that completes the
/// caller's `h` through `fn(h, results...)`, on h's executor (`ex` when it
/// has none) and cancelled through h's cancellation slot.
template <class Handler, class Fn>
auto adapt_handler(Handler h, const boost::asio::any_io_executor& ex, Fn fn) {
  namespace asio = boost::asio;
  auto slot = asio::get_associated_cancellation_slot(h);
  auto hex = asio::get_associated_executor(h, ex);
  return asio::bind_cancellation_slot(
      slot, asio::bind_executor(hex, [h = std::move(h), fn = std::move(fn)](auto&&... r) mutable {
        fn(std::move(h), std::forward<decltype(r)>(r)...);
      }));
}

}  // namespace thoonk::detail
