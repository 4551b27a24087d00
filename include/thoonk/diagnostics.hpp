// The server's own words about a failed operation.
#pragma once

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
/// Pass it with thoonk::with_diagnostics to any asynchronous operation of
/// the library; the operation sets it before it completes: the server's
/// text when the error came from a server reply, empty otherwise (success
/// included). **Lifetime**: it must outlive the operation. **Threading**:
/// written on the client's executor just before the completion handler
/// runs; read it from the handler or after the co_await.
class diagnostics {
 public:
  /// The server's error text; empty when the error did not come from the
  /// server (or there was no error).
  const std::string& server_message() const noexcept { return server_message_; }
  void clear() noexcept { server_message_.clear(); }

 private:
  friend struct detail::diagnostics_access;
  std::string server_message_;
};

/// A completion token adapter: `token` completes as before, and `diag`
/// receives the server's error text. Works with every completion token
/// (use_awaitable, deferred, callbacks, ...) on the library's operations:
///
///     thoonk::diagnostics diag;
///     auto [ec, r] = co_await f.publish(item,
///         thoonk::with_diagnostics(diag, asio::as_tuple(asio::use_awaitable)));
///     if (ec == thoonk::error::server_error) log(diag.server_message());
template <class CompletionToken>
struct with_diagnostics_t {
  using token_type = CompletionToken;
  diagnostics* diag;
  CompletionToken token;
};

template <class CompletionToken>
with_diagnostics_t<std::decay_t<CompletionToken>> with_diagnostics(diagnostics& diag,
                                                                   CompletionToken&& token) {
  return {&diag, std::forward<CompletionToken>(token)};
}

namespace detail {
struct diagnostics_access {
  static void set(diagnostics* d, std::string_view message) {
    if (d) d->server_message_.assign(message);
  }
};
}  // namespace detail

}  // namespace thoonk
