// Runs an operation written as a coroutine and completes a type-erased
// handler with its result. The handler's cancellation slot is connected to
// the coroutine, so cancelling the caller's wait cancels the operation's
// current step (Asio propagates it into every co_await inside).
#pragma once

#include "detail/client_core.hpp"
#include "detail/executor_util.hpp"
#include "detail/op_status.hpp"

#include <thoonk/detail/async.hpp>
#include <thoonk/diagnostics.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/system/system_error.hpp>

#include <exception>
#include <tuple>
#include <utility>

namespace thoonk::detail {

/// An exception escaping an operation coroutine becomes an error code
/// (operations are written not to throw; this is the safety net).
inline boost::system::error_code exception_to_code(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const boost::system::system_error& se) {
    return se.code();
  } catch (const std::bad_alloc&) {
    return make_error_code(boost::system::errc::not_enough_memory);
  } catch (...) {
    return make_error_code(boost::system::errc::state_not_recoverable);
  }
}

/// `op` yields std::tuple<error_code, Ts...>; `h` takes (error_code, Ts...).
/// `keep` (if any) lives until `h` has run: what `op` refers to by
/// reference (the client core) stays alive as long as the coroutine.
template <class... Ts>
void spawn_op(const boost::asio::any_io_executor& ex,
              boost::asio::awaitable<std::tuple<boost::system::error_code, Ts...>> op,
              boost::asio::any_completion_handler<void(boost::system::error_code, Ts...)> h,
              std::shared_ptr<const void> keep = {}) {
  namespace asio = boost::asio;
  auto slot = asio::get_associated_cancellation_slot(h);
  asio::co_spawn(
      ex, std::move(op),
      asio::bind_cancellation_slot(
          slot, [h = std::move(h), ex, keep = std::move(keep)](
                    std::exception_ptr e, std::tuple<boost::system::error_code, Ts...> r) mutable {
            if (e) r = std::tuple<boost::system::error_code, Ts...>{exception_to_code(e), Ts{}...};
            std::apply(
                [&](auto&&... a) {
                  complete_handler(std::move(h), ex, std::forward<decltype(a)>(a)...);
                },
                std::move(r));
          }));
}

/// Completes an operation's handler: the server's text (if any) goes to
/// the caller's diagnostics first, then the handler runs as
/// complete_handler() runs it.
template <class... Ts, class... Args>
void complete_op(op_handler<void(boost::system::error_code, Ts...)> h,
                 const boost::asio::any_io_executor& fallback, op_status status, Args&&... args) {
  diagnostics_access::set(h.diag, status.server_message);
  complete_handler(std::move(h.handler), fallback, status.ec, std::forward<Args>(args)...);
}

/// spawn_op for an operation whose coroutine reports an op_status (and
/// hence the server's text) with its results.
template <class... Ts, class Status>
void spawn_op(const boost::asio::any_io_executor& ex,
              boost::asio::awaitable<std::tuple<Status, Ts...>> op,
              op_handler<void(boost::system::error_code, Ts...)> h,
              std::shared_ptr<const void> keep = {}) {
  namespace asio = boost::asio;
  auto slot = asio::get_associated_cancellation_slot(h.handler);
  asio::co_spawn(ex, std::move(op),
                 asio::bind_cancellation_slot(
                     slot, [h = std::move(h), ex, keep = std::move(keep)](
                               std::exception_ptr e, std::tuple<Status, Ts...> r) mutable {
                       if (e) r = std::tuple<Status, Ts...>{exception_to_code(e), Ts{}...};
                       std::apply(
                           [&](auto&& status, auto&&... a) {
                             complete_op(std::move(h), ex,
                                         op_status(std::forward<decltype(status)>(status)),
                                         std::forward<decltype(a)>(a)...);
                           },
                           std::move(r));
                     }));
}

/// spawn_op on the client core's executor, keeping the core alive until
/// the handler has run (the operation may outlive the client object).
template <class Op, class Handler>
void spawn_op(const std::shared_ptr<client_core>& core, Op op, Handler h) {
  spawn_op(core->get_executor(), std::move(op), std::move(h), core);
}

}  // namespace thoonk::detail
