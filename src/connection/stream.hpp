// The transport seam under a connection: the byte stream it connects,
// reads, writes and closes. Today a plain socket (TCP or Unix domain);
// TLS plugs in here (stream.cpp: a layer on the socket and a handshake
// step after the connect) without touching the connection's protocol
// logic in connection_impl.
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
  /// handshake step (none for a plain socket; the TLS handshake). Not
  /// bounded in time: the caller races it against its connect timeout and
  /// close() ends it.
  boost::asio::awaitable<error_code> connect(const config& cfg);

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
