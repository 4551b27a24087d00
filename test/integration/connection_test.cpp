// Connection against a real redis-server: pipelining, multiplexing, failure
// handling (killed connections, dead servers, wrong passwords, silent
// servers), cancellation and timeouts.
#include "support/helpers.hpp"
#include "support/loopback.hpp"

#include <boost/asio/experimental/awaitable_operators.hpp>

using namespace thoonk::test;
using namespace asio::experimental::awaitable_operators;

namespace {

// The server-side id of `c`'s connection.
asio::awaitable<std::int64_t> client_id(thoonk::connection& c) {
  auto v = co_await cmd(c, "CLIENT", "ID");
  co_return v.integer;
}

// A case on one connection: run() connects it, runs the case's coroutine
// under the deadline and stops the connection.
struct connected_case {
  explicit connected_case(thoonk::config cfg = test_config())
      : conn(ioc.get_executor(), std::move(cfg)) {}

  void run(coro_fn body, std::chrono::milliseconds deadline = 20s) {
    run_connected(ioc, conn, std::move(body), deadline);
  }

  asio::io_context ioc;
  thoonk::connection conn;
};

}  // namespace

TEST_CASE("connection: connect, pipeline, errors are data per command", "[connection]") {
  connected_case t;
  t.run([&]() -> asio::awaitable<void> {
    CHECK(t.conn.is_connected());
    CHECK(t.conn.protocol() == 3);
    auto key = unique_name("pipe");
    thoonk::request req;
    req.push("SET", key, "abc");
    req.push("INCR", key);  // fails: not an integer
    req.push("GET", key);
    req.push("DEL", key);
    auto resp = co_await t.conn.async_exec(req, asio::use_awaitable);
    REQUIRE(resp.size() == 4);
    CHECK(resp[0].str == "OK");
    CHECK(resp[1].is_error());
    CHECK(resp[1].str.find("not an integer") != std::string::npos);
    CHECK(resp[2].str == "abc");
    CHECK(resp[3].integer == 1);
  });
}

TEST_CASE("connection: 10,000 requests from 1,000 coroutines are pipelined", "[connection]") {
  connected_case t;
  auto& conn = t.conn;
  const auto prefix = unique_name("many");
  int ok = 0, wrong = 0;
  t.run(
      [&]() -> asio::awaitable<void> {
        auto before = conn.stats();
        auto worker = [&](int w) -> asio::awaitable<void> {
          for (int i = 0; i < 10; ++i) {
            thoonk::request r;
            auto key = prefix + ":" + std::to_string(w);
            auto val = std::to_string(w * 100 + i);
            r.push("SET", key, val);
            r.push("GET", key);
            auto resp = co_await conn.async_exec(r, asio::use_awaitable);
            if (resp.size() == 2 && resp[1].str == val) ++ok;
            else ++wrong;
          }
        };
        // 1,000 coroutines joined with a counter.
        int remaining = 1000;
        asio::steady_timer all_done(t.ioc, asio::steady_timer::time_point::max());
        for (int w = 0; w < 1000; ++w)
          asio::co_spawn(t.ioc, worker(w), [&](std::exception_ptr) {
            if (--remaining == 0) all_done.cancel();
          });
        co_await all_done.async_wait(nothrow);
        auto after = conn.stats();
        CHECK(ok == 10000);
        CHECK(wrong == 0);
        CHECK(after.requests - before.requests == 10000);
        CHECK(after.commands - before.commands == 20000);
        // Pipelining: far fewer socket writes than requests.
        INFO("writes: " << after.writes - before.writes);
        CHECK(after.writes - before.writes < 10000 / 5);
        thoonk::request del;
        del.push("EVAL",
                 "for _,k in ipairs(redis.call('KEYS', ARGV[1])) do redis.call('DEL', k) end", 0,
                 prefix + ":*");
        co_await conn.async_exec(del, asio::use_awaitable);
      },
      60s);
}

TEST_CASE("connection: CLIENT KILL mid-load, unwritten requests survive, written ones are unknown",
          "[connection][fault]") {
  connected_case t;
  auto& conn = t.conn;
  thoonk::connection admin(t.ioc.get_executor(), test_config());
  const auto key = unique_name("kill");
  int ok = 0, unknown = 0, other = 0;
  t.run(
      [&]() -> asio::awaitable<void> {
        co_await admin.async_connect(asio::use_awaitable);
        auto victim = co_await client_id(conn);
        bool killed = false;
        int ok_before_kill = 0;
        auto worker = [&]() -> asio::awaitable<void> {
          for (int i = 0; i < 40; ++i) {
            thoonk::request r;
            r.push("INCR", key);
            auto [ec, resp] = co_await conn.async_exec(r, nothrow);
            if (!ec) ++ok;
            else if (ec == thoonk::error::unknown_outcome) ++unknown;
            else ++other;
          }
        };
        int remaining = 200;
        asio::steady_timer all_done(t.ioc, asio::steady_timer::time_point::max());
        for (int w = 0; w < 200; ++w)
          asio::co_spawn(t.ioc, worker(), [&](std::exception_ptr) {
            if (--remaining == 0) all_done.cancel();
          });
        // Kill the connection while the load runs (requests are queued and in
        // flight at this moment).
        while (ok < 1000) co_await sleep_for(1ms);
        ok_before_kill = ok;
        auto k = co_await cmd(admin, "CLIENT", "KILL", "ID", victim);
        killed = k.integer == 1;
        co_await all_done.async_wait(nothrow);
        CHECK(killed);
        CHECK(other == 0);
        CHECK(ok + unknown == 200 * 40);
        CHECK(ok > ok_before_kill);  // queued requests ran after the reconnect
        CHECK(conn.stats().reconnects >= 1);
        CHECK(conn.stats().unknown_outcomes == static_cast<std::uint64_t>(unknown));
        // Unknown really means unknown: the server applied every success and
        // some subset of the unknown ones.
        auto v = co_await cmd(admin, "GET", key);
        auto applied = std::stoll(v.str);
        CHECK(applied >= ok);
        CHECK(applied <= ok + unknown);
        co_await cmd(admin, "DEL", key);
        admin.stop();
      },
      60s);
}

TEST_CASE("connection: a cancelled written request keeps later replies aligned", "[connection]") {
  connected_case t;
  t.run([&]() -> asio::awaitable<void> {
    auto slow = debug_sleep("0.3");
    asio::steady_timer timer(t.ioc, 50ms);
    // The timer wins; the DEBUG SLEEP was already written and is abandoned.
    auto r = co_await (t.conn.async_exec(slow, asio::use_awaitable) ||
                       timer.async_wait(asio::use_awaitable));
    CHECK(r.index() == 1);
    auto a = co_await cmd(t.conn, "ECHO", "first");
    auto b = co_await cmd(t.conn, "ECHO", "second");
    CHECK(a.str == "first");
    CHECK(b.str == "second");
    CHECK(t.conn.stats().reconnects == 0);
  });
}

TEST_CASE("connection: cancellation of a queued request means it is never sent", "[connection]") {
  asio::io_context ioc;
  auto key = unique_name("never");
  thoonk::connection conn(ioc.get_executor(), test_config());
  thoonk::connection admin(ioc.get_executor(), test_config());
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    // Not connected yet: the request waits in the queue, unwritten.
    thoonk::request r;
    r.push("SET", key, "x");
    asio::cancellation_signal sig;
    error_code got;
    bool done = false;
    conn.async_exec(r,
                    asio::bind_cancellation_slot(sig.slot(), [&](error_code ec, thoonk::response) {
                      got = ec;
                      done = true;
                    }));
    sig.emit(asio::cancellation_type::terminal);
    while (!done) co_await sleep_for(1ms);
    CHECK(got == asio::error::operation_aborted);
    co_await connect_all(conn, admin);
    co_await cmd(conn, "PING");
    auto v = co_await cmd(admin, "EXISTS", key);
    CHECK(v.integer == 0);
    conn.stop();
    admin.stop();
  });
}

TEST_CASE("connection: per-request timeout", "[connection]") {
  connected_case t;
  t.run([&]() -> asio::awaitable<void> {
    auto slow = debug_sleep("0.3");
    thoonk::exec_options opts;
    opts.timeout = 50ms;
    auto [ec, resp] = co_await t.conn.async_exec(slow, opts, nothrow);
    CHECK(ec == thoonk::error::request_timeout);
    auto a = co_await cmd(t.conn, "ECHO", "after");
    CHECK(a.str == "after");
  });
}

TEST_CASE("connection: SCRIPT FLUSH then a script call reloads transparently",
          "[connection][script][eval]") {
  fixture f("script");
  auto& c = f.c;
  f.run_connected([&]() -> asio::awaitable<void> {
    thoonk::script s("return {KEYS[1], ARGV[1], redis.call('PING')}");
    std::vector<std::string> keys{"k1"}, args{"a1"};
    auto v1 = co_await c.async_eval(s, keys, args, asio::use_awaitable);
    REQUIRE(v1.elements.size() == 3);
    CHECK(v1.elements[0].str == "k1");
    co_await cmd(c.conn(), "SCRIPT", "FLUSH");
    auto v2 = co_await c.async_eval(s, keys, args, asio::use_awaitable);
    CHECK(v2 == v1);
    // A Lua error is data, not a transport error.
    thoonk::script bad("return redis.call('NOSUCHCOMMAND')");
    std::vector<std::string> none;
    auto [ec, v3] = co_await c.async_eval(bad, none, none, nothrow);
    CHECK(!ec);
    CHECK(v3.is_error());
  });
}

TEST_CASE("connection: an unreachable server yields a clear error within the timeout",
          "[connection][fault]") {
  // One attempt each: its error is what the caller gets.
  auto cfg = test_config();
  cfg.reconnect = false;
  asio::io_context ioc;
  SECTION("nothing listens: connection refused") {
    cfg.port = free_port(ioc);
    thoonk::connection conn(ioc.get_executor(), cfg);
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto [ec] = co_await conn.async_connect(nothrow);
      CHECK(ec == asio::error::connection_refused);
      // With reconnect off, a request has nowhere to go.
      thoonk::exec_options o;
      o.wait_for_connection = false;
      auto ping_ec = co_await try_ping(conn, o);
      CHECK(ping_ec == thoonk::error::not_connected);
    });
  }
  SECTION("accepts but never answers: connect_timeout") {
    asio::ip::tcp::acceptor silent(ioc, {asio::ip::make_address("127.0.0.1"), 0});
    asio::ip::tcp::socket held(ioc);
    silent.async_accept(held, [](error_code) {});
    cfg.port = silent.local_endpoint().port();
    cfg.connect_timeout = 300ms;
    thoonk::connection conn(ioc.get_executor(), cfg);
    run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto start = std::chrono::steady_clock::now();
      auto [ec] = co_await conn.async_connect(nothrow);
      CHECK(ec == thoonk::error::connect_timeout);
      CHECK(std::chrono::steady_clock::now() - start < 5s);
      CHECK(!ec.message().empty());
    });
  }
}

TEST_CASE("connection: AUTH", "[connection][auth]") {
  redis_server server({"--requirepass", "s3cret"});
  auto cfg = test_config();
  cfg.host = server.host();
  cfg.port = server.port();
  cfg.reconnect = false;
  SECTION("a wrong or missing password is auth_failed") {
    for (const char* password : {"wrong", ""}) {
      cfg.password = password;
      asio::io_context ioc;
      thoonk::connection conn(ioc.get_executor(), cfg);
      run_coro(ioc, [&]() -> asio::awaitable<void> {
        auto [ec] = co_await conn.async_connect(nothrow);
        CHECK(ec == thoonk::error::auth_failed);
        CHECK(ec.message().find("password") != std::string::npos);
      });
    }
  }
  SECTION("right password, RESP3 and RESP2, database and name") {
    cfg.password = "s3cret";
    cfg.database = 3;
    cfg.client_name = "thoonk-auth-test";
    for (int proto : {3, 2}) {
      cfg.protocol = proto;
      connected_case t(cfg);
      t.run([&]() -> asio::awaitable<void> {
        CHECK(t.conn.protocol() == proto);
        auto name = co_await cmd(t.conn, "CLIENT", "GETNAME");
        CHECK(name.str == "thoonk-auth-test");
        auto info = co_await cmd(t.conn, "CLIENT", "INFO");
        CHECK(info.str.find("db=3") != std::string::npos);
      });
    }
  }
}

TEST_CASE("connection: unix domain socket", "[connection]") {
  redis_server server(redis_server_options{{}, true});
  error_code ec;
  auto cfg = thoonk::config::from_url("unix://" + server.unix_socket(), ec, test_config());
  REQUIRE(!ec);
  connected_case t(cfg);
  t.run([&]() -> asio::awaitable<void> {
    auto v = co_await cmd(t.conn, "PING");
    CHECK(v.str == "PONG");
  });
}

TEST_CASE("connection: a server silent past the health-check deadline is reconnected",
          "[connection][fault]") {
  auto cfg = test_config();
  cfg.health_check_interval = 100ms;
  cfg.health_check_timeout = 300ms;
  connected_case t(cfg);
  auto events = record_events(t.conn);
  t.run([&]() -> asio::awaitable<void> {
    auto sleep = debug_sleep("1.5");
    auto [ec, resp] = co_await t.conn.async_exec(sleep, nothrow);
    CHECK(ec == thoonk::error::unknown_outcome);
    // The connection comes back by itself once the server answers again.
    auto v = co_await cmd(t.conn, "PING");
    CHECK(v.str == "PONG");
    CHECK(t.conn.stats().reconnects >= 1);
    bool saw_health = false;
    for (auto& e : *events)
      saw_health |= e.kind == thoonk::connection_event::disconnected &&
                    e.error == thoonk::error::health_check_timeout;
    CHECK(saw_health);
  });
}

TEST_CASE("connection: idle connections are pinged", "[connection]") {
  auto cfg = test_config();
  cfg.health_check_interval = 50ms;
  connected_case t(cfg);
  t.run([&]() -> asio::awaitable<void> {
    auto before = t.conn.stats().writes;
    co_await sleep_for(400ms);
    CHECK(t.conn.stats().writes > before);  // PINGs went out while idle
    CHECK(t.conn.stats().reconnects == 0);
  });
}

TEST_CASE("connection: a server restart is survived", "[connection][fault]") {
  redis_server server;
  auto cfg = test_config();
  cfg.host = server.host();
  cfg.port = server.port();
  connected_case t(cfg);
  t.run(
      [&]() -> asio::awaitable<void> {
        co_await cmd(t.conn, "SET", "k", "1");
        server.restart();
        // The first request after the restart may be written to the dead
        // socket (unknown outcome); the connection then reconnects.
        for (int i = 0; i < 50; ++i) {
          auto ec = co_await try_ping(t.conn);
          if (!ec) break;
          CHECK(ec == thoonk::error::unknown_outcome);
        }
        auto v = co_await cmd(t.conn, "EXISTS", "k");
        CHECK(v.integer == 0);  // a fresh server
        CHECK(t.conn.stats().reconnects >= 1);
      },
      30s);
}

TEST_CASE("connection: stop fails pending requests", "[connection]") {
  connected_case t;
  t.run([&]() -> asio::awaitable<void> {
    auto slow = debug_sleep("0.2");
    error_code got;
    bool done = false;
    t.conn.async_exec(slow, [&](error_code ec, thoonk::response) {
      got = ec;
      done = true;
    });
    co_await sleep_for(20ms);
    t.conn.stop();
    while (!done) co_await sleep_for(1ms);
    CHECK(got == thoonk::error::unknown_outcome);
    auto ping_ec = co_await try_ping(t.conn);
    CHECK(ping_ec == thoonk::error::client_stopped);
  });
}

TEST_CASE("connection: completion tokens", "[connection][exec]") {
  asio::io_context ioc;
  thoonk::connection conn(ioc.get_executor(), test_config());
  thoonk::request r;
  r.push("ECHO", "tok");
  // A plain callback.
  std::string got_cb;
  conn.async_exec(r, [&](error_code ec, thoonk::response resp) {
    if (!ec) got_cb = resp.at(0).str;
  });
  // deferred, launched later with a callback.
  std::string got_deferred;
  auto op = conn.async_exec(r, asio::deferred);
  std::move(op)([&](error_code ec, thoonk::response resp) {
    if (!ec) got_deferred = resp.at(0).str;
  });
  // use_future, from another thread's perspective.
  auto fut = conn.async_exec(r, asio::use_future);
  ioc.run_for(3s);
  CHECK(got_cb == "tok");
  CHECK(got_deferred == "tok");
  REQUIRE(fut.wait_for(0s) == std::future_status::ready);
  CHECK(fut.get().at(0).str == "tok");
  conn.stop();
  ioc.run_for(100ms);
}

TEST_CASE("connection: requests from another thread", "[connection]") {
  asio::io_context ioc;
  auto work = asio::make_work_guard(ioc);
  thoonk::connection conn(ioc.get_executor(), test_config());
  std::thread runner([&] { ioc.run(); });
  std::vector<std::future<thoonk::response>> futs;
  for (int i = 0; i < 100; ++i) {
    thoonk::request r;
    r.push("ECHO", std::to_string(i));
    futs.push_back(conn.async_exec(r, asio::use_future));
  }  // each request destroyed right after initiation: it was copied
  int ok = 0;
  for (int i = 0; i < 100; ++i) {
    if (futs[i].wait_for(10s) == std::future_status::ready &&
        futs[i].get().at(0).str == std::to_string(i))
      ++ok;
  }
  CHECK(ok == 100);
  asio::post(ioc, [&] { conn.stop(); });
  work.reset();
  ioc.stop();
  runner.join();
}
