// A connection setup cut by the fault proxy (fault_proxy.hpp) at its first
// bytes, plain and TLS. A reset or silence there is how a TLS port answers
// a plain client (tls_required) and how a TLS server refuses a client
// (tls_handshake_failed): refusals, which fail every queued request. A proxy
// restarting does the same to one connection, so the connection repeats the
// setup on a new one before it believes it (docs/decisions.md,
// "Connection"): once is a passing fault, twice in a row a refusal.
#include "fault_proxy.hpp"
#include "fault_support.hpp"
#include "support/helpers.hpp"
#include "support/tls_certs.hpp"

using namespace thoonk::test;
using namespace thoonk::faults;

namespace {

// A redis-server (with a TLS port when `tls`), the proxy in front of the
// port the client uses, and a client connection through the proxy whose
// connect_failed events are kept.
struct setup_rig {
  std::unique_ptr<redis_server> srv;
  asio::io_context ioc;
  std::unique_ptr<fault_proxy> proxy;
  std::unique_ptr<thoonk::connection> conn;
  std::vector<thoonk::connection_event> failed;

  explicit setup_rig(bool tls, std::chrono::milliseconds connect_timeout = 2s)
      : srv(std::make_unique<redis_server>(tls ? tls_server_options(shared_tls_certs().server())
                                               : redis_server_options{})) {
    proxy = std::make_unique<fault_proxy>(ioc.get_executor(), tls ? srv->tls_port() : srv->port());
    const std::string url = tls ? "rediss://127.0.0.1:" + std::to_string(proxy->port()) +
                                      "?tls_ca_file=" + shared_tls_certs().ca_file()
                                : "redis://127.0.0.1:" + std::to_string(proxy->port());
    auto cfg = fault_config(url);
    cfg.connect_timeout = connect_timeout;
    conn = std::make_unique<thoonk::connection>(ioc.get_executor(), cfg);
    conn->on_event([this](const thoonk::connection_event& e) {
      if (e.kind == thoonk::connection_event::connect_failed) failed.push_back(e);
    });
  }

  // The error of the first connect() and of a ping right after it; then,
  // unless `stays_refused`, waits for the connection to come up and pings.
  std::pair<boost::system::error_code, boost::system::error_code> first_connect(
      bool stays_refused = false) {
    std::pair<boost::system::error_code, boost::system::error_code> out;
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto [ec] = co_await conn->async_connect(nothrow);
      out.first = ec;
      out.second = co_await try_ping(*conn);
      if (!stays_refused) {
        const bool up = co_await wait_until([&] { return conn->stats().connects == 1; }, 10s);
        CHECK(up);
        const auto ping = co_await try_ping(*conn);
        CHECK(!ping);
      }
      conn->stop();
      proxy->stop();
    });
    return out;
  }
};

}  // namespace

TEST_CASE("faults: a setup reset once is repeated at once, twice in a row is a refusal",
          "[faults][proxy][setup_reset]") {
  const bool tls = GENERATE(false, true);
  // What a reset at the first bytes is read as: on plain TCP a TLS port's
  // answer, on TLS (the ClientHello reset) a failed handshake.
  const boost::system::error_code refusal =
      tls ? thoonk::error::tls_handshake_failed : thoonk::error::tls_required;
  INFO((tls ? "TLS" : "plain TCP"));
  setup_rig t(tls);
  SECTION("once: the setup goes on and nothing fails") {
    t.proxy->plan().refuse_next(1);
    const auto [ec, ping] = t.first_connect();
    CHECK(!ec);
    CHECK(!ping);
    CHECK(t.proxy->plan().refused() == 1);
    CHECK(t.proxy->accepted() == 2);
    CHECK(t.conn->stats().setup_retries == 1);
    CHECK(t.conn->stats().connects == 1);
    CHECK(t.failed.empty());
  }
  SECTION("twice: refused, requests fail at once, then connected when the resets stop") {
    t.proxy->plan().refuse_next(2);
    const auto [ec, ping] = t.first_connect();
    CHECK(ec == refusal);
    // A refusal fails requests instead of keeping them waiting.
    CHECK(ping == refusal);
    CHECK(t.proxy->plan().refused() == 2);
    CHECK(t.conn->stats().setup_retries == 1);
    REQUIRE(t.failed.size() == 1);
    CHECK(t.failed[0].error == refusal);
    CHECK(t.failed[0].setup_refused);
    INFO(t.failed[0].server_message);
    CHECK(!t.failed[0].server_message.empty());
    if (!tls) CHECK(t.failed[0].server_message.find("rediss://") != std::string::npos);
  }
}

TEST_CASE("faults: a TLS handshake that hears nothing is repeated before it is refused",
          "[faults][proxy][setup_reset]") {
  setup_rig t(true, 300ms);
  t.proxy->plan().set_mode(fault_mode::blackhole);
  const auto [ec, ping] = t.first_connect(true);
  CHECK(ec == thoonk::error::tls_handshake_failed);
  CHECK(ping == thoonk::error::tls_handshake_failed);
  // Two connections, each given its own connect_timeout.
  CHECK(t.conn->stats().setup_retries >= 1);
  CHECK(t.proxy->accepted() >= 2);
  REQUIRE(!t.failed.empty());
  CHECK(t.failed[0].setup_refused);
  INFO(t.failed[0].server_message);
  CHECK(t.failed[0].server_message.find("connect_timeout") != std::string::npos);
}

TEST_CASE(
    "faults: a setup reset once whose repeat fails another way reports that failure as a "
    "passing one, not a refusal, and connects once the faults stop",
    "[faults][proxy][setup_reset]") {
  // The first connection is reset at its first bytes (read as a refusal to
  // confirm); the repeat gets 5 bytes of the server's first reply and is
  // then cut: a connection lost mid-reply, which no TLS port or refusing
  // server causes. The attempt reports that, and the connection backs off
  // and tries again, as after any passing fault.
  setup_rig t(false);
  t.proxy->plan().refuse_next(1);
  t.proxy->plan().arm_cut(5);
  const auto [ec, ping] = t.first_connect();
  CHECK(ec != thoonk::error::tls_required);
  CHECK(ping != thoonk::error::tls_required);
  CHECK(t.proxy->plan().refused() == 1);
  CHECK(t.proxy->plan().cuts() == 1);
  CHECK(t.conn->stats().setup_retries == 1);
  CHECK(t.proxy->accepted() >= 3);  // the reset, the cut, the one that connected
  REQUIRE(!t.failed.empty());
  INFO(t.failed[0].error.message() << ": " << t.failed[0].server_message);
  CHECK(!t.failed[0].setup_refused);
  CHECK(t.failed[0].error != thoonk::error::tls_required);
  CHECK(t.failed[0].error != thoonk::error::tls_handshake_failed);
}
