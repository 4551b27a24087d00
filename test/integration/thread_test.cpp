// The client used from several threads, as docs/threading.md allows: a
// client on a strand of an io_context run by four threads, with coroutines
// on the plain (multi-threaded) executor calling it; and operations
// initiated from threads that do not run the client's executor at all.
// Built into integration_tests and into tsan_tests (ThreadSanitizer,
// docs/testing.md), which is what these tests are for: they pass under
// AddressSanitizer by luck if a race is there, not under TSan.
#include "support/helpers.hpp"

#include <atomic>
#include <future>
#include <thread>

using namespace thoonk::test;

namespace {

// Runs `ioc` on `n` threads until the returned object is destroyed (which
// stops the io_context and joins them).
struct thread_pool_runner {
  asio::io_context& ioc;
  asio::executor_work_guard<asio::io_context::executor_type> guard;
  std::vector<std::thread> threads;
  thread_pool_runner(asio::io_context& c, int n) : ioc(c), guard(c.get_executor()) {
    for (int i = 0; i < n; ++i) threads.emplace_back([this] { ioc.run(); });
  }
  ~thread_pool_runner() {
    guard.reset();
    ioc.stop();
    for (auto& t : threads) t.join();
  }
};

}  // namespace

TEST_CASE("threads: a client on a strand, used by coroutines on four threads",
          "[thread][job][feed][claim][finish][put][publish][subscribe]") {
  asio::io_context ioc;
  thoonk::client c(asio::make_strand(ioc), named_config(unique_name("threads-strand")));
  const auto jobs_name = unique_name("threads-jobs");
  const auto feed_name = unique_name("threads-feed");
  constexpr int total = 2000, workers = 16, producers = 4, items = 200;
  std::atomic<int> finished{0}, published_seen{0}, worker_errors{0}, running{0};
  std::atomic<bool> stop{false};
  std::future<void> done;
  {
    thread_pool_runner pool(ioc, 4);
    // This coroutine runs on the client's strand, so the handles it owns
    // are made and destroyed there (docs/threading.md, "Lifetimes").
    done = asio::co_spawn(
        c.get_executor(),
        [&]() -> asio::awaitable<void> {
          co_await c.async_connect(asio::use_awaitable);
          thoonk::job_queue_options opts;
          opts.poll_interval = 100ms;
          auto q = co_await thoonk::job_queue::async_create_or_open(c, jobs_name, {}, opts,
                                                                    asio::use_awaitable);
          auto f = co_await thoonk::feed::async_create_or_open(c, feed_name, asio::use_awaitable);
          thoonk::feed_callback on_item = [&](const thoonk::feed_event& e) {
            if (e.kind == thoonk::feed_event::publish) ++published_seen;
          };
          auto sub = co_await f.async_subscribe(on_item, asio::use_awaitable);
          // Every coroutine below runs on the io_context's own executor, so
          // its steps run on any of the four threads; each call to the
          // client hops to the client's strand and back. They use the
          // handles of this frame, which outlives them.
          auto worker = [&]() -> asio::awaitable<void> {
            ++running;
            while (!stop) {
              auto [ec, job] = co_await q.async_claim(100ms, nothrow);
              if (ec == thoonk::error::queue_empty) continue;
              if (ec) {
                ++worker_errors;
                break;
              }
              auto [fec] = co_await q.async_finish(job, "r", nothrow);
              if (fec) ++worker_errors;
              else ++finished;
            }
            --running;
          };
          auto producer = [&](int n) -> asio::awaitable<void> {
            ++running;
            for (int i = 0; i < total / producers; ++i)
              co_await q.async_put("job " + std::to_string(n) + "-" + std::to_string(i),
                                   asio::use_awaitable);
            --running;
          };
          auto publisher = [&]() -> asio::awaitable<void> {
            ++running;
            for (int i = 0; i < items; ++i)
              co_await f.async_publish("item " + std::to_string(i), asio::use_awaitable);
            --running;
          };
          for (int i = 0; i < workers; ++i) asio::co_spawn(ioc, worker(), asio::detached);
          for (int i = 0; i < producers; ++i) asio::co_spawn(ioc, producer(i), asio::detached);
          asio::co_spawn(ioc, publisher(), asio::detached);
          const bool all = co_await wait_until(
              [&] { return finished.load() == total && published_seen.load() == items; }, 30s);
          stop = true;
          CHECK(all);
          // The workers leave within one claim timeout.
          const bool left = co_await wait_until([&] { return running.load() == 0; }, 10s);
          REQUIRE(left);
          const auto counts = co_await q.async_counts(asio::use_awaitable);
          CHECK(counts.finishes == total);
          CHECK(counts.items == 0);
          co_await c.async_delete_feed(jobs_name, asio::use_awaitable);
          co_await c.async_delete_feed(feed_name, asio::use_awaitable);
          sub = {};
          c.stop();
        },
        asio::use_future);
    REQUIRE(done.wait_for(60s) == std::future_status::ready);
  }
  done.get();
  CHECK(finished.load() == total);
  CHECK(published_seen.load() == items);
  CHECK(worker_errors.load() == 0);
}

TEST_CASE("threads: operations initiated from four threads that do not run the client",
          "[thread][job][put][claim][finish][exec]") {
  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), named_config(unique_name("threads-foreign")));
  const auto name = unique_name("threads-foreign-jobs");
  constexpr int threads = 4, per_thread = 100;
  std::atomic<int> finished{0}, matched{0};
  // Destroyed after the io_context stopped (docs/threading.md, "Lifetimes").
  thoonk::job_queue q;
  {
    thread_pool_runner runner(ioc, 1);
    c.async_connect(asio::use_future).get();
    q = thoonk::job_queue::async_create_or_open(c, name, asio::use_future).get();
    std::vector<std::thread> callers;
    for (int t = 0; t < threads; ++t) {
      callers.emplace_back([&, t] {
        for (int i = 0; i < per_thread; ++i) {
          const std::string key = name + ":" + std::to_string(t) + ":" + std::to_string(i);
          thoonk::request r;
          r.push("SET", key, key);
          r.push("GET", key);
          r.push("DEL", key);
          auto resp = c.conn().async_exec(r, asio::use_future).get();
          if (resp.size() == 3 && resp[1].str == key) ++matched;
          q.async_put("job", asio::use_future).get();
          auto job = q.async_claim(5s, asio::use_future).get();
          q.async_finish(job, asio::use_future).get();
          ++finished;
        }
      });
    }
    for (auto& t : callers) t.join();
    const auto counts = q.async_counts(asio::use_future).get();
    CHECK(counts.finishes == threads * per_thread);
    CHECK(counts.items == 0);
    c.async_delete_feed(name, asio::use_future).get();
    asio::post(ioc, [&] { c.stop(); });
  }
  CHECK(finished.load() == threads * per_thread);
  CHECK(matched.load() == threads * per_thread);
}
