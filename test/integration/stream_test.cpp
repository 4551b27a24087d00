// The connection runs over the transport seam (src/connection/stream.hpp)
// for both socket kinds, against a real redis-server.
#include "connection/connection_impl.hpp"

#include "support/helpers.hpp"
#include "support/redis_server.hpp"
#include "support/run_coro.hpp"

#include <thoonk/config.hpp>
#include <thoonk/request.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/async_result.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <catch2/catch.hpp>

namespace asio = boost::asio;
using thoonk::detail::connection_impl;
using thoonk::detail::stream;
using thoonk::test::nothrow;

namespace {

asio::awaitable<boost::system::error_code> connect(connection_impl& c) {
  auto [ec] = co_await asio::async_initiate<decltype(nothrow), void(boost::system::error_code)>(
      [&c](auto h) { c.async_connect(thoonk::detail::connect_handler(std::move(h))); }, nothrow);
  co_return ec;
}

asio::awaitable<std::string> ping(connection_impl& c) {
  thoonk::request r;
  r.push("PING");
  auto [ec, resp] = co_await asio::async_initiate<decltype(nothrow), void(boost::system::error_code,
                                                                          thoonk::response)>(
      [&c, &r](auto h) { c.async_exec(r, {}, thoonk::detail::exec_handler(std::move(h))); },
      nothrow);
  if (ec || resp.empty()) co_return std::string("error: ") + ec.message();
  co_return resp.front().str;
}

}  // namespace

TEST_CASE("stream: the connection runs over TCP and Unix through one transport",
          "[connection][stream]") {
  thoonk::test::redis_server server(thoonk::test::redis_server_options{{}, true});
  asio::io_context ioc;
  thoonk::config tcp_cfg;
  tcp_cfg.host = "127.0.0.1";
  tcp_cfg.port = server.port();
  thoonk::config unix_cfg = tcp_cfg;
  unix_cfg.unix_socket = server.unix_socket();
  auto over_tcp = std::make_shared<connection_impl>(ioc.get_executor(), tcp_cfg);
  auto over_unix = std::make_shared<connection_impl>(ioc.get_executor(), unix_cfg);
  CHECK(over_tcp->transport().kind() == stream::transport::none);
  thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
    const auto tcp_ec = co_await connect(*over_tcp);
    const auto unix_ec = co_await connect(*over_unix);
    REQUIRE(!tcp_ec);
    REQUIRE(!unix_ec);
    CHECK(over_tcp->transport().kind() == stream::transport::tcp);
    CHECK(over_unix->transport().kind() == stream::transport::unix_domain);
    const auto tcp_pong = co_await ping(*over_tcp);
    const auto unix_pong = co_await ping(*over_unix);
    CHECK(tcp_pong == "PONG");
    CHECK(unix_pong == "PONG");
    over_tcp->stop();
    over_unix->stop();
    CHECK(!over_tcp->transport().is_open());
    CHECK(!over_unix->transport().is_open());
  });
}
