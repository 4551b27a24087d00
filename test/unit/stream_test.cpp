// The transport seam (src/connection/stream.hpp) against in-process
// listeners: both socket kinds, byte round trips, close during a read,
// failed connects. No Redis here: the stream only moves bytes.
// (No co_await inside Catch macros: g++ 12 evaluates it more than once.)
#include "connection/stream.hpp"

#include "support/helpers.hpp"
#include "support/loopback.hpp"
#include "support/run_coro.hpp"

#include <thoonk/config.hpp>
#include <thoonk/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <catch2/catch.hpp>

#include <unistd.h>
#include <cstdio>
#include <filesystem>
#include <string>

namespace asio = boost::asio;
using thoonk::detail::stream;
using thoonk::test::nothrow;
using namespace std::chrono_literals;

namespace {

// Accepts one connection, reads `expect` bytes, answers `answer`, then
// keeps the socket open until the test ends.
template <class Acceptor, class Socket>
asio::awaitable<void> serve_once(Acceptor& acc, Socket& peer, std::size_t expect,
                                 std::string answer, std::string& got) {
  auto [ec] = co_await acc.async_accept(peer, nothrow);
  if (ec) co_return;
  got.resize(expect);
  auto [rec, n] = co_await asio::async_read(peer, asio::buffer(got), nothrow);
  got.resize(n);
  if (rec) co_return;
  co_await asio::async_write(peer, asio::buffer(answer), nothrow);
}

asio::awaitable<std::string> read_exactly(stream& s, std::size_t n) {
  std::string out;
  char buf[64];
  while (out.size() < n) {
    auto [ec, k] = co_await s.read_some(asio::buffer(buf));
    if (ec) break;
    out.append(buf, k);
  }
  co_return out;
}

std::string temp_socket_path() {
  auto p = std::filesystem::temp_directory_path() /
           ("thoonk-stream-" + std::to_string(::getpid()) + ".sock");
  std::filesystem::remove(p);
  return p.string();
}

// A TCP case: a loopback listener, the socket it accepts into, the stream
// under test and a config pointing at the listener.
struct tcp_case {
  asio::io_context ioc;
  asio::ip::tcp::acceptor acc{ioc, {asio::ip::make_address("127.0.0.1"), 0}};
  asio::ip::tcp::socket peer{ioc};
  stream s{ioc.get_executor()};
  thoonk::config cfg = loopback_config(acc.local_endpoint().port());

  static thoonk::config loopback_config(unsigned short port) {
    thoonk::config cfg;
    cfg.host = "127.0.0.1";
    cfg.port = port;
    return cfg;
  }
};

}  // namespace

TEST_CASE("stream: TCP connect, write and read go through the stream", "[unit][stream]") {
  tcp_case t;
  auto& s = t.s;
  std::string got;
  asio::co_spawn(t.ioc, serve_once(t.acc, t.peer, 5, "world", got), asio::detached);
  CHECK(!s.is_open());
  CHECK(s.kind() == stream::transport::none);
  thoonk::test::run_coro(t.ioc, [&]() -> asio::awaitable<void> {
    auto ec = co_await s.connect(t.cfg);
    REQUIRE(!ec);
    CHECK(s.is_open());
    CHECK(s.kind() == stream::transport::tcp);
    std::string hello = "hello";
    auto [wec, n] = co_await s.write(asio::buffer(hello));
    CHECK(!wec);
    CHECK(n == 5);
    const auto answer = co_await read_exactly(s, 5);
    CHECK(answer == "world");
    CHECK(got == "hello");
    s.close();
    CHECK(!s.is_open());
    CHECK(s.kind() == stream::transport::none);
  });
}

TEST_CASE("stream: a Unix socket path goes through the same stream", "[unit][stream]") {
  asio::io_context ioc;
  const auto path = temp_socket_path();
  asio::local::stream_protocol::acceptor acc(ioc, asio::local::stream_protocol::endpoint(path));
  asio::local::stream_protocol::socket peer(ioc);
  std::string got;
  asio::co_spawn(ioc, serve_once(acc, peer, 4, "pong", got), asio::detached);
  stream s(ioc.get_executor());
  thoonk::config cfg;
  cfg.host = "host.invalid";  // ignored: the Unix socket wins
  cfg.unix_socket = path;
  thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto ec = co_await s.connect(cfg);
    REQUIRE(!ec);
    CHECK(s.kind() == stream::transport::unix_domain);
    std::string ping = "ping";
    auto [wec, n] = co_await s.write(asio::buffer(ping));
    CHECK(!wec);
    const auto answer = co_await read_exactly(s, 4);
    CHECK(answer == "pong");
    CHECK(got == "ping");
    s.close();
  });
  std::filesystem::remove(path);
}

TEST_CASE("stream: close during a read completes the read", "[unit][stream]") {
  tcp_case t;
  auto& s = t.s;
  t.acc.async_accept(t.peer, [](boost::system::error_code) {});  // accepts, never writes
  thoonk::test::run_coro(t.ioc, [&]() -> asio::awaitable<void> {
    const auto cec = co_await s.connect(t.cfg);
    REQUIRE(!cec);
    bool read_started = false, read_done = false;
    boost::system::error_code read_ec;
    char buf[16];
    asio::co_spawn(
        t.ioc,
        [&]() -> asio::awaitable<void> {
          read_started = true;  // the read starts in this same step
          auto [ec, n] = co_await s.read_some(asio::buffer(buf));
          read_ec = ec;
          read_done = true;
        },
        asio::detached);
    // Once the read has started, close under it.
    auto started = co_await thoonk::test::wait_until([&] { return read_started; });
    REQUIRE(started);
    CHECK(!read_done);
    s.close();
    auto ended = co_await thoonk::test::wait_until([&] { return read_done; });
    CHECK(ended);
    CHECK(read_ec == asio::error::operation_aborted);
    CHECK(!s.is_open());
  });
}

TEST_CASE("stream: the peer closing ends a read with eof", "[unit][stream]") {
  tcp_case t;
  auto& s = t.s;
  t.acc.async_accept(t.peer, [&](boost::system::error_code ec) {
    if (!ec) t.peer.close();
  });
  thoonk::test::run_coro(t.ioc, [&]() -> asio::awaitable<void> {
    const auto cec = co_await s.connect(t.cfg);
    REQUIRE(!cec);
    char buf[16];
    auto [ec, n] = co_await s.read_some(asio::buffer(buf));
    CHECK(ec == asio::error::eof);
    CHECK(n == 0);
  });
}

TEST_CASE("stream: a failed connect leaves no transport; a later one succeeds", "[unit][stream]") {
  tcp_case t;
  auto& s = t.s;
  auto& cfg = t.cfg;
  t.acc.async_accept(t.peer, [](boost::system::error_code) {});
  thoonk::test::run_coro(t.ioc, [&]() -> asio::awaitable<void> {
    cfg.port = thoonk::test::free_port(t.ioc);  // nothing listens there
    auto ec = co_await s.connect(cfg);
    CHECK(ec);
    CHECK(s.kind() == stream::transport::none);
    cfg.unix_socket = "/nonexistent-thoonk-dir/redis.sock";
    ec = co_await s.connect(cfg);
    CHECK(ec);
    CHECK(s.kind() == stream::transport::none);
    cfg.unix_socket.clear();
    cfg.port = t.acc.local_endpoint().port();
    ec = co_await s.connect(cfg);
    CHECK(!ec);
    CHECK(s.kind() == stream::transport::tcp);
    s.close();
  });
}

// ---- TLS ---------------------------------------------------------------------------
// The TLS layer against in-process peers that are not TLS servers: what a
// failed setup is called and why. (Real TLS servers: test/integration/
// tls_test.cpp.)

TEST_CASE("stream: TLS files that do not load fail the connect with tls_config_invalid",
          "[unit][stream][tls]") {
  tcp_case t;
  t.acc.async_accept(t.peer, [](boost::system::error_code) {});
  t.cfg.tls.enabled = true;
  t.cfg.tls.ca_file = "/nonexistent/thoonk-ca.pem";
  thoonk::test::run_coro(t.ioc, [&]() -> asio::awaitable<void> {
    auto ec = co_await t.s.connect(t.cfg);
    CHECK(ec == thoonk::error::tls_config_invalid);
    CHECK(stream::is_refusal(ec));
    CHECK(t.s.failure_detail().find("/nonexistent/thoonk-ca.pem") != std::string::npos);
    CHECK_FALSE(t.s.tls());
    t.s.close();
  });
}

TEST_CASE("stream: a peer answering a ClientHello with plain bytes fails the TLS handshake",
          "[unit][stream][tls]") {
  tcp_case t;
  std::string got;
  // What a plain Redis says to bytes it does not understand.
  asio::co_spawn(t.ioc,
                 serve_once(t.acc, t.peer, 5, "-ERR unknown command '\\x16\\x03\\x01'\r\n", got),
                 asio::detached);
  t.cfg.tls.enabled = true;
  t.cfg.tls.verify_peer = false;
  thoonk::test::run_coro(t.ioc, [&]() -> asio::awaitable<void> {
    auto ec = co_await t.s.connect(t.cfg);
    CHECK(ec == thoonk::error::tls_handshake_failed);
    CHECK(stream::is_refusal(ec));
    INFO(t.s.failure_detail());
    CHECK(t.s.failure_detail().find("TLS handshake failed") != std::string::npos);
    // The ClientHello went out: a TLS handshake record.
    REQUIRE(!got.empty());
    CHECK(got[0] == '\x16');
    t.s.close();
  });
}

TEST_CASE("stream: what a failed setup is called", "[unit][stream][tls]") {
  tcp_case t;
  t.acc.async_accept(t.peer, [](boost::system::error_code) {});
  thoonk::test::run_coro(t.ioc, [&]() -> asio::awaitable<void> {
    auto ec = co_await t.s.connect(t.cfg);
    REQUIRE(!ec);
    const boost::system::error_code reset = asio::error::connection_reset;
    // A plain TCP connection reset before any answer: a TLS port.
    CHECK(t.s.setup_error(reset, false) == thoonk::error::tls_required);
    CHECK(t.s.failure_detail().find("rediss://") != std::string::npos);
    CHECK(stream::is_refusal(thoonk::error::tls_required));
    // After an answer, or another error, it is what it was.
    CHECK(t.s.setup_error(reset, true) == reset);
    const boost::system::error_code eof = asio::error::eof;
    CHECK(t.s.setup_error(eof, false) == eof);
    CHECK(t.s.setup_error(thoonk::error::connect_timeout, false) == thoonk::error::connect_timeout);
    CHECK(t.s.setup_error({}, false) == boost::system::error_code{});
    CHECK_FALSE(stream::is_refusal(reset));
    CHECK_FALSE(stream::is_refusal(thoonk::error::auth_failed));
    // Read from a reset or silence, which a passing fault also causes: the
    // connection asks once more. What verification or a file decided, not.
    CHECK(stream::needs_confirming(thoonk::error::tls_required));
    CHECK(stream::needs_confirming(thoonk::error::tls_handshake_failed));
    CHECK_FALSE(stream::needs_confirming(thoonk::error::tls_certificate_rejected));
    CHECK_FALSE(stream::needs_confirming(thoonk::error::tls_config_invalid));
    CHECK_FALSE(stream::needs_confirming(thoonk::error::auth_failed));
    CHECK_FALSE(stream::needs_confirming(reset));
    CHECK_FALSE(stream::needs_confirming({}));
    t.s.close();
  });
}
