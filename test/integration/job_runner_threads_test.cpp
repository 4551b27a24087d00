// job_queue::run with its handlers on a thread pool while the client's I/O
// stays on its own thread: a plain function handler, and a CPU-bound handler
// that holds its thread for three leases and must keep its lease (the
// heartbeats are never delayed by it). Also built with ThreadSanitizer
// (tsan_tests, scripts/run-tests.sh).
// co_await stays out of CHECK and REQUIRE: Catch2 also passes the
// expression to __builtin_constant_p, and g++ 12 then awaits it twice.
#include "support/job_engine.hpp"
#include "support/runner.hpp"

#include <boost/asio/thread_pool.hpp>

#include <atomic>

using namespace thoonk::test;
using E = thoonk::error;

TEST_CASE("run: a plain function handler on a thread pool; nullopt finishes without a result",
          "[job][run][get_result]") {
  fixture f("runfn");
  asio::thread_pool pool(2);
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto q = co_await engine_queue(f);
    auto with = co_await put_item(q, "keep");
    auto without = co_await put_item(q, "drop");
    std::atomic<int> on_pool{0};
    thoonk::job_function fn = [&](thoonk::job_context ctx) -> std::optional<std::string> {
      if (pool.get_executor().running_in_this_thread()) ++on_pool;
      if (ctx.job().item == "drop") return std::nullopt;
      return ctx.job().item + "!";
    };
    thoonk::run_options o;
    o.concurrency = 2;
    o.handler_executor = pool.get_executor();
    auto run = start_run(q, fn, o);
    auto all = co_await wait_finishes(q, 2);
    CHECK(all);
    co_await stop_run_cleanly(*run);
    CHECK(run->report.finished == 2);
    CHECK(on_pool == 2);
    auto r = co_await q.async_get_result(with, 1s, asio::use_awaitable);
    CHECK(r == "keep!");
    auto [rec, none] = co_await q.async_get_result(without, 200ms, nothrow);
    CHECK(rec == E::result_timeout);
  });
  pool.join();
}

TEST_CASE(
    "run: a CPU-bound handler on a thread pool holding its thread for three leases keeps "
    "its lease",
    "[job][run][heartbeat][maintain]") {
  fixture f("runcpu");
  asio::thread_pool pool(1);
  run_coro(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        thoonk::job_queue::settings s;
        s.claim_timeout = 400ms;
        auto q = co_await engine_queue(f, s);
        auto id = co_await put_item(q, "crunch");
        // Maintenance runs all along: a lease not renewed would lapse.
        asio::cancellation_signal stop_maint;
        bool maint_done = false;
        q.async_run_maintenance(
            100ms, no_stats(),
            asio::bind_cancellation_slot(stop_maint.slot(),
                                         [&](boost::system::error_code) { maint_done = true; }));
        thoonk::job_function busy = [](thoonk::job_context) -> std::optional<std::string> {
          // Holds its thread (no yield) for three leases.
          const auto until = std::chrono::steady_clock::now() + 1300ms;
          volatile std::uint64_t x = 0;
          while (std::chrono::steady_clock::now() < until) x = x + 1;
          return std::string("crunched");
        };
        thoonk::run_options o;
        o.handler_executor = pool.get_executor();
        o.worker_ttl = 600ms;
        o.heartbeat_interval = 100ms;
        auto run = start_run(q, busy, o);
        auto done = co_await wait_finishes(q, 1, 10s);
        CHECK(done);
        auto stopped = co_await stop_run(*run);
        REQUIRE(stopped);
        stop_maint.emit(asio::cancellation_type::terminal);
        co_await wait_until([&] { return maint_done; });
        CHECK(!run->ec);
        CHECK(run->report.finished == 1);
        CHECK(run->report.lost == 0);
        CHECK(run->report.cancelled == 0);
        CHECK(run->report.started == 1);
        auto r = co_await q.async_get_result(id, 1s, asio::use_awaitable);
        CHECK(r == "crunched");
        auto fails = co_await cmd(f.c.conn(), "HGET", key("cancelled", f.name), id);
        CHECK(fails.is_null());
      },
      30s);
  pool.join();
}
