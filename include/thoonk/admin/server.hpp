// thoonk::admin: an embeddable HTTP/1.1 server that shows and steers the
// feeds, queues and job queues of one Redis server: a JSON API and a
// dashboard page embedded in the binary (docs/operations.md).
//
// Link the CMake target thoonk::admin. The server runs on the client's
// executor, next to the application's own servers:
//
//     thoonk::admin::options opts;           // 127.0.0.1:8089, no token
//     thoonk::admin::server srv(client, opts);
//     co_await srv.async_run();              // until cancelled
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/completion.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <system_error>
#include <type_traits>

namespace thoonk::admin {

/// Errors of the admin server's own set-up (the HTTP answers carry theirs
/// as JSON, docs/operations.md "Errors").
enum class errc {
  /// options::address is not a loopback address and options::token is
  /// empty: anyone who reaches the port could steer the queues.
  token_required = 1,
  /// options::token is set but shorter than 16 bytes.
  token_too_short,
  /// options::address is not an IPv4 or IPv6 address.
  invalid_address,
  /// A limit in options is 0 or out of its range.
  invalid_limit,
  /// The client talks to a Redis Cluster (config::cluster): the server's
  /// listings read one server's keys, so it serves single servers only.
  cluster_not_supported,
};

const boost::system::error_category& admin_category() noexcept;
boost::system::error_code make_error_code(errc e) noexcept;

/// How the server listens and what it allows.
struct options {
  /// The address to listen on (IPv4 or IPv6, no host names). The default,
  /// loopback, is reachable from this machine only; any other address
  /// needs `token`.
  std::string address = "127.0.0.1";
  /// The TCP port; 0 picks a free one (server::local_endpoint() tells).
  unsigned short port = 8089;
  /// The access token: when set, every /api request must carry
  /// `Authorization: Bearer <token>` (compared in constant time). Required
  /// (at least 16 bytes) for a non-loopback address; optional on loopback.
  std::string token;
  /// Every write (POST) is answered 405 and nothing changes.
  bool read_only = false;
  /// Largest request body accepted (bytes); larger: 413.
  std::size_t max_body_bytes = 64 * 1024;
  /// Largest request line plus headers (bytes); larger: 431.
  std::size_t max_header_bytes = 16 * 1024;
  /// Most header fields in one request; more: 431.
  std::size_t max_header_fields = 64;
  /// A request's head and body must arrive within this time, and an idle
  /// keep-alive connection is closed after it (a client that trickles
  /// bytes cannot hold a connection longer).
  std::chrono::milliseconds request_timeout{10000};
  /// Connections served at once; further ones wait in the listen backlog
  /// until one closes.
  std::size_t max_connections = 64;
  /// Most jobs one "retry all dead letters" call retries (1..1000); it
  /// answers a cursor to continue with.
  std::size_t max_retry_batch = 500;
};

/// One listening address serving the JSON API (`/api/...`) and the
/// dashboard (`/`) for the feeds and queues of `client`'s server.
///
/// **Threading**: every operation runs on the client's executor (a strand
/// when the io_context has several threads); call members from it.
/// **Lifetime**: the client must outlive the server; the server must
/// outlive async_run()'s completion.
class server {
 public:
  /// A server for `c`'s feeds and queues with `opts`; no I/O until listen()
  /// or async_run(). The options are checked there.
  server(client& c, options opts);
  /// Destroy it only once async_run() has completed (cancel it first).
  ~server();
  server(const server&) = delete;
  server& operator=(const server&) = delete;

  /// Checks the options and binds the listening socket, without waiting.
  /// Called by async_run() when not called before; call it first to learn
  /// local_endpoint() (port 0). Errors: errc::token_required,
  /// errc::token_too_short, errc::invalid_address, errc::invalid_limit,
  /// errc::cluster_not_supported (nothing bound), or the system's error from bind/listen (e.g.
  /// address_in_use). Calling it again after success does nothing.
  boost::system::error_code listen();

  /// The bound address (after listen()), else a default endpoint.
  boost::asio::ip::tcp::endpoint local_endpoint() const;

  /// Accepts and serves connections until cancelled (any cancellation
  /// type, through the completion token's cancellation slot: `||` with a
  /// timer, a cancellation signal, ...). On cancellation it stops
  /// accepting, closes every connection (a request being answered is cut)
  /// and completes once they are gone.
  ///
  /// Completion `void(error_code)`: operation_aborted after a cancellation;
  /// listen()'s errors; an accept error that is not transient. Only one
  /// async_run() per server at a time (a second completes at once with
  /// boost::asio::error::already_started).
  template <completion_token CompletionToken = default_token_t>
  auto async_run(CompletionToken&& token = {}) {
    return boost::asio::async_initiate<CompletionToken, void(boost::system::error_code)>(
        [this](auto handler) {
          start_run(boost::asio::any_completion_handler<void(boost::system::error_code)>(
              std::move(handler)));
        },
        token);
  }

  class impl;

 private:
  void start_run(boost::asio::any_completion_handler<void(boost::system::error_code)> h);
  std::shared_ptr<impl> impl_;
};

}  // namespace thoonk::admin

template <>
struct boost::system::is_error_code_enum<thoonk::admin::errc> : std::true_type {};
