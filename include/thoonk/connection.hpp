// One multiplexed, pipelined connection to a Redis server.
#pragma once

#include <thoonk/config.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/export.hpp>
#include <thoonk/request.hpp>
#include <thoonk/resp3/value.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace thoonk {

/// One reply per command of the request, in order. A server error reply
/// (`-ERR ...`) is data for its command and does not fail the others.
using response = std::vector<resp3::value>;

/// Per-request options.
struct THOONK_API exec_options {
  /// 0: config::request_timeout applies (itself 0, no timeout, by default).
  /// Otherwise the request fails with error::request_timeout after this
  /// long; if it was already written it is abandoned (its reply is read and
  /// discarded) and may still run on the server.
  std::chrono::milliseconds timeout{0};
  /// true: a request issued while disconnected waits for the reconnect.
  /// false: it fails at once with error::not_connected.
  bool wait_for_connection = true;
};
template <>
inline constexpr bool is_operation_argument_v<exec_options> = true;

/// Observable counters. Monotonic over the connection's life.
struct THOONK_API connection_stats {
  std::uint64_t requests = 0;          ///< exec() calls accepted
  std::uint64_t commands = 0;          ///< commands in those requests
  std::uint64_t writes = 0;            ///< socket write operations (one per coalesced batch)
  std::uint64_t bytes_written = 0;     ///< bytes handed to the socket
  std::uint64_t bytes_read = 0;        ///< bytes read from the socket
  std::uint64_t replies = 0;           ///< replies matched to requests
  std::uint64_t pushes = 0;            ///< out-of-band pushes received
  std::uint64_t connects = 0;          ///< successful connects (first one included)
  std::uint64_t reconnects = 0;        ///< successful connects after a lost connection
  std::uint64_t unknown_outcomes = 0;  ///< requests failed with error::unknown_outcome
  /// Connection setups whose CLIENT SETNAME (or HELLO's SETNAME) the server
  /// refused: an ACL user without +client, or a name with spaces. Not an
  /// error: the connection goes on without a name (see
  /// connection_event::client_name_refused).
  std::uint64_t client_name_refusals = 0;
  /// Setups that failed as a TLS port or a TLS refusal fails them (error::
  /// tls_required, tls_handshake_failed: a reset, a close or silence) and
  /// were repeated at once on a new connection, each with its own
  /// connect_timeout: a proxy restarting or a server dropping its clients
  /// does it to one connection, a TLS port to every one. Only a second
  /// such failure in a row is reported (a refused setup).
  std::uint64_t setup_retries = 0;
};

/// What happened to the connection, for on_event().
struct THOONK_API connection_event {
  /// What happened.
  enum kind_t {
    connected,
    disconnected,
    connect_failed,
    /// During the setup, the server refused the client name (config::
    /// client_name): `error` is error::no_permission (an ACL user without
    /// +client) or error::handshake_failed (e.g. a name with spaces). The
    /// setup goes on without a name; `connected` follows if all else works.
    client_name_refused,
  } kind;                           ///< which event this is
  boost::system::error_code error;  ///< why it was lost or failed (empty for connected)
  int protocol = 0;                 ///< 3 or 2 after `connected`
  /// connect_failed only: the server refused the setup for a reason that
  /// will not go away by itself (error::auth_failed, error::no_permission,
  /// error::handshake_failed for a refused SELECT). Until an attempt
  /// succeeds, requests fail with `error` instead of waiting, and attempts
  /// are spaced by config::reconnect_max_delay.
  bool setup_refused = false;
  /// The server's error reply when a setup command was refused (e.g.
  /// "WRONGPASS invalid username-password pair or user is disabled."),
  /// else empty.
  std::string server_message;
};

namespace detail {
class connection_impl;
struct impl_access;
}  // namespace detail

/// A connection shared by any number of coroutines.
///
/// Requests queue up; a writer coroutine coalesces everything queued into one
/// socket write (pipelining); a reader coroutine parses replies and completes
/// requests in FIFO order. Lost connections are re-established with
/// exponential backoff and jitter; requests not yet written are sent after
/// the reconnect, requests written but unanswered fail with
/// error::unknown_outcome. See docs/architecture.md.
///
/// **Threading**: all operations run on the executor given at construction.
/// Initiating functions may be called from any thread: they dispatch to that
/// executor. With an io_context run by several threads, pass a strand.
///
/// **Lifetime**: destroying the connection stops it (as stop()); pending
/// operations complete with error::client_stopped / error::unknown_outcome.
/// Destroy it on its executor's thread, or after the io_context stopped.
class THOONK_API connection {
 public:
  /// The executor everything of the connection runs on.
  using executor_type = boost::asio::any_io_executor;

  /// Makes the connection without I/O: async_connect() connects.
  connection(executor_type ex, config cfg);
  ~connection();
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;

  executor_type get_executor() const noexcept;  ///< the executor given at construction
  const config& get_config() const noexcept;    ///< the configuration given at construction

  /// Connects (TCP or Unix socket), runs the setup handshake (HELLO 3 with
  /// AUTH/SETNAME, SELECT; RESP2 fallback), and starts the background loops
  /// that keep the connection alive and reconnect it.
  ///
  /// Completion signature: `void(boost::system::error_code)`. Completes after
  /// the first attempt: with success, or with that attempt's error (for
  /// example connection_refused, error::connect_timeout, error::auth_failed,
  /// error::no_permission, error::handshake_failed).
  /// With several addresses (config::endpoints) an attempt is a round over
  /// them: the first that answers ROLE as the primary is used, and the
  /// round fails (error::not_primary when only replicas answered) only when
  /// every address failed; each failed address emits connect_failed.
  /// READONLY, LOADING and MASTERDOWN replies are sent again, not returned
  /// (config::unavailable_retries; docs/reliability.md).
  /// After a failed first attempt the connection keeps retrying in the
  /// background only if config::reconnect is set; call stop() to give up.
  /// Calling async_connect() again while connected completes at once; while not
  /// connected it completes with the next attempt's outcome.
  ///
  /// A refused client name (an ACL user without +client) is not an error:
  /// see connection_stats::client_name_refusals.
  ///
  /// Cancellation: terminal cancellation of the wait completes it with
  /// operation_aborted; the background loop is not affected.
  /// Thread safety: start it on the connection's executor (a strand when the io_context runs on
  /// several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_connect(CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token),
        [impl = impl_](auto handler) { start_connect(impl, std::move(handler)); });
  }
  /// Deprecated: async_connect.
  template <class CompletionToken>
  [[deprecated("use async_connect")]] auto connect(CompletionToken&& token) {
    return async_connect(std::forward<CompletionToken>(token));
  }

  /// Sends a request and completes with one reply per expected reply.
  ///
  /// Completion signature: `void(boost::system::error_code, thoonk::response)`.
  /// Errors: error::unknown_outcome (written, then the connection was lost),
  /// error::request_timeout (`opts.timeout`, else config::request_timeout),
  /// error::not_connected (only when `opts.wait_for_connection` is false, or
  /// when config::reconnect is off and the connection is gone),
  /// error::auth_failed / error::no_permission / error::handshake_failed
  /// (the server refused the connection setup: issued or queued while no
  /// connection is up, the request fails instead of waiting, see
  /// connection_event::setup_refused), error::client_stopped,
  /// operation_aborted (cancelled). Server error replies are data, not
  /// errors.
  ///
  /// `req` is copied into the connection's write buffer when the operation is
  /// initiated, so it must stay valid until then (for `use_awaitable` and
  /// callbacks: until async_exec() returns; for `deferred`: until the deferred
  /// operation is launched) and may be reused or destroyed afterwards.
  ///
  /// Cancellation (terminal, partial, total): a request not yet written is
  /// removed and never sent; a written one is marked abandoned, completes
  /// with operation_aborted at once, and its reply is discarded when it
  /// arrives, so later replies stay aligned.
  /// Thread safety: start it on the connection's executor (a strand when the io_context runs on
  /// several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_exec(const request& req, CompletionToken&& token = {}) {
    return async_exec(req, exec_options{}, std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_exec.
  template <class CompletionToken>
  [[deprecated("use async_exec")]] auto exec(const request& req, CompletionToken&& token) {
    return async_exec(req, std::forward<CompletionToken>(token));
  }
  /// async_exec() with per-request options (exec_options: a deadline, the retry policy). Completion
  /// `void(error_code, response)`; errors, cancellation and thread safety as async_exec(req) above.
  template <completion_token CompletionToken = default_token_t>
  auto async_exec(const request& req, exec_options opts, CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, response)>(
        std::forward<CompletionToken>(token), [impl = impl_, r = &req, opts](auto handler) {
          start_exec(impl, *r, opts, std::move(handler));
        });
  }
  /// Deprecated: async_exec.
  template <class CompletionToken>
  [[deprecated("use async_exec")]] auto exec(const request& req, exec_options opts,
                                             CompletionToken&& token) {
    return async_exec(req, std::move(opts), std::forward<CompletionToken>(token));
  }

  /// Closes the connection and stops reconnecting. Pending requests complete
  /// with error::client_stopped (not yet written) or error::unknown_outcome
  /// (written). Idempotent.
  void stop();

  /// True while a connection is established and set up.
  bool is_connected() const noexcept;
  /// The negotiated protocol: 3, 2, or 0 when not connected.
  int protocol() const noexcept;
  /// A snapshot of the counters; call on the connection's executor.
  connection_stats stats() const noexcept;

  /// Registers a listener for connect/disconnect events. Listeners run on
  /// the connection's executor and must not block.
  void on_event(std::function<void(const connection_event&)> listener);

 private:
  using connect_handler = detail::op_handler<void(boost::system::error_code)>;
  using exec_handler = detail::op_handler<void(boost::system::error_code, response)>;
  static void start_connect(std::shared_ptr<detail::connection_impl> impl, connect_handler h);
  static void start_exec(std::shared_ptr<detail::connection_impl> impl, const request& req,
                         exec_options opts, exec_handler h);

  friend struct detail::impl_access;
  std::shared_ptr<detail::connection_impl> impl_;
};

}  // namespace thoonk
