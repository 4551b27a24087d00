// TLS against a real redis-server on its --tls-port, with certificates
// made by the openssl command at test time (support/tls_certs.hpp): a good
// certificate carries commands, feed events and reconnects; mutual TLS;
// and each way it can go wrong (another CA, another host, expired, plain
// TCP to the TLS port, TLS to the plain port, files that do not load)
// fails with its own error, says why, and backs off instead of spinning.
#include "support/helpers.hpp"
#include "support/tls_certs.hpp"

#include <thoonk/resp3/parser.hpp>

using namespace thoonk::test;
using E = thoonk::error;
using clock_type = std::chrono::steady_clock;

namespace {

std::unique_ptr<redis_server> tls_server(const cert_pair& server_cert, bool auth_clients = false) {
  return std::make_unique<redis_server>(tls_server_options(server_cert, auth_clients));
}

// A config for `url` with the test's short timeouts.
thoonk::config config_for(const std::string& url) {
  thoonk::config base = test_config();
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url(url, ec, base);
  REQUIRE_FALSE(ec);
  return cfg;
}

// rediss:// to the server's TLS port, trusting the test CA (given in the URL,
// as an application would).
thoonk::config tls_config(const redis_server& s) {
  return config_for(s.tls_url() + "?tls_ca_file=" + shared_tls_certs().ca_file());
}

// A plain connection to the server's plain port, for admin commands.
thoonk::config plain_config(const redis_server& s) { return config_for(s.url()); }

struct attempt {
  clock_type::time_point at;
  thoonk::connection_event event;
};

// Connects with `cfg` (expecting it to fail), checks that a request fails
// with the same error instead of waiting, then watches the reconnect loop
// for `window` and returns every failed attempt. reconnect_min_delay and
// reconnect_max_delay are set here: 50 ms and 400 ms.
std::vector<attempt> watch_failing_connect(thoonk::config cfg, boost::system::error_code expected,
                                           std::chrono::milliseconds window = 1500ms) {
  cfg.reconnect_min_delay = 50ms;
  cfg.reconnect_max_delay = 400ms;
  asio::io_context ioc;
  thoonk::connection conn(ioc.get_executor(), cfg);
  auto attempts = std::make_shared<std::vector<attempt>>();
  conn.on_event([attempts](const thoonk::connection_event& e) {
    if (e.kind == thoonk::connection_event::connect_failed)
      attempts->push_back({clock_type::now(), e});
  });
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto [ec] = co_await conn.async_connect(nothrow);
        CHECK(ec == expected);
        INFO(ec.message());
        // A refused setup fails requests at once rather than letting them
        // wait for a connection that will not come.
        const auto ping_ec = co_await try_ping(conn);
        CHECK(ping_ec == expected);
        co_await sleep_for(window);
        conn.stop();
      },
      window + 15s);
  return *attempts;
}

// The attempts are spaced by the top backoff tier ([max/2, max] = [200 ms,
// 400 ms]): a few in the window, never back to back.
void check_backs_off(const std::vector<attempt>& attempts) {
  REQUIRE(attempts.size() >= 2);
  CHECK(attempts.size() <= 10);
  for (std::size_t i = 1; i < attempts.size(); ++i) {
    const auto gap =
        std::chrono::duration_cast<std::chrono::milliseconds>(attempts[i].at - attempts[i - 1].at);
    INFO("gap before attempt " << i << ": " << gap.count() << " ms");
    CHECK(gap >= 195ms);
  }
  for (const auto& a : attempts) {
    INFO(a.event.error.message() << " / " << a.event.server_message);
    CHECK(a.event.setup_refused);
  }
}

/// Connects a command connection with `cfg`, checks that PING answers PONG
/// over it, and stops it.
void expect_ping(const thoonk::config& cfg) {
  asio::io_context ioc;
  thoonk::connection conn(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await conn.async_connect(asio::use_awaitable);
    auto v = co_await cmd(conn, "PING");
    CHECK(v.str == "PONG");
    conn.stop();
  });
}

}  // namespace

TEST_CASE("tls: a trusted certificate carries commands, feed events and reconnects",
          "[tls][connection][subscriber]") {
  auto server = tls_server(shared_tls_certs().server());
  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), tls_config(*server));
  thoonk::client admin(ioc.get_executor(), plain_config(*server));
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(c, admin);
        CHECK(c.conn().protocol() == 3);
        co_await cmd(c.conn(), "SET", "tls:k", "over tls");
        auto v = co_await cmd(c.conn(), "GET", "tls:k");
        CHECK(v.str == "over tls");
        // A value larger than one TLS record (16 KiB) in both directions.
        const std::string big(200 * 1024, 'x');
        co_await cmd(c.conn(), "SET", "tls:big", big);
        v = co_await cmd(c.conn(), "GET", "tls:big");
        CHECK(v.str == big);

        // A feed publish reaches a subscriber whose connection is TLS too.
        auto name = co_await make_feed(c, "tls", thoonk::feed_type::feed, {});
        thoonk::feed f(c, name);
        std::vector<std::string> got;
        auto sub = co_await f.async_subscribe(
            [&](const thoonk::feed_event& e) {
              if (e.kind == thoonk::feed_event::publish) got.push_back(std::string(e.item));
            },
            asio::use_awaitable);
        co_await f.async_publish(thoonk::item_id("a"), "first", asio::use_awaitable);
        auto arrived = co_await wait_until([&] { return got.size() == 1; });
        CHECK(arrived);

        // The server drops both TLS connections: both come back by
        // themselves over TLS, and the subscription is restored.
        const auto reconnects = c.conn().stats().reconnects;
        auto killed = co_await cmd(admin.conn(), "CLIENT", "KILL", "LADDR",
                                   "127.0.0.1:" + std::to_string(server->tls_port()));
        CHECK(killed.integer == 2);
        arrived = co_await wait_until([&] { return c.conn().stats().reconnects > reconnects; });
        CHECK(arrived);
        v = co_await cmd(c.conn(), "GET", "tls:k");
        CHECK(v.str == "over tls");
        bool delivered = false;
        for (int i = 0; i < 100 && !delivered; ++i) {
          // The subscriber restores its subscription on its own schedule:
          // publish until one arrives.
          co_await f.async_publish(thoonk::item_id("b" + std::to_string(i)), "after",
                                   asio::use_awaitable);
          delivered = co_await wait_until([&] { return got.size() >= 2; }, 100ms);
        }
        CHECK(delivered);
        co_await c.async_delete_feed(name, asio::use_awaitable);
        c.stop();
        admin.stop();
      },
      30s);
}

TEST_CASE("tls: the server name can differ from the address (SNI and name check)", "[tls]") {
  auto server = tls_server(shared_tls_certs().server());
  auto cfg = tls_config(*server);
  cfg.tls.server_name = "localhost";  // in the certificate; the address is 127.0.0.1
  expect_ping(cfg);
}

TEST_CASE("tls: mutual TLS", "[tls]") {
  auto server = tls_server(shared_tls_certs().server(), true);
  auto cfg = tls_config(*server);

  SECTION("a client certificate from the CA is accepted") {
    auto with_cert = cfg;
    with_cert.tls.cert_file = shared_tls_certs().client().cert;
    with_cert.tls.key_file = shared_tls_certs().client().key;
    expect_ping(with_cert);
  }
  SECTION("no client certificate: refused, with the reason, backing off") {
    auto attempts = watch_failing_connect(cfg, E::tls_handshake_failed);
    check_backs_off(attempts);
    REQUIRE(!attempts.empty());
    INFO(attempts.front().event.server_message);
    CHECK(attempts.front().event.server_message.find("certificate") != std::string::npos);
  }
  SECTION("a client certificate from another CA: refused") {
    auto foreign = cfg;
    foreign.tls.cert_file = shared_tls_certs().foreign_client().cert;
    foreign.tls.key_file = shared_tls_certs().foreign_client().key;
    auto attempts = watch_failing_connect(foreign, E::tls_handshake_failed);
    check_backs_off(attempts);
  }
}

TEST_CASE("tls: a server certificate that fails verification is refused and backed off", "[tls]") {
  struct bad_case {
    const char* what;
    cert_pair (tls_certs::*cert)() const;
    const char* reason;  // part of OpenSSL's verification text
  };
  auto c = GENERATE(bad_case{"another CA", &tls_certs::foreign, "local issuer certificate"},
                    bad_case{"another host", &tls_certs::wrong_host, "IP address mismatch"},
                    bad_case{"expired", &tls_certs::expired, "certificate has expired"});
  INFO(c.what);
  auto server = tls_server((shared_tls_certs().*c.cert)());
  auto attempts = watch_failing_connect(tls_config(*server), E::tls_certificate_rejected);
  check_backs_off(attempts);
  REQUIRE(!attempts.empty());
  const auto& message = attempts.front().event.server_message;
  INFO(message);
  CHECK(message.find(c.reason) != std::string::npos);
  CHECK(attempts.front().event.error == E::tls_certificate_rejected);
  CHECK(!attempts.front().event.error.message().empty());
}

TEST_CASE("tls: a host name that is not in the certificate is refused", "[tls]") {
  auto server = tls_server(shared_tls_certs().server());
  auto cfg = tls_config(*server);
  cfg.tls.server_name = "elsewhere.example";
  auto attempts = watch_failing_connect(cfg, E::tls_certificate_rejected, 500ms);
  REQUIRE(!attempts.empty());
  INFO(attempts.front().event.server_message);
  CHECK(attempts.front().event.server_message.find("hostname mismatch") != std::string::npos);
}

TEST_CASE("tls: turning verification off accepts any certificate (unsafe)", "[tls]") {
  auto server = tls_server(shared_tls_certs().foreign());
  expect_ping(config_for(server->tls_url() + "?tls_verify=none"));
}

TEST_CASE("tls: plain TCP to the TLS port is refused with tls_required and backed off", "[tls]") {
  auto server = tls_server(shared_tls_certs().server());
  auto attempts = watch_failing_connect(
      config_for("redis://127.0.0.1:" + std::to_string(server->tls_port())), E::tls_required);
  check_backs_off(attempts);
}

TEST_CASE("tls: TLS to the plain port is refused with tls_handshake_failed and backed off",
          "[tls]") {
  auto server = tls_server(shared_tls_certs().server());
  auto cfg = config_for("rediss://127.0.0.1:" + std::to_string(server->port()) +
                        "?tls_ca_file=" + shared_tls_certs().ca_file());
  // Redis reads a ClientHello as an unfinished inline command and may say
  // nothing: the handshake then ends at the connect timeout, twice per
  // attempt (silence is confirmed on a second connection).
  cfg.connect_timeout = 300ms;
  auto attempts = watch_failing_connect(cfg, E::tls_handshake_failed, 2500ms);
  check_backs_off(attempts);
  REQUIRE(!attempts.empty());
  CHECK(!attempts.front().event.server_message.empty());
}

TEST_CASE("tls: files that do not load give tls_config_invalid", "[tls]") {
  auto server = tls_server(shared_tls_certs().server());
  auto base = tls_config(*server);
  // The connect fails with tls_config_invalid and its message names `what`.
  auto expect_invalid = [](const thoonk::config& cfg, std::string_view what) {
    auto attempts = watch_failing_connect(cfg, E::tls_config_invalid, 500ms);
    REQUIRE(!attempts.empty());
    const auto& message = attempts.front().event.server_message;
    INFO(message);
    CHECK(message.find(what) != std::string::npos);
  };
  SECTION("a CA file that does not exist") {
    auto cfg = base;
    cfg.tls.ca_file = shared_tls_certs().dir() + "/missing.crt";
    expect_invalid(cfg, "missing.crt");
  }
  SECTION("a certificate without its key") {
    auto cfg = base;
    cfg.tls.cert_file = shared_tls_certs().client().cert;
    expect_invalid(cfg, "tls.key_file");
  }
  SECTION("a key that belongs to another certificate") {
    auto cfg = base;
    cfg.tls.cert_file = shared_tls_certs().client().cert;
    cfg.tls.key_file = shared_tls_certs().server().key;
    expect_invalid(cfg, "");  // OpenSSL's own words: not checked
  }
  SECTION("a minimum version other than 1.2 or 1.3") {
    auto cfg = base;
    cfg.tls.min_version = 11;
    watch_failing_connect(cfg, E::tls_config_invalid, 200ms);
  }
}

TEST_CASE("tls: TLS 1.3 as the minimum still connects to a TLS 1.3 server", "[tls]") {
  auto server = tls_server(shared_tls_certs().server());
  auto cfg = tls_config(*server);
  cfg.tls.min_version = 13;
  expect_ping(cfg);
}

TEST_CASE("tls: a refusal lasts until the server's certificate is fixed", "[tls]") {
  // The server starts with an expired certificate; while the client backs
  // off, the server is given a good one (CONFIG SET on its plain port), and
  // the next attempt connects and clears the refusal.
  auto server = tls_server(shared_tls_certs().expired());
  asio::io_context ioc;
  auto cfg = tls_config(*server);
  cfg.reconnect_min_delay = 20ms;
  cfg.reconnect_max_delay = 200ms;
  thoonk::connection conn(ioc.get_executor(), cfg);
  thoonk::connection admin(ioc.get_executor(), plain_config(*server));
  auto events = record_events(conn);
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto [ec] = co_await conn.async_connect(nothrow);
        CHECK(ec == E::tls_certificate_rejected);
        const auto refused_ping = co_await try_ping(conn);
        CHECK(refused_ping == E::tls_certificate_rejected);
        co_await admin.async_connect(asio::use_awaitable);
        auto ok =
            co_await cmd(admin, "CONFIG", "SET", "tls-cert-file", shared_tls_certs().server().cert,
                         "tls-key-file", shared_tls_certs().server().key);
        CHECK(ok.str == "OK");
        auto arrived = co_await wait_until([&] { return conn.is_connected(); }, 5s);
        CHECK(arrived);
        auto v = co_await cmd(conn, "PING");
        CHECK(v.str == "PONG");
        conn.stop();
        admin.stop();
      },
      15s);
  REQUIRE(!events->empty());
  CHECK(events->front().kind == thoonk::connection_event::connect_failed);
  CHECK(events->back().kind == thoonk::connection_event::connected);
}
