// How every public asynchronous function of the library turns an Asio
// completion token into a type-erased handler, so that the operation itself
// is implemented once, out of line, in src/ (see Asio's type-erasure
// example). Headers stay light: no operation logic is instantiated in user
// translation units, only this small adapter.
#pragma once

#include <thoonk/completion.hpp>
#include <thoonk/diagnostics.hpp>
#include <thoonk/durability.hpp>
#include <thoonk/export.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/append.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/associated_executor.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <cstddef>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>

namespace thoonk {
class client;
}

namespace thoonk::detail {

class client_core;

/// The library's way to the client_core that a client and every handle made
/// from it share (each keeps it in a private member named client_core_ and
/// befriends this accessor).
struct client_access {
  template <class T>
  static auto core(const T& x) noexcept -> const decltype(x.client_core_)& {
    return x.client_core_;
  }
};

/// What an operation's out-of-line start function receives: the caller's
/// handler, type-erased, and where to put the server's error text (null
/// unless the caller used thoonk::capture_diagnostics or a throwing token).
template <class Signature>
struct op_handler {
  boost::asio::any_completion_handler<Signature> handler;
  diagnostics* diag = nullptr;

  op_handler() = default;
  op_handler(boost::asio::any_completion_handler<Signature> h, diagnostics* d = nullptr) noexcept
      : handler(std::move(h)), diag(d) {}
  explicit operator bool() const noexcept { return static_cast<bool>(handler); }
};

template <class T>
struct is_capture_diagnostics : std::false_type {};
template <class T>
struct is_capture_diagnostics<capture_diagnostics_t<T>> : std::true_type {};
template <class T>
struct is_with_durability : std::false_type {};
template <class T>
struct is_with_durability<with_durability_t<T>> : std::true_type {};

/// What the token adapters asked for, gathered while unwrapping them.
struct token_extras {
  diagnostics* diag = nullptr;
  durability* ack = nullptr;
};

/// The innermost token of a chain of adapters (capture_diagnostics,
/// with_durability), as an lvalue or rvalue like the outermost one.
template <class Token>
decltype(auto) innermost_token(Token&& token, token_extras& x) {
  using T = std::decay_t<Token>;
  if constexpr (is_capture_diagnostics<T>::value || is_with_durability<T>::value) {
    using inner = std::conditional_t<std::is_lvalue_reference_v<Token>, typename T::token_type&,
                                     typename T::token_type&&>;
    if constexpr (is_capture_diagnostics<T>::value) x.diag = token.diag;
    else x.ack = token.ack;
    return innermost_token(static_cast<inner>(token.token), x);
  } else {
    return std::forward<Token>(token);
  }
}

template <class T>
struct asks_durability : std::false_type {};
template <class T>
struct asks_durability<with_durability_t<T>> : std::true_type {};
template <class T>
struct asks_durability<capture_diagnostics_t<T>> : asks_durability<T> {};

template <class Token>
inline constexpr bool is_adapter_v = is_capture_diagnostics<std::decay_t<Token>>::value ||
                                     is_with_durability<std::decay_t<Token>>::value;

// The client core an operation runs through, from its start function's
// first argument: a client or a feed/queue handle (shared ownership, so a
// durable operation's WAIT can outlive both). nullptr_t when there is none
// (connection::async_exec).
template <class T>
auto client_of(T& x) noexcept {
  if constexpr (std::is_pointer_v<T>) {
    return x ? client_of(*x) : decltype(client_of(*x)){};
  } else if constexpr (requires { client_access::core(x); }) {
    return std::shared_ptr<client_core>(client_access::core(x));
  } else {
    return nullptr;
  }
}
template <class... A>
inline constexpr bool has_client_v = false;
template <class A0, class... A>
inline constexpr bool has_client_v<A0, A...> =
    !std::is_same_v<decltype(client_of(std::declval<std::remove_reference_t<A0>&>())),
                    std::nullptr_t>;

// The name of the feed or queue an operation works on (its object's
// name()), or empty for an operation of the client itself. In cluster mode
// the WAIT goes to the primary that serves that feed.
template <class T>
std::string feed_name_of(const T& x) {
  if constexpr (std::is_pointer_v<T>) return x ? feed_name_of(*x) : std::string{};
  else if constexpr (requires { x.name(); }) return std::string(x.name());
  else return std::string{};
}

// Out of line (src/client_durability.cpp): the checks before any I/O, the
// client's executor, and the WAIT itself (on the connection that serves
// `feed`: the client's one connection, or in cluster mode the feed's
// primary), which completes `then` (bound to the caller's executor and
// cancellation slot) after filling `ack`.
THOONK_API boost::system::error_code check_durability(const client_core& c, const durability& ack,
                                                      std::string_view feed) noexcept;
THOONK_API boost::asio::any_io_executor executor_of(const client_core& c) noexcept;
THOONK_API void wait_for_replicas(
    std::shared_ptr<client_core> c, durability& ack, std::string feed,
    boost::asio::any_completion_handler<void(boost::system::error_code)> then);

template <class Signature>
struct durable;

/// Wraps an operation's handler so that, after a success, WAIT runs and
/// fills `ack` before the handler gets the operation's results.
template <class... Ts>
struct durable<void(boost::system::error_code, Ts...)> {
  using handler_type = boost::asio::any_completion_handler<void(boost::system::error_code, Ts...)>;

  static handler_type wrap(handler_type h, std::shared_ptr<client_core> c, durability* ack,
                           std::string feed) {
    namespace asio = boost::asio;
    auto slot = asio::get_associated_cancellation_slot(h);
    auto ex = asio::get_associated_executor(h, executor_of(*c));
    return asio::bind_cancellation_slot(
        slot, asio::bind_executor(
                  ex, [h = std::move(h), c = std::move(c), ack, slot, ex, feed = std::move(feed)](
                          boost::system::error_code ec, Ts... ts) mutable {
                    if (ec) {
                      std::move(h)(ec, std::move(ts)...);
                      return;
                    }
                    wait_for_replicas(
                        std::move(c), *ack, std::move(feed),
                        asio::bind_cancellation_slot(
                            slot, asio::bind_executor(ex, [h = std::move(h),
                                                           t = std::tuple<Ts...>(std::move(ts)...)](
                                                              boost::system::error_code) mutable {
                              std::apply(
                                  [&](auto&&... a) {
                                    std::move(h)(boost::system::error_code{}, std::move(a)...);
                                  },
                                  std::move(t));
                            })));
                  }));
  }

  /// The operation is refused before it starts (posted, never inline).
  static void refuse(handler_type h, const client_core& c, boost::system::error_code ec) {
    boost::asio::post(executor_of(c), boost::asio::append(std::move(h), ec, Ts{}...));
  }
};

template <class T>
struct is_use_awaitable : std::false_type {};
template <class Executor>
struct is_use_awaitable<boost::asio::use_awaitable_t<Executor>> : std::true_type {};

/// Tokens under which an error becomes an exception that carries the
/// server's text (thoonk::default_token_t).
template <class Token>
inline constexpr bool throws_v = is_use_awaitable<std::decay_t<Token>>::value;

/// `fn`, bound to the cancellation slot of a handler of type `Handler`
/// and, when it has one, to its executor (a handler without one keeps
/// completing where the library completes it, never on the system
/// executor). `slot` and `ex` are read from the handler before it moves.
template <class Handler, class Slot, class Executor, class Fn>
auto bind_associations(Slot slot, Executor ex, Fn fn) {
  namespace asio = boost::asio;
  if constexpr (std::is_same_v<Executor, asio::system_executor>) {
    return asio::bind_cancellation_slot(slot, std::move(fn));
  } else {
    return asio::bind_cancellation_slot(slot, asio::bind_executor(ex, std::move(fn)));
  }
}

template <class Signature>
struct throwing;

/// The exception form of a signature `void(error_code, Ts...)`, and the
/// handler that turns the operation's completion into it.
template <class... Ts>
struct throwing<void(boost::system::error_code, Ts...)> {
  using signature = void(std::exception_ptr, Ts...);

  template <class Handler>
  static boost::asio::any_completion_handler<void(boost::system::error_code, Ts...)> adapt(
      Handler h, std::shared_ptr<diagnostics> own, diagnostics* diag) {
    namespace asio = boost::asio;
    auto slot = asio::get_associated_cancellation_slot(h);
    auto ex = asio::get_associated_executor(h);
    return bind_associations<Handler>(
        slot, ex,
        [h = std::move(h), own = std::move(own), diag](boost::system::error_code ec,
                                                       Ts... ts) mutable {
          std::exception_ptr e;
          if (ec) e = std::make_exception_ptr(error_with_diagnostics(ec, *diag));
          std::move(h)(e, std::move(ts)...);
        });
  }
};

/// Initiates an operation with completion signature `Signature`: calls
/// `fn(args..., op_handler<Signature>)` (std::invoke: `fn` may be a member
/// function pointer with the object first among `args`). The arguments are
/// decay-copied, so a deferred initiation never sees dangling references.
/// `token` may be wrapped in thoonk::capture_diagnostics and
/// thoonk::with_durability. Under a throwing token (throws_v:
/// use_awaitable) the caller's signature is the exception form
/// (throwing<Signature>) and the server's text travels in the exception.
/// Callers pass std::forward<Token>(token): async_initiate takes the token
/// by reference and forwards it as `CompletionToken&&`, so an rvalue token
/// (a move-only handler) is moved, never copied.
template <class Signature, class CompletionToken, class Fn, class... Args>
auto initiate(CompletionToken&& token, Fn&& fn, Args&&... args) {
  auto start = [](boost::asio::any_completion_handler<Signature> h, token_extras x, auto f,
                  auto... a) {
    if constexpr (has_client_v<decltype(a)...>) {
      if (x.ack) {
        std::shared_ptr<client_core> c = client_of(std::get<0>(std::tie(a...)));
        std::string feed = feed_name_of(std::get<0>(std::tie(a...)));
        x.ack->acknowledged = -1;
        x.ack->error = {};
        if (auto ec = check_durability(*c, *x.ack, feed)) {
          diagnostics_access::set(x.diag, {});
          durable<Signature>::refuse(std::move(h), *c, ec);
          return;
        }
        // A new handler, not an assignment: Boost 1.81's move assignment of
        // any_completion_handler recurses without end.
        std::invoke(std::move(f), std::move(a)...,
                    op_handler<Signature>(
                        durable<Signature>::wrap(std::move(h), c, x.ack, std::move(feed)), x.diag));
        return;
      }
    }
    std::invoke(std::move(f), std::move(a)..., op_handler<Signature>(std::move(h), x.diag));
  };
  auto launch = [start](auto handler, token_extras x, auto f, auto... a) {
    start(boost::asio::any_completion_handler<Signature>(std::move(handler)), x, std::move(f),
          std::move(a)...);
  };
  auto launch_throwing = [start](auto handler, token_extras x, auto f, auto... a) {
    std::shared_ptr<diagnostics> own;
    if (!x.diag) {
      own = std::make_shared<diagnostics>();
      x.diag = own.get();
    }
    auto h = throwing<Signature>::adapt(std::move(handler), std::move(own), x.diag);
    start(std::move(h), x, std::move(f), std::move(a)...);
  };
  token_extras x;
  auto&& inner = innermost_token(std::forward<CompletionToken>(token), x);
  using inner_ref = decltype(inner);
  using inner_token = std::conditional_t<std::is_lvalue_reference_v<inner_ref>, inner_ref,
                                         std::remove_reference_t<inner_ref>>;
  static_assert(!asks_durability<std::decay_t<CompletionToken>>::value || has_client_v<Args...>,
                "thoonk::with_durability needs an operation of a client, feed or queue "
                "(connection::exec has no client to wait through)");
  if constexpr (throws_v<inner_token>) {
    return boost::asio::async_initiate<inner_token, typename throwing<Signature>::signature>(
        launch_throwing, inner, x, std::forward<Fn>(fn), std::forward<Args>(args)...);
  } else {
    return boost::asio::async_initiate<inner_token, Signature>(
        launch, inner, x, std::forward<Fn>(fn), std::forward<Args>(args)...);
  }
}

}  // namespace thoonk::detail
