// Bad input from the server side: malformed and oversized replies, and a
// server without HELLO. Oversized replies use the real redis-server; the
// malformed-bytes and no-HELLO cases need a peer that misbehaves on
// purpose, so they use a scripted TCP peer on loopback
// (support/loopback.hpp: not a Redis stand-in, it sends only the bytes each
// case needs).
#include "support/helpers.hpp"
#include "support/loopback.hpp"

using namespace thoonk::test;

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
  scripted_peer peer(ioc, {{"%1\r\n+proto\r\n:3\r\n", c.bytes}});
  auto cfg = peer.config();
  cfg.reconnect = false;
  thoonk::connection conn(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await conn.async_connect(asio::use_awaitable);
    CHECK(conn.protocol() == 3);
    thoonk::request r;
    r.push("GET", "x");
    auto [ec, resp] = co_await conn.async_exec(r, nothrow);
    CHECK(ec == c.expected);
    CHECK(!ec.message().empty());
    conn.stop();
  });
}

TEST_CASE("protocol: a server that does not know HELLO gets RESP2", "[connection][protocol]") {
  asio::io_context ioc;
  scripted_peer peer(ioc, {{"-ERR unknown command 'HELLO'\r\n", "+OK\r\n", "$4\r\npong\r\n"}});
  auto cfg = peer.config();
  cfg.client_name = "old-server-test";
  cfg.reconnect = false;
  thoonk::connection conn(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await conn.async_connect(asio::use_awaitable);
    CHECK(conn.protocol() == 2);
    auto v = co_await cmd(conn, "ECHO", "pong");
    CHECK(v.str == "pong");
    conn.stop();
  });
  CHECK(peer.received().find("HELLO") != std::string::npos);
  CHECK(peer.received().find("SETNAME") != std::string::npos);
}

TEST_CASE("protocol: an oversized reply is refused and the connection recovers",
          "[connection][protocol]") {
  asio::io_context ioc;
  auto cfg = test_config();
  cfg.limits.max_bulk_length = 1024;
  thoonk::connection conn(ioc.get_executor(), cfg);
  thoonk::connection admin(ioc.get_executor(), test_config());
  auto key = unique_name("big");
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await connect_all(conn, admin);
    co_await cmd(admin, "SET", key, std::string(4096, 'x'));
    thoonk::request r;
    r.push("GET", key);
    auto [ec, resp] = co_await conn.async_exec(r, nothrow);
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
