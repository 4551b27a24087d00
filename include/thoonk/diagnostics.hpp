// The server's own words about a failed operation.
#pragma once

#include <boost/system/system_error.hpp>
#include <thoonk/export.hpp>

#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace thoonk {

namespace detail {
struct diagnostics_access;
}

/// Holds the text of the error reply behind an operation's
/// error::server_error, error::script_error, error::subscribe_refused or
/// ACL error (error::no_permission and its kin): for instance
/// `NOPERM this user has no permissions to run the 'evalsha' command`.
///
/// Pass it with thoonk::capture_diagnostics to any asynchronous operation of
/// the library; the operation sets it before it completes: the server's
/// text when the error came from a server reply, empty otherwise (success
/// included). **Lifetime**: it must outlive the operation. **Threading**:
/// written on the client's executor just before the completion handler
/// runs; read it from the handler or after the co_await.
class THOONK_API diagnostics {
 public:
  /// The server's error text; empty when the error did not come from the
  /// server (or there was no error).
  const std::string& server_message() const noexcept { return server_message_; }
  /// Empties server_message().
  void clear() noexcept { server_message_.clear(); }

 private:
  friend struct detail::diagnostics_access;
  std::string server_message_;
};

/// A completion token adapter: `token` completes as before, and `diag`
/// receives the server's error text. Works with every completion token
/// (deferred, use_awaitable, callbacks, ...) on the library's operations:
///
///     thoonk::diagnostics diag;
///     auto [ec, r] = co_await f.async_publish(item,
///         thoonk::capture_diagnostics(diag, asio::as_tuple(asio::deferred)));
///     if (ec == thoonk::error::server_error) log(diag.server_message());
///
/// The name differs from Boost.MySQL's `with_diagnostics` on purpose: that
/// adapter turns errors into exceptions, which here is what the default
/// token and use_awaitable do (thoonk::error_with_diagnostics).
template <class CompletionToken>
struct capture_diagnostics_t {
  /// The wrapped token's type.
  using token_type = CompletionToken;
  /// Where the server's text goes.
  diagnostics* diag;
  /// The wrapped token.
  CompletionToken token;
};

/// Wraps `token` so that the operation also fills `diag` (see
/// capture_diagnostics_t).
template <class CompletionToken>
capture_diagnostics_t<std::decay_t<CompletionToken>> capture_diagnostics(diagnostics& diag,
                                                                         CompletionToken&& token) {
  return {&diag, std::forward<CompletionToken>(token)};
}

/// The former name of capture_diagnostics_t; removed in the next release.
template <class CompletionToken>
using with_diagnostics_t [[deprecated("use thoonk::capture_diagnostics_t")]] =
    capture_diagnostics_t<CompletionToken>;

/// The former name of capture_diagnostics; removed in the next release.
template <class CompletionToken>
[[deprecated(
    "use thoonk::capture_diagnostics")]] capture_diagnostics_t<std::decay_t<CompletionToken>>
with_diagnostics(diagnostics& diag, CompletionToken&& token) {
  return {&diag, std::forward<CompletionToken>(token)};
}

/// What an operation throws when it completes with an error under
/// boost::asio::use_awaitable (the default completion token,
/// thoonk::default_token_t): the error code, with the server's own words
/// (`NOPERM ...`, a script's error and its line) kept beside it; `what()`
/// has both. It is a boost::system::system_error, so code that catches
/// that keeps working.
class THOONK_API error_with_diagnostics : public boost::system::system_error {
 public:
  /// An exception for `ec`, with the server's text of `diag`.
  error_with_diagnostics(boost::system::error_code ec, diagnostics diag)
      : boost::system::system_error(ec, diag.server_message()), diag_(std::move(diag)) {}
  /// The server's text behind the error (empty when it did not come from a
  /// server reply).
  const diagnostics& get_diagnostics() const noexcept { return diag_; }

 private:
  diagnostics diag_;
};

namespace detail {
struct diagnostics_access {
  static void set(diagnostics* d, std::string_view message) {
    if (d) d->server_message_.assign(message);
  }
};
}  // namespace detail

}  // namespace thoonk
