// Completion tokens of the library's operations: the default token, what
// counts as a token, and how errors reach a coroutine.
#pragma once

#include <boost/asio/use_awaitable.hpp>

#include <string_view>
#include <type_traits>

namespace thoonk {

/// The completion token an operation uses when none is given:
/// boost::asio::use_awaitable. So in a coroutine of boost::asio::awaitable,
///
///     auto put = co_await q.async_put("x");
///
/// runs the operation and throws thoonk::error_with_diagnostics on error.
///
/// **Errors as exceptions.** Under use_awaitable (given or by default), an
/// operation's completion signature `void(error_code, T...)` becomes
/// `void(std::exception_ptr, T...)`: the pointer holds a
/// thoonk::error_with_diagnostics (the code and the server's text), which
/// `co_await` throws. Every other token (callbacks, deferred, as_tuple,
/// redirect_error, use_future, yield_context, ...) gets the error_code as
/// documented on each operation; wrap one in thoonk::capture_diagnostics to
/// also get the server's text.
///
/// Why not boost::asio::deferred, as newer Boost.Redis and Boost.MySQL
/// default to: in Boost 1.81 (Debian 12), awaiting a deferred operation
/// whose signature is `void(std::exception_ptr, T)` does not compile (Asio
/// 1.26's awaitable_async_op_handler for that signature tests the result
/// struct instead of its exception), so a deferred default could not carry
/// the server's text to the exception. A deferred operation given
/// explicitly completes with the error_code as usual.
using default_token_t = boost::asio::use_awaitable_t<>;

/// The value of default_token_t.
inline constexpr default_token_t default_token{};

/// True for the argument types of the library's operations that may stand
/// just before an operation's (defaulted) completion token, so that such an
/// argument is never taken for a token: `q.async_put(item, opts)` is a put
/// with options, not a put completing to `opts`. The headers that define
/// those types specialise it.
template <class T>
inline constexpr bool is_operation_argument_v = false;

/// What an operation accepts as its completion token: anything but a string
/// (an item, an id, a result) or one of the library's argument types
/// (is_operation_argument_v). A completion handler, boost::asio::deferred,
/// use_awaitable, use_future, a yield_context and the adapters
/// (as_tuple, redirect_error, capture_diagnostics, with_durability) all are.
template <class T>
concept completion_token =
    !std::is_convertible_v<T, std::string_view> && !is_operation_argument_v<std::remove_cvref_t<T>>;

}  // namespace thoonk
