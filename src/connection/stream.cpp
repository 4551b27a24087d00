#include "connection/stream.hpp"

#include <thoonk/config.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <string>

namespace thoonk::detail {

namespace asio = boost::asio;

namespace {
constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);
}

// One generic stream socket carries both TCP and Unix domain connections.
// A TLS layer (asio::ssl::stream over this socket) would sit beside it:
// read_some/write pick the layer when one is set (one branch per call),
// handshake_layer() runs its handshake, close() shuts it down.
struct stream::impl {
  explicit impl(const asio::any_io_executor& ex) : executor(ex), socket(ex) {}

  // The transport's own setup after the socket connected. A plain socket
  // has none; TLS runs its handshake here (client side, SNI from the host).
  asio::awaitable<error_code> handshake_layer(const config&) { co_return error_code{}; }

  asio::any_io_executor executor;
  asio::generic::stream_protocol::socket socket;
  transport kind = transport::none;
};

stream::stream(const asio::any_io_executor& ex) : impl_(std::make_unique<impl>(ex)) {}

stream::~stream() = default;

asio::awaitable<stream::error_code> stream::connect(const config& cfg) {
  close();
  auto& s = *impl_;
  // A fresh socket per attempt: the protocol (AF_UNIX, AF_INET, AF_INET6)
  // is chosen by the endpoint it connects to.
  s.socket = asio::generic::stream_protocol::socket(s.executor);

  if (!cfg.unix_socket.empty()) {
    asio::generic::stream_protocol::endpoint ep{
        asio::local::stream_protocol::endpoint(cfg.unix_socket)};
    auto [e] = co_await s.socket.async_connect(ep, use_nothrow);
    if (e) co_return e;
    s.kind = transport::unix_domain;
    co_return co_await s.handshake_layer(cfg);
  }

  asio::ip::tcp::resolver resolver(s.executor);
  auto [rec, results] =
      co_await resolver.async_resolve(cfg.host, std::to_string(cfg.port), use_nothrow);
  if (rec) co_return rec;
  error_code ec = asio::error::host_not_found;
  for (const auto& entry : results) {
    error_code ignored;
    s.socket.close(ignored);
    s.socket = asio::generic::stream_protocol::socket(s.executor);
    asio::generic::stream_protocol::endpoint ep{entry.endpoint()};
    auto [e] = co_await s.socket.async_connect(ep, use_nothrow);
    ec = e;
    if (!ec) {
      s.socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      break;
    }
  }
  if (ec) co_return ec;
  s.kind = transport::tcp;
  co_return co_await s.handshake_layer(cfg);
}

// Not coroutines: these return the socket operation's own awaitable, so a
// read or write costs exactly what it cost on the bare socket.
asio::awaitable<stream::io_result> stream::read_some(asio::mutable_buffer b) {
  return impl_->socket.async_read_some(b, use_nothrow);
}

asio::awaitable<stream::io_result> stream::write(asio::const_buffer b) {
  return asio::async_write(impl_->socket, b, use_nothrow);
}

void stream::close() noexcept {
  error_code ignored;
  impl_->socket.close(ignored);
  impl_->kind = transport::none;
}

bool stream::is_open() const noexcept { return impl_->socket.is_open(); }

stream::transport stream::kind() const noexcept { return impl_->kind; }

}  // namespace thoonk::detail
