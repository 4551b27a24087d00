// The subscriber against a real redis-server: fan-out, patterns, restore
// after a killed connection, unsubscribe on the last handle, callbacks that
// throw, RESP2.
#include "support/helpers.hpp"

using namespace thoonk::test;

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

thoonk::config with_protocol(int proto) {
  auto cfg = test_config();
  cfg.protocol = proto;
  return cfg;
}

// A case: a subscriber (config `cfg`), a plain connection for PUBLISH and
// PUBSUB, and a fresh channel name; run() runs the case's coroutine under
// the test deadline and stops both.
struct pubsub_case {
  explicit pubsub_case(const char* prefix, thoonk::config cfg = test_config())
      : sub(ioc.get_executor(), std::move(cfg)), ch(unique_name(prefix)) {}

  void run(coro_fn body) {
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      co_await body();
      sub.stop();
      pub.stop();
    });
  }

  asio::io_context ioc;
  thoonk::subscriber sub;
  thoonk::connection pub{ioc.get_executor(), test_config()};
  std::string ch;
};
}  // namespace

TEST_CASE("subscriber: fan-out to several callbacks and to patterns",
          "[subscriber][psubscribe][subscribe]") {
  for (int proto : {3, 2}) {
    pubsub_case t("fan", with_protocol(proto));
    std::vector<std::string> a, b, p;
    std::vector<std::string> p_channels;
    t.run([&]() -> asio::awaitable<void> {
      auto s1 = co_await t.sub.async_subscribe(
          t.ch, [&](const thoonk::message& m) { a.emplace_back(m.payload); }, asio::use_awaitable);
      auto s2 = co_await t.sub.async_subscribe(
          t.ch, [&](const thoonk::message& m) { b.emplace_back(m.payload); }, asio::use_awaitable);
      auto s3 = co_await t.sub.async_psubscribe(
          t.ch.substr(0, 4) + "*",
          [&](const thoonk::message& m) {
            p.emplace_back(m.payload);
            p_channels.emplace_back(m.channel);
          },
          asio::use_awaitable);
      CHECK(t.sub.is_connected());
      auto n = co_await numsub(t.pub, t.ch);
      CHECK(n == 1);  // two callbacks, one server subscription
      for (int i = 0; i < 5; ++i) co_await cmd(t.pub, "PUBLISH", t.ch, "m" + std::to_string(i));
      co_await until([&] { return a.size() == 5 && b.size() == 5 && p.size() >= 5; });
      CHECK(a == std::vector<std::string>{"m0", "m1", "m2", "m3", "m4"});
      CHECK(b == a);
      CHECK(p_channels.front() == t.ch);
    });
  }
}

TEST_CASE("subscriber: CLIENT KILL TYPE pubsub is reported and subscriptions come back",
          "[subscriber][fault][subscribe]") {
  pubsub_case t("restore");
  std::vector<std::string> got;
  int disconnects = 0, connects = 0;
  auto ev = t.sub.on_event([&](const thoonk::subscriber_event& e) {
    if (e.kind == thoonk::subscriber_event::disconnected) ++disconnects;
    else ++connects;
  });
  t.run([&]() -> asio::awaitable<void> {
    auto s = co_await t.sub.async_subscribe(
        t.ch, [&](const thoonk::message& m) { got.emplace_back(m.payload); }, asio::use_awaitable);
    co_await cmd(t.pub, "PUBLISH", t.ch, "before");
    co_await until([&] { return got.size() == 1; });
    auto connects_before = connects;
    auto killed = co_await cmd(t.pub, "CLIENT", "KILL", "TYPE", "pubsub");
    CHECK(killed.integer >= 1);
    co_await until([&] { return disconnects >= 1 && connects > connects_before; });
    CHECK(t.sub.is_connected());
    co_await cmd(t.pub, "PUBLISH", t.ch, "after");
    co_await until([&] { return got.size() == 2; });
    CHECK(got.back() == "after");
    CHECK(t.sub.stats().connection.reconnects >= 1);
  });
}

TEST_CASE("subscriber: dropping the last handle unsubscribes on the server",
          "[subscriber][subscribe]") {
  pubsub_case t("drop");
  auto& admin = t.pub;
  int calls = 0;
  auto count = [&](const thoonk::message&) { ++calls; };
  t.run([&]() -> asio::awaitable<void> {
    auto s1 = co_await t.sub.async_subscribe(t.ch, count, asio::use_awaitable);
    auto s2 = co_await t.sub.async_subscribe(t.ch, count, asio::use_awaitable);
    // Await first, check after: Catch2 may evaluate a CHECK's expression twice.
    auto n = co_await numsub(admin, t.ch);
    CHECK(n == 1);
    s1.reset();
    co_await sleep_for(50ms);
    n = co_await numsub(admin, t.ch);
    CHECK(n == 1);  // s2 still wants it
    co_await cmd(admin, "PUBLISH", t.ch, "x");
    co_await until([&] { return calls == 1; });  // only s2's callback
    s2.reset();
    for (int i = 0; i < 200 && (n = co_await numsub(admin, t.ch)) != 0; ++i)
      co_await sleep_for(5ms);
    CHECK(n == 0);
    // Subscribing again after the unsubscribe works.
    auto s3 = co_await t.sub.async_subscribe(t.ch, count, asio::use_awaitable);
    n = co_await numsub(admin, t.ch);
    CHECK(n == 1);
  });
}

TEST_CASE("subscriber: a callback that throws does not stop delivery", "[subscriber][subscribe]") {
  pubsub_case t("throw");
  int good = 0, reported = 0;
  t.sub.on_callback_error([&](std::exception_ptr) { ++reported; });
  t.run([&]() -> asio::awaitable<void> {
    auto bad = co_await t.sub.async_subscribe(
        t.ch, [&](const thoonk::message&) { throw std::runtime_error("boom"); },
        asio::use_awaitable);
    auto ok = co_await t.sub.async_subscribe(
        t.ch, [&](const thoonk::message&) { ++good; }, asio::use_awaitable);
    for (int i = 0; i < 3; ++i) co_await cmd(t.pub, "PUBLISH", t.ch, "x");
    co_await until([&] { return good == 3; });
    CHECK(reported == 3);
    CHECK(t.sub.stats().callback_errors == 3);
  });
}

TEST_CASE("subscriber: a callback may drop its own handle", "[subscriber][subscribe]") {
  pubsub_case t("self");
  int calls = 0;
  thoonk::subscription s;
  t.run([&]() -> asio::awaitable<void> {
    s = co_await t.sub.async_subscribe(
        t.ch,
        [&](const thoonk::message&) {
          ++calls;
          s.reset();
        },
        asio::use_awaitable);
    co_await cmd(t.pub, "PUBLISH", t.ch, "1");
    co_await until([&] { return calls == 1; });
    co_await cmd(t.pub, "PUBLISH", t.ch, "2");
    co_await sleep_for(50ms);
    CHECK(calls == 1);
  });
}

TEST_CASE("subscriber: stop fails a pending subscribe", "[subscriber][subscribe]") {
  asio::io_context ioc;
  auto cfg = test_config();
  cfg.port = 1;  // nothing there: the subscribe waits for a connection
  cfg.reconnect_max_delay = 50ms;
  thoonk::subscriber sub(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    error_code got;
    bool done = false;
    sub.async_subscribe(
        "ch", [](const thoonk::message&) {},
        [&](error_code ec, thoonk::subscription) {
          got = ec;
          done = true;
        });
    co_await sleep_for(30ms);
    sub.stop();
    co_await until([&] { return done; });
    CHECK(got == thoonk::error::client_stopped);
  });
}

TEST_CASE("subscriber: health-check PINGs in subscribe mode keep the connection",
          "[subscriber][subscribe]") {
  for (int proto : {3, 2}) {
    auto cfg = with_protocol(proto);
    cfg.health_check_interval = 30ms;
    cfg.health_check_timeout = 500ms;
    pubsub_case t("ping", cfg);
    int got = 0;
    t.run([&]() -> asio::awaitable<void> {
      auto s = co_await t.sub.async_subscribe(
          t.ch, [&](const thoonk::message&) { ++got; }, asio::use_awaitable);
      auto writes = t.sub.stats().connection.writes;
      co_await sleep_for(300ms);
      INFO("protocol " << proto);
      CHECK(t.sub.stats().connection.writes > writes);  // PINGs were sent...
      CHECK(t.sub.stats().connection.reconnects == 0);  // ...and their replies understood
      co_await cmd(t.pub, "PUBLISH", t.ch, "still here");
      co_await until([&] { return got == 1; });
    });
  }
}

namespace {

// A user who may use every command and key but only the channels starting
// with `allowed`, and the admin connection that makes and deletes them.
struct channel_limited_user {
  asio::io_context ioc;
  thoonk::connection admin{ioc.get_executor(), test_config()};
  std::string name;
  std::string allowed = name + ":ok";

  explicit channel_limited_user(const std::string& prefix) : name(unique_name(prefix)) {}

  /// Makes the user; returns a test config that logs in as them.
  asio::awaitable<thoonk::config> create() {
    co_await cmd(admin, "ACL", "SETUSER", name, "on", ">pw", "resetchannels", "&" + allowed + "*",
                 "+@all", "~*");
    auto cfg = test_config();
    cfg.username = name;
    cfg.password = "pw";
    co_return cfg;
  }
  /// Deletes the user and stops the admin connection.
  asio::awaitable<void> remove() {
    co_await cmd(admin, "ACL", "DELUSER", name);
    admin.stop();
  }
};

}  // namespace

TEST_CASE("subscriber: a refused SUBSCRIBE fails that subscribe only",
          "[subscriber][fault][subscribe]") {
  channel_limited_user user("acl");
  run_coro(user.ioc, [&]() -> asio::awaitable<void> {
    auto cfg = co_await user.create();
    thoonk::subscriber sub(user.ioc.get_executor(), cfg);
    auto [ec, s1] = co_await sub.async_subscribe(
        "forbidden-" + user.name, [](const thoonk::message&) {}, nothrow);
    CHECK(ec == thoonk::error::subscribe_refused);
    CHECK(!s1.active());
    int got = 0;
    auto s2 = co_await sub.async_subscribe(
        user.allowed, [&](const thoonk::message&) { ++got; }, asio::use_awaitable);
    co_await cmd(user.admin, "PUBLISH", user.allowed, "x");
    co_await until([&] { return got == 1; });
    CHECK(sub.stats().connection.reconnects == 0);
    sub.stop();
    co_await user.remove();
  });
}

TEST_CASE(
    "subscriber: ssubscribe on one server: a connection of its own, refusals fail that "
    "subscribe only, the last handle unsubscribes",
    "[subscriber][ssubscribe][fault]") {
  channel_limited_user user("sacl");
  const auto& allowed = user.allowed;
  auto& admin = user.admin;
  run_coro(user.ioc, [&]() -> asio::awaitable<void> {
    auto cfg = co_await user.create();
    thoonk::subscriber sub(user.ioc.get_executor(), cfg);
    thoonk::diagnostics diag;
    auto [ec, s1] = co_await sub.async_ssubscribe(
        "forbidden-" + user.name, [](const thoonk::message&) {},
        thoonk::capture_diagnostics(diag, nothrow));
    CHECK(ec == thoonk::error::subscribe_refused);
    CHECK(diag.server_message().find("NOPERM") != std::string::npos);
    CHECK(!s1.active());
    CHECK(sub.stats().shard_connections == 0);  // nothing left to hold it
    int got = 0;
    auto s2 = co_await sub.async_ssubscribe(
        allowed, [&](const thoonk::message& m) { got += m.payload == "x"; }, asio::use_awaitable);
    CHECK(sub.stats().shard_connections == 1);
    co_await cmd(admin, "SPUBLISH", allowed, "x");
    co_await until([&] { return got == 1; });
    // A classic PUBLISH does not reach a shard subscriber.
    co_await cmd(admin, "PUBLISH", allowed, "y");
    co_await cmd(admin, "SPUBLISH", allowed, "x");
    co_await until([&] { return got == 2; });
    CHECK(sub.stats().messages == 2);
    s2.reset();
    bool gone = co_await wait_until([&] { return sub.stats().shard_connections == 0; });
    CHECK(gone);
    // Closing the idle connection unsubscribed it on the server.
    std::int64_t left = 1;
    for (int i = 0; i < 500 && left != 0; ++i) {
      auto r = co_await cmd(admin, "PUBSUB", "SHARDNUMSUB", allowed);
      left = r.elements.at(1).integer;
      if (left != 0) co_await sleep_for(10ms);
    }
    CHECK(left == 0);
    // Subscribed again: a new connection.
    auto s3 = co_await sub.async_ssubscribe(
        allowed, [&](const thoonk::message&) { ++got; }, asio::use_awaitable);
    co_await cmd(admin, "SPUBLISH", allowed, "z");
    co_await until([&] { return got == 3; });
    sub.stop();
    co_await user.remove();
  });
}
