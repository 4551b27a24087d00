// The transport seam under a connection: the byte stream it connects,
// reads, writes and closes. A plain socket (TCP or Unix domain), or TLS
// over it (config::tls: an OpenSSL layer on the socket and a handshake
// step after the connect, all in stream.cpp), without touching the
// connection's protocol logic in connection_impl.
//
// The header keeps Asio's socket, resolver and ssl templates out: the
// implementation lives in stream.cpp behind a pointer allocated once per
// stream. The hot path costs what the bare socket cost: one out-of-line
// call per read_some or write (never per byte), no allocation (the
// returned awaitables use Asio's recycled coroutine frames), reads go
// straight into the caller's buffer and a batch is one write.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/buffer.hpp>
#include <boost/system/error_code.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <tuple>

namespace thoonk {
struct config;
}

namespace thoonk::detail {

class stream {
 public:
  /// What the stream runs over; none while closed or before a connect.
  enum class transport { none, tcp, unix_domain };

  using error_code = boost::system::error_code;
  using io_result = std::tuple<error_code, std::size_t>;

  explicit stream(const boost::asio::any_io_executor& ex);
  ~stream();
  stream(const stream&) = delete;
  stream& operator=(const stream&) = delete;

  /// Closes whatever was open, then connects as `cfg` says: the Unix socket
  /// `cfg.unix_socket` when set, else `cfg.host:cfg.port` (resolved; each
  /// address tried in turn; TCP_NODELAY set), then runs the transport's
  /// handshake step (none for a plain socket; with cfg.tls.enabled the TLS
  /// client handshake: SNI, certificate and host name verification, TLS 1.2
  /// or later). Not bounded in time: the caller races it against its
  /// connect timeout and close() ends it.
  ///
  /// TLS failures come back as error::tls_config_invalid (the CA, cert or
  /// key would not load), tls_certificate_rejected (the server's
  /// certificate failed verification) or tls_handshake_failed (anything
  /// else), with OpenSSL's reason in failure_detail().
  boost::asio::awaitable<error_code> connect(const config& cfg);

  /// The error a setup that failed with `ec` reports; `answered`: the
  /// server sent at least one byte during the setup. While TLS is in use,
  /// an OpenSSL error during the first exchanges (a TLS 1.3 server refuses
  /// the client certificate only after the handshake, in its first record)
  /// becomes tls_handshake_failed with the reason in failure_detail(), and
  /// a timeout while the TLS handshake was still running becomes
  /// tls_handshake_failed too (a plain port never answers a ClientHello).
  /// On a plain TCP connection, a reset before any answer becomes
  /// tls_required: that is how a TLS port (OpenSSL: "wrong version
  /// number") drops a plain client, while Redis itself closes a connection
  /// it refuses with an error reply or a clean close (a proxy restarting
  /// can do it too, once: see needs_confirming). Other errors come back
  /// unchanged.
  error_code setup_error(error_code ec, bool answered);
  /// Why the last connect or setup failed, in OpenSSL's and the
  /// certificate's words (e.g. "certificate verify failed: certificate has
  /// expired (subject CN=..., not after ...)"); empty when it had nothing
  /// to add.
  const std::string& failure_detail() const noexcept;
  /// True for the errors that mean this transport's setup was refused and
  /// will be again until the config or the server changes (the TLS
  /// errors): the connection then backs off to its longest delay.
  static bool is_refusal(error_code ec) noexcept;
  /// True for the refusals a passing fault can also cause, tls_required
  /// and tls_handshake_failed: a reset, a close or silence where a TLS port
  /// or a TLS server refusing this client answers the same way. A proxy or
  /// load balancer restarting, or a server dropping its clients, does it to
  /// one setup; the connection confirms these on a new connection before
  /// acting on them. A certificate that fails verification or a TLS file
  /// that does not load is the same on every connection.
  static bool needs_confirming(error_code ec) noexcept;
  /// Whether the open stream runs TLS.
  bool tls() const noexcept;

  /// Reads what is available, at least one byte, into `b`.
  boost::asio::awaitable<io_result> read_some(boost::asio::mutable_buffer b);
  /// Writes all of `b` (one call for a whole batch).
  boost::asio::awaitable<io_result> write(boost::asio::const_buffer b);

  /// Closes the transport. Pending reads and writes complete (with
  /// operation_aborted). Never throws; closing a closed stream does nothing.
  void close() noexcept;
  bool is_open() const noexcept;
  transport kind() const noexcept;

 private:
  struct impl;
  std::unique_ptr<impl> impl_;
};

}  // namespace thoonk::detail
