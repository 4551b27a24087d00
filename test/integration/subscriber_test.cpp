// The subscriber against a real redis-server: fan-out, patterns, restore
// after a killed connection, unsubscribe on the last handle, callbacks that
// throw, RESP2.
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/connection.hpp>
#include <thoonk/error.hpp>
#include <thoonk/subscriber.hpp>

#include <boost/asio.hpp>
#include <catch2/catch.hpp>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using thoonk::test::cmd;
using thoonk::test::run_coro;
using thoonk::test::sleep_for;
using thoonk::test::test_config;
using thoonk::test::unique_name;

namespace {
// Waits until `pred` holds, polling; the test deadline bounds it.
template <class Pred>
asio::awaitable<void> until(Pred pred) {
  while (!pred()) co_await sleep_for(2ms);
}

asio::awaitable<std::int64_t> numsub(thoonk::connection& c, const std::string& ch) {
  auto v = co_await cmd(c, "PUBSUB", "NUMSUB", ch);
  // RESP3: a map {ch: n}; RESP2: [ch, n]
  co_return v.elements.at(1).integer;
}
}  // namespace

TEST_CASE("subscriber: fan-out to several callbacks and to patterns", "[subscriber][psubscribe][subscribe]") {
  for (int proto : {3, 2}) {
    asio::io_context ioc;
    auto cfg = test_config();
    cfg.protocol = proto;
    thoonk::subscriber sub(ioc.get_executor(), cfg);
    thoonk::connection pub(ioc.get_executor(), test_config());
    auto ch = unique_name("fan");
    std::vector<std::string> a, b, p;
    std::vector<std::string> p_channels;
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto s1 = co_await sub.subscribe(
          ch, [&](const thoonk::message& m) { a.emplace_back(m.payload); }, asio::use_awaitable);
      auto s2 = co_await sub.subscribe(
          ch, [&](const thoonk::message& m) { b.emplace_back(m.payload); }, asio::use_awaitable);
      auto s3 = co_await sub.psubscribe(
          ch.substr(0, 4) + "*",
          [&](const thoonk::message& m) {
            p.emplace_back(m.payload);
            p_channels.emplace_back(m.channel);
          },
          asio::use_awaitable);
      CHECK(sub.is_connected());
      auto n = co_await numsub(pub, ch);
      CHECK(n == 1);  // two callbacks, one server subscription
      for (int i = 0; i < 5; ++i) co_await cmd(pub, "PUBLISH", ch, "m" + std::to_string(i));
      co_await until([&] { return a.size() == 5 && b.size() == 5 && p.size() >= 5; });
      CHECK(a == std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"});
      CHECK(b == a);
      CHECK(p_channels.front() == ch);
      sub.stop();
      pub.stop();
    });
  }
}

TEST_CASE("subscriber: CLIENT KILL TYPE pubsub is reported and subscriptions come back",
          "[subscriber][fault][subscribe]") {
  asio::io_context ioc;
  thoonk::subscriber sub(ioc.get_executor(), test_config());
  thoonk::connection pub(ioc.get_executor(), test_config());
  auto ch = unique_name("restore");
  std::vector<std::string> got;
  int disconnects = 0, connects = 0;
  auto ev = sub.on_event([&](const thoonk::subscriber_event& e) {
    if (e.kind == thoonk::subscriber_event::disconnected) ++disconnects;
    else ++connects;
  });
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto s = co_await sub.subscribe(
        ch, [&](const thoonk::message& m) { got.emplace_back(m.payload); }, asio::use_awaitable);
    co_await cmd(pub, "PUBLISH", ch, "before");
    co_await until([&] { return got.size() == 1; });
    auto connects_before = connects;
    auto killed = co_await cmd(pub, "CLIENT", "KILL", "TYPE", "pubsub");
    CHECK(killed.integer >= 1);
    co_await until([&] { return disconnects >= 1 && connects > connects_before; });
    CHECK(sub.is_connected());
    co_await cmd(pub, "PUBLISH", ch, "after");
    co_await until([&] { return got.size() == 2; });
    CHECK(got.back() == "after");
    CHECK(sub.stats().connection.reconnects >= 1);
    sub.stop();
    pub.stop();
  });
}

TEST_CASE("subscriber: dropping the last handle unsubscribes on the server", "[subscriber][subscribe]") {
  asio::io_context ioc;
  thoonk::subscriber sub(ioc.get_executor(), test_config());
  thoonk::connection admin(ioc.get_executor(), test_config());
  auto ch = unique_name("drop");
  int calls = 0;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto s1 = co_await sub.subscribe(ch, [&](const thoonk::message&) { ++calls; },
                                     asio::use_awaitable);
    auto s2 = co_await sub.subscribe(ch, [&](const thoonk::message&) { ++calls; },
                                     asio::use_awaitable);
    // Await first, check after: Catch2 may evaluate a CHECK's expression twice.
    auto n = co_await numsub(admin, ch);
    CHECK(n == 1);
    s1.reset();
    co_await sleep_for(50ms);
    n = co_await numsub(admin, ch);
    CHECK(n == 1);  // s2 still wants it
    co_await cmd(admin, "PUBLISH", ch, "x");
    co_await until([&] { return calls == 1; });  // only s2's callback
    s2.reset();
    for (int i = 0; i < 200 && (n = co_await numsub(admin, ch)) != 0; ++i)
      co_await sleep_for(5ms);
    CHECK(n == 0);
    // Subscribing again after the unsubscribe works.
    auto s3 = co_await sub.subscribe(ch, [&](const thoonk::message&) { ++calls; },
                                     asio::use_awaitable);
    n = co_await numsub(admin, ch);
    CHECK(n == 1);
    sub.stop();
    admin.stop();
  });
}

TEST_CASE("subscriber: a callback that throws does not stop delivery", "[subscriber][subscribe]") {
  asio::io_context ioc;
  thoonk::subscriber sub(ioc.get_executor(), test_config());
  thoonk::connection pub(ioc.get_executor(), test_config());
  auto ch = unique_name("throw");
  int good = 0, reported = 0;
  sub.on_callback_error([&](std::exception_ptr) { ++reported; });
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto bad = co_await sub.subscribe(
        ch, [&](const thoonk::message&) { throw std::runtime_error("boom"); },
        asio::use_awaitable);
    auto ok = co_await sub.subscribe(ch, [&](const thoonk::message&) { ++good; },
                                     asio::use_awaitable);
    for (int i = 0; i < 3; ++i) co_await cmd(pub, "PUBLISH", ch, "x");
    co_await until([&] { return good == 3; });
    CHECK(reported == 3);
    CHECK(sub.stats().callback_errors == 3);
    sub.stop();
    pub.stop();
  });
}

TEST_CASE("subscriber: a callback may drop its own handle", "[subscriber][subscribe]") {
  asio::io_context ioc;
  thoonk::subscriber sub(ioc.get_executor(), test_config());
  thoonk::connection pub(ioc.get_executor(), test_config());
  auto ch = unique_name("self");
  int calls = 0;
  thoonk::subscription s;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    s = co_await sub.subscribe(
        ch,
        [&](const thoonk::message&) {
          ++calls;
          s.reset();
        },
        asio::use_awaitable);
    co_await cmd(pub, "PUBLISH", ch, "1");
    co_await until([&] { return calls == 1; });
    co_await cmd(pub, "PUBLISH", ch, "2");
    co_await sleep_for(50ms);
    CHECK(calls == 1);
    sub.stop();
    pub.stop();
  });
}

TEST_CASE("subscriber: stop fails a pending subscribe", "[subscriber][subscribe]") {
  asio::io_context ioc;
  auto cfg = test_config();
  cfg.port = 1;  // nothing there: the subscribe waits for a connection
  cfg.reconnect_max_delay = 50ms;
  thoonk::subscriber sub(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    boost::system::error_code got;
    bool done = false;
    sub.subscribe("ch", [](const thoonk::message&) {},
                  [&](boost::system::error_code ec, thoonk::subscription) {
                    got = ec;
                    done = true;
                  });
    co_await sleep_for(30ms);
    sub.stop();
    co_await until([&] { return done; });
    CHECK(got == thoonk::error::client_stopped);
  });
}

TEST_CASE("subscriber: health-check PINGs in subscribe mode keep the connection", "[subscriber][subscribe]") {
  for (int proto : {3, 2}) {
    asio::io_context ioc;
    auto cfg = test_config();
    cfg.protocol = proto;
    cfg.health_check_interval = 30ms;
    cfg.health_check_timeout = 500ms;
    thoonk::subscriber sub(ioc.get_executor(), cfg);
    thoonk::connection pub(ioc.get_executor(), test_config());
    auto ch = unique_name("ping");
    int got = 0;
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto s = co_await sub.subscribe(ch, [&](const thoonk::message&) { ++got; },
                                      asio::use_awaitable);
      auto writes = sub.stats().connection.writes;
      co_await sleep_for(300ms);
      INFO("protocol " << proto);
      CHECK(sub.stats().connection.writes > writes);  // PINGs were sent...
      CHECK(sub.stats().connection.reconnects == 0);  // ...and their replies understood
      co_await cmd(pub, "PUBLISH", ch, "still here");
      co_await until([&] { return got == 1; });
      sub.stop();
      pub.stop();
    });
  }
}

TEST_CASE("subscriber: a refused SUBSCRIBE fails that subscribe only", "[subscriber][fault][subscribe]") {
  asio::io_context ioc;
  thoonk::connection admin(ioc.get_executor(), test_config());
  auto user = unique_name("acl");
  auto allowed = user + ":ok";
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // A user that may only use channels starting with "<user>:ok".
    thoonk::request acl;
    acl.push("ACL", "SETUSER", user, "on", ">pw", "resetchannels", "&" + allowed + "*", "+@all",
             "~*");
    co_await admin.exec(acl, asio::use_awaitable);
    auto cfg = test_config();
    cfg.username = user;
    cfg.password = "pw";
    thoonk::subscriber sub(ioc.get_executor(), cfg);
    auto [ec, s1] = co_await sub.subscribe(
        "forbidden-" + user, [](const thoonk::message&) {}, asio::as_tuple(asio::use_awaitable));
    CHECK(ec == thoonk::error::subscribe_refused);
    CHECK(!s1.active());
    int got = 0;
    auto s2 = co_await sub.subscribe(allowed, [&](const thoonk::message&) { ++got; },
                                     asio::use_awaitable);
    co_await cmd(admin, "PUBLISH", allowed, "x");
    co_await until([&] { return got == 1; });
    CHECK(sub.stats().connection.reconnects == 0);
    sub.stop();
    co_await cmd(admin, "ACL", "DELUSER", user);
    admin.stop();
  });
}
