// Bad input from the server side: malformed and oversized replies, and a
// server without HELLO. Oversized replies use the real redis-server; the
// malformed-bytes and no-HELLO cases need a peer that misbehaves on
// purpose, so they use a tiny scripted TCP peer on loopback (it is not a
// Redis stand-in: it only sends the bytes each case needs, then closes).
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/connection.hpp>
#include <thoonk/error.hpp>

#include <boost/asio.hpp>
#include <catch2/catch.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
using thoonk::test::cmd;
using thoonk::test::run_coro;
using thoonk::test::test_config;

namespace {
constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// Accepts one connection; for each scripted reply, waits for the client to
// send something, then answers with the reply's bytes. Closes at the end.
asio::awaitable<void> scripted_peer(asio::ip::tcp::acceptor& acceptor,
                                    std::vector<std::string> replies, std::string* received) {
  auto [ec, sock] = co_await acceptor.async_accept(nothrow);
  if (ec) co_return;
  char buf[4096];
  for (auto& reply : replies) {
    auto [rec, n] = co_await sock.async_read_some(asio::buffer(buf), nothrow);
    if (rec) co_return;
    if (received) received->append(buf, n);
    auto [wec, wn] = co_await asio::async_write(sock, asio::buffer(reply), nothrow);
    if (wec) co_return;
  }
  // Hold the socket a moment so the client reads the last reply first.
  asio::steady_timer t(co_await asio::this_coro::executor, 200ms);
  co_await t.async_wait(nothrow);
}

thoonk::config peer_config(const asio::ip::tcp::acceptor& a) {
  auto cfg = test_config();
  cfg.host = "127.0.0.1";
  cfg.port = a.local_endpoint().port();
  cfg.client_name.clear();
  cfg.reconnect = false;
  cfg.connect_timeout = 2s;
  return cfg;
}
}  // namespace

TEST_CASE("protocol: a malformed reply fails its request with the parser's error",
          "[connection][protocol]") {
  struct vector_case {
    std::string bytes;
    thoonk::error expected;
  };
  auto c = GENERATE(vector_case{"$18446744073709551615\r\n", thoonk::error::invalid_length},
                    vector_case{"*-2\r\n", thoonk::error::invalid_length},
                    vector_case{"$3abc\r\n", thoonk::error::invalid_length},
                    vector_case{"?what\r\n", thoonk::error::invalid_type_byte},
                    vector_case{"$3\r\nabcXY", thoonk::error::missing_crlf},
                    vector_case{":12x\r\n", thoonk::error::invalid_number});
  asio::io_context ioc;
  asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  thoonk::connection conn(ioc.get_executor(), peer_config(acceptor));
  asio::co_spawn(ioc, scripted_peer(acceptor, {"%1\r\n+proto\r\n:3\r\n", c.bytes}, nullptr),
                 asio::detached);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await conn.connect(asio::use_awaitable);
    CHECK(conn.protocol() == 3);
    thoonk::request r;
    r.push("GET", "x");
    auto [ec, resp] = co_await conn.exec(r, nothrow);
    CHECK(ec == c.expected);
    CHECK(!ec.message().empty());
    conn.stop();
  });
}

TEST_CASE("protocol: a server that does not know HELLO gets RESP2", "[connection][protocol]") {
  asio::io_context ioc;
  asio::ip::tcp::acceptor acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  auto cfg = peer_config(acceptor);
  cfg.client_name = "old-server-test";
  thoonk::connection conn(ioc.get_executor(), cfg);
  std::string received;
  asio::co_spawn(ioc,
                 scripted_peer(acceptor,
                               {"-ERR unknown command 'HELLO'\r\n", "+OK\r\n", "$4\r\npong\r\n"},
                               &received),
                 asio::detached);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await conn.connect(asio::use_awaitable);
    CHECK(conn.protocol() == 2);
    auto v = co_await cmd(conn, "ECHO", "pong");
    CHECK(v.str == "pong");
    conn.stop();
  });
  CHECK(received.find("HELLO") != std::string::npos);
  CHECK(received.find("SETNAME") != std::string::npos);
}

TEST_CASE("protocol: an oversized reply is refused and the connection recovers",
          "[connection][protocol]") {
  asio::io_context ioc;
  auto cfg = test_config();
  cfg.limits.max_bulk_length = 1024;
  thoonk::connection conn(ioc.get_executor(), cfg);
  thoonk::connection admin(ioc.get_executor(), test_config());
  auto key = thoonk::test::unique_name("big");
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await conn.connect(asio::use_awaitable);
    co_await admin.connect(asio::use_awaitable);
    co_await cmd(admin, "SET", key, std::string(4096, 'x'));
    thoonk::request r;
    r.push("GET", key);
    auto [ec, resp] = co_await conn.exec(r, nothrow);
    CHECK(ec == thoonk::error::bulk_too_large);
    // The stream could not be trusted any more: the connection was replaced.
    auto v = co_await cmd(conn, "STRLEN", key);
    CHECK(v.integer == 4096);
    CHECK(conn.stats().reconnects >= 1);
    co_await cmd(admin, "DEL", key);
    conn.stop();
    admin.stop();
  });
}
