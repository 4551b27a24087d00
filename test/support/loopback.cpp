#include "support/loopback.hpp"

#include "support/test_client.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

namespace thoonk::test {

namespace asio = boost::asio;

struct scripted_peer::state {
  explicit state(asio::io_context& ioc) : acceptor(ioc, {asio::ip::make_address("127.0.0.1"), 0}) {}
  asio::ip::tcp::acceptor acceptor;
  std::string received;
};

scripted_peer::scripted_peer(asio::io_context& ioc, std::vector<peer_session> sessions)
    : state_(std::make_shared<state>(ioc)) {
  asio::co_spawn(ioc, play(state_, std::move(sessions)), asio::detached);
}

thoonk::config scripted_peer::config() const {
  auto cfg = test_config();
  cfg.host = "127.0.0.1";
  cfg.port = state_->acceptor.local_endpoint().port();
  cfg.client_name.clear();
  cfg.connect_timeout = std::chrono::seconds(2);
  cfg.health_check_interval = std::chrono::milliseconds(0);
  return cfg;
}

const std::string& scripted_peer::received() const noexcept { return state_->received; }

asio::awaitable<void> scripted_peer::play(std::shared_ptr<state> st,
                                          std::vector<peer_session> sessions) {
  constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
  for (auto& replies : sessions) {
    auto [ec, sock] = co_await st->acceptor.async_accept(nothrow);
    if (ec) co_return;
    char buf[4096];
    for (auto& reply : replies) {
      auto [rec, n] = co_await sock.async_read_some(asio::buffer(buf), nothrow);
      if (rec) break;
      st->received.append(buf, n);
      auto [wec, wn] = co_await asio::async_write(sock, asio::buffer(reply), nothrow);
      if (wec) break;
    }
    // Holding the socket lets the client read the last reply before it sees
    // the connection end; more bytes from the client end the session.
    auto [rec, n] = co_await sock.async_read_some(asio::buffer(buf), nothrow);
    (void)rec;
    (void)n;
  }
}

unsigned short free_port(asio::io_context& ioc) {
  asio::ip::tcp::acceptor probe(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  return probe.local_endpoint().port();
}

}  // namespace thoonk::test
