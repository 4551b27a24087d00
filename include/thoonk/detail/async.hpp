// How every public asynchronous function of the library turns an Asio
// completion token into a type-erased handler, so that the operation itself
// is implemented once, out of line, in src/ (see Asio's type-erasure
// example). Headers stay light: no operation logic is instantiated in user
// translation units, only this small adapter.
#pragma once

#include <thoonk/diagnostics.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <functional>
#include <type_traits>
#include <utility>

namespace thoonk::detail {

/// What an operation's out-of-line start function receives: the caller's
/// handler, type-erased, and where to put the server's error text (null
/// unless the caller used thoonk::with_diagnostics).
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
struct is_with_diagnostics : std::false_type {};
template <class T>
struct is_with_diagnostics<with_diagnostics_t<T>> : std::true_type {};

/// Initiates an operation with completion signature `Signature`: calls
/// `fn(args..., op_handler<Signature>)` (std::invoke: `fn` may be a member
/// function pointer with the object first among `args`). The arguments are
/// decay-copied, so a deferred initiation never sees dangling references.
/// `token` may be wrapped in thoonk::with_diagnostics. Callers pass
/// std::forward<Token>(token): async_initiate takes the token by reference
/// and forwards it as `CompletionToken&&`, so an rvalue token (a move-only
/// handler) is moved, never copied.
template <class Signature, class CompletionToken, class Fn, class... Args>
auto initiate(CompletionToken&& token, Fn&& fn, Args&&... args) {
  using token_type = std::decay_t<CompletionToken>;
  auto launch = [](auto handler, diagnostics* diag, auto f, auto... a) {
    std::invoke(std::move(f), std::move(a)...,
                op_handler<Signature>(
                    boost::asio::any_completion_handler<Signature>(std::move(handler)), diag));
  };
  if constexpr (is_with_diagnostics<token_type>::value) {
    using inner_type = typename token_type::token_type;
    if constexpr (std::is_lvalue_reference_v<CompletionToken>) {
      return boost::asio::async_initiate<inner_type&, Signature>(
          launch, token.token, token.diag, std::forward<Fn>(fn), std::forward<Args>(args)...);
    } else {
      return boost::asio::async_initiate<inner_type, Signature>(
          launch, token.token, token.diag, std::forward<Fn>(fn), std::forward<Args>(args)...);
    }
  } else {
    return boost::asio::async_initiate<CompletionToken, Signature>(
        launch, token, static_cast<diagnostics*>(nullptr), std::forward<Fn>(fn),
        std::forward<Args>(args)...);
  }
}

}  // namespace thoonk::detail
