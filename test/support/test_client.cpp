#include "support/test_client.hpp"

#include "support/redis_server.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/system_error.hpp>

#include <random>

namespace thoonk::test {

thoonk::config test_config() {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url(shared_redis_url(), ec);
  if (ec) throw boost::system::system_error(ec, "test server URL");
  cfg.connect_timeout = std::chrono::seconds(3);
  cfg.reconnect_min_delay = std::chrono::milliseconds(10);
  cfg.reconnect_max_delay = std::chrono::milliseconds(200);
  return cfg;
}

std::string unique_name(std::string_view prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  static constexpr char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
  std::string s(prefix);
  s.push_back('-');
  for (int i = 0; i < 10; ++i) s.push_back(digits[rng() % 36]);
  return s;
}

boost::asio::awaitable<resp3::value> exec_one(connection& c, request req) {
  auto resp = co_await c.exec(req, boost::asio::use_awaitable);
  co_return std::move(resp.at(0));
}

boost::asio::awaitable<boost::system::error_code> try_ping(connection& c, exec_options opts) {
  request r;
  r.push("PING");
  auto [ec, resp] = co_await c.exec(r, opts, boost::asio::as_tuple(boost::asio::use_awaitable));
  co_return ec;
}

std::shared_ptr<std::vector<connection_event>> record_events(connection& c) {
  auto events = std::make_shared<std::vector<connection_event>>();
  c.on_event([events](const connection_event& e) { events->push_back(e); });
  return events;
}

}  // namespace thoonk::test
