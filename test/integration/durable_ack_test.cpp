// thoonk::with_durability: WAIT after put, finish and publish, against a
// private primary and a replica started by the test (docs/reliability.md,
// "Durable acknowledgements").
#include "support/helpers.hpp"
#include "support/replica_pair.hpp"

#include <thoonk/durability.hpp>

#include <iostream>

using namespace thoonk::test;
using E = thoonk::error;
using clock_type = std::chrono::steady_clock;

namespace {

// A primary, its replica in sync, and a connected client of the primary.
template <class Body>
void with_replica(Body body) {
  replica_pair servers;
  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), replica_pair::config_for(servers.primary));
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await c.async_connect(asio::use_awaitable);
        auto online_12 = co_await replicas_online(c.conn(), 1);
        REQUIRE(online_12);
        co_await body(servers, c);
        c.stop();
      },
      60s);
}

}  // namespace

TEST_CASE("durability: put, finish and publish report the replica that acknowledged",
          "[durability][put][finish][publish][claim]") {
  with_replica([](replica_pair& servers, thoonk::client& c) -> asio::awaitable<void> {
    const auto jname = co_await make_feed(c, "dur-jobs", thoonk::feed_type::job);
    const auto fname = co_await make_feed(c, "dur-feed", thoonk::feed_type::feed);
    thoonk::job_queue q(c, jname);
    thoonk::feed f(c, fname);

    thoonk::durability ack;
    ack.replicas = 1;
    ack.timeout = 2s;
    auto id = (co_await q.async_put("work", thoonk::with_durability(ack, asio::use_awaitable))).id;
    CHECK(ack.acknowledged == 1);
    CHECK(!ack.error);
    CHECK(ack.satisfied());
    // Acknowledged means the replica has it: read it there.
    thoonk::connection rc(c.get_executor(), replica_pair::config_for(servers.replica));
    co_await rc.async_connect(asio::use_awaitable);
    auto on_replica = co_await cmd(rc, "HGET", key("items", jname), id);
    CHECK(on_replica.str == "work");

    auto job = co_await q.async_claim(1s, asio::use_awaitable);
    thoonk::durability fack;
    fack.timeout = 2s;
    co_await q.async_finish(job, std::string("done"),
                            thoonk::with_durability(fack, asio::use_awaitable));
    CHECK(fack.acknowledged == 1);
    CHECK(fack.satisfied());

    // Combined with capture_diagnostics, in either order.
    thoonk::durability pack;
    pack.timeout = 2s;
    thoonk::diagnostics diag;
    auto r = co_await f.async_publish(
        thoonk::item_id("a"), "x",
        thoonk::with_durability(pack, thoonk::capture_diagnostics(diag, asio::use_awaitable)));
    CHECK(!r.edited);
    CHECK(pack.acknowledged == 1);
    thoonk::durability pack2;
    pack2.timeout = 2s;
    auto r2 = co_await f.async_publish(
        thoonk::item_id("a"), "y",
        thoonk::capture_diagnostics(diag, thoonk::with_durability(pack2, asio::use_awaitable)));
    CHECK(r2.edited);
    CHECK(pack2.acknowledged == 1);
    auto item = co_await cmd(rc, "HGET", key("items", fname), "a");
    CHECK(item.str == "y");

    // A failed operation sends no WAIT and reports -1; its error is the
    // operation's, the server's text in diagnostics as always.
    thoonk::durability nack;
    thoonk::feed missing(c, unique_name("dur-missing"));
    auto [mec, mr] = co_await missing.async_publish(
        thoonk::item_id("a"), "x",
        thoonk::with_durability(nack, thoonk::capture_diagnostics(diag, nothrow)));
    CHECK(mec == E::feed_not_found);
    CHECK(nack.acknowledged == -1);
    CHECK(!nack.error);
    CHECK(!diag.server_message().empty());
    rc.stop();
  });
}

TEST_CASE("durability: with the replica stalled the count is 0 after the timeout",
          "[durability][put]") {
  with_replica([](replica_pair& servers, thoonk::client& c) -> asio::awaitable<void> {
    const auto name = co_await make_feed(c, "dur-stalled", thoonk::feed_type::queue);
    thoonk::queue q(c, name);
    servers.replica.suspend();
    thoonk::durability ack;
    ack.replicas = 1;
    ack.timeout = 300ms;
    const auto t0 = clock_type::now();
    auto [ec, id] = co_await q.async_put("x", thoonk::with_durability(ack, nothrow));
    const auto waited = clock_type::now() - t0;
    // The put itself happened on the primary; only the count is short.
    CHECK(!ec);
    CHECK(!id.id.empty());
    CHECK(ack.acknowledged == 0);
    CHECK(!ack.error);
    CHECK(!ack.satisfied());
    // WAIT's timeout was honoured: it neither returned early nor hung.
    CHECK(waited >= 290ms);
    CHECK(waited < 5s);
    auto len = co_await cmd(c.conn(), "LLEN", key("ids", name));
    CHECK(len.integer == 1);
    servers.replica.resume();
    // The replica catches up and acknowledges again.
    thoonk::durability again;
    again.timeout = 3s;
    co_await q.async_put("y", thoonk::with_durability(again, asio::use_awaitable));
    CHECK(again.acknowledged == 1);
  });
}

TEST_CASE("durability: a killed replica gives 0, and more replicas than exist give the count",
          "[durability][publish]") {
  with_replica([](replica_pair& servers, thoonk::client& c) -> asio::awaitable<void> {
    const auto name = co_await make_feed(c, "dur-killed", thoonk::feed_type::feed);
    thoonk::feed f(c, name);
    thoonk::durability two;
    two.replicas = 2;
    two.timeout = 200ms;
    co_await f.async_publish(thoonk::item_id("a"), "x",
                             thoonk::with_durability(two, asio::use_awaitable));
    CHECK(two.acknowledged == 1);
    CHECK(!two.satisfied());
    servers.replica.stop();
    thoonk::durability one;
    one.timeout = 200ms;
    co_await f.async_publish(thoonk::item_id("b"), "y",
                             thoonk::with_durability(one, asio::use_awaitable));
    CHECK(one.acknowledged == 0);
    CHECK(!one.error);
  });
}

TEST_CASE("durability: bad parameters fail before any I/O", "[durability][put]") {
  asio::io_context ioc;
  auto cfg = named_config("thoonk-durability");
  cfg.health_check_interval = 1s;
  cfg.health_check_timeout = 3s;
  thoonk::client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    const auto name = co_await make_feed(c, "dur-bad", thoonk::feed_type::job);
    thoonk::job_queue q(c, name);
    for (auto [replicas, timeout] : std::vector<std::pair<int, std::chrono::milliseconds>>{
             {0, 100ms}, {-1, 100ms}, {1, 0ms}, {1, -5ms}, {1, 3s}, {1, 10s}}) {
      thoonk::durability ack;
      ack.replicas = replicas;
      ack.timeout = timeout;
      ack.acknowledged = 7;
      auto [ec, id] = co_await q.async_put("x", thoonk::with_durability(ack, nothrow));
      CHECK(ec == E::invalid_argument);
      CHECK(id.id.empty());
      CHECK(ack.acknowledged == -1);
    }
    auto counts = co_await q.async_counts(asio::use_awaitable);
    CHECK(counts.puts == 0);
    co_await c.async_delete_feed(name, asio::use_awaitable);
    c.stop();
  });
}

// The shared server has no replica.
CLIENT_TEST_CASE("dur-none", "durability: without a replica WAIT answers 0 and the put stands",
                 "[durability][put]") {
  const auto name = co_await make_feed(c, "dur-none", thoonk::feed_type::queue);
  thoonk::queue q(c, name);
  thoonk::durability ack;
  ack.timeout = 50ms;
  auto id = (co_await q.async_put("x", thoonk::with_durability(ack, asio::use_awaitable))).id;
  CHECK(!id.empty());
  CHECK(ack.acknowledged == 0);
  CHECK(!ack.error);
  co_await c.async_delete_feed(name, asio::use_awaitable);
}

// Not a speed assertion: prints what WAIT costs the other callers of the
// shared connection (docs/reliability.md records the figures): PINGs on the
// client's connection while a coroutine keeps putting, plain or durable.
TEST_CASE("durability: what a WAIT costs requests behind it on the connection",
          "[durability][measure]") {
  with_replica([](replica_pair& servers, thoonk::client& c) -> asio::awaitable<void> {
    const auto name = co_await make_feed(c, "dur-cost", thoonk::feed_type::queue);
    thoonk::queue q(c, name);
    struct figures {
      double mean_us = 0, max_us = 0;
      int puts = 0;
    };
    auto measure = [&](bool durable, std::chrono::milliseconds span) -> asio::awaitable<figures> {
      figures out;
      bool stop = false, writer_done = false;
      asio::co_spawn(
          c.get_executor(),
          [&]() -> asio::awaitable<void> {
            while (!stop) {
              thoonk::durability ack;
              ack.timeout = 100ms;
              if (durable) co_await q.async_put("x", thoonk::with_durability(ack, nothrow));
              else co_await q.async_put("x", nothrow);
              ++out.puts;
            }
            writer_done = true;
          },
          asio::detached);
      thoonk::request ping;
      ping.push("PING");
      std::chrono::nanoseconds total{0}, worst{0};
      int n = 0;
      const auto end = clock_type::now() + span;
      while (clock_type::now() < end) {
        const auto t0 = clock_type::now();
        co_await c.conn().async_exec(ping, asio::use_awaitable);
        const auto d = clock_type::now() - t0;
        total += d;
        worst = std::max(worst, std::chrono::duration_cast<std::chrono::nanoseconds>(d));
        ++n;
      }
      stop = true;
      auto writer_ended = co_await wait_until([&] { return writer_done; });
      REQUIRE(writer_ended);
      out.mean_us = std::chrono::duration<double, std::micro>(total).count() / n;
      out.max_us = std::chrono::duration<double, std::micro>(worst).count();
      co_return out;
    };
    const auto plain = co_await measure(false, 1s);
    const auto healthy = co_await measure(true, 1s);
    servers.replica.suspend();
    const auto stalled = co_await measure(true, 1s);
    servers.replica.resume();
    auto show = [](const char* label, const figures& f) {
      std::cout << "  \"" << label << "\": {\"ping_mean_us\": " << f.mean_us
                << ", \"ping_max_us\": " << f.max_us << ", \"puts_per_s\": " << f.puts << "}";
    };
    std::cout << "{\"bench\": \"wait_cost\", \"wait_timeout_ms\": 100,\n";
    show("plain_puts", plain);
    std::cout << ",\n";
    show("durable_puts_healthy_replica", healthy);
    std::cout << ",\n";
    show("durable_puts_stalled_replica", stalled);
    std::cout << "}\n";
    CHECK(plain.puts > 0);
    CHECK(stalled.puts > 0);
  });
}
