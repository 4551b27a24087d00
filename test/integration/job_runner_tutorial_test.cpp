// The runner tutorial of docs/jobs.md (§13), compiled and run against the
// test server, plus a check that the page shows exactly this code.
#include "support/doc_snippet.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <catch2/catch.hpp>

#include <sstream>

// runner-tutorial-begin
#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>

#include <ostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<void> runner_tutorial(thoonk::client& client, std::string name, std::ostream& out) {
  auto jobs = co_await thoonk::job_queue::async_create_or_open(client, name, asio::use_awaitable);
  std::vector<std::string> photos{"cat.jpg", "dog.jpg", "broken.jpg"};
  auto ids = co_await jobs.async_put_many(photos, thoonk::priority::normal, asio::use_awaitable);

  // 1. The handler: its result finishes the job, an exception fails it
  //    (permanent_job_error: a dead letter at once, no retries).
  thoonk::job_coroutine resize =
      [](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    if (ctx.job().item == "broken.jpg") throw thoonk::permanent_job_error("not an image");
    ctx.progress("resizing " + ctx.job().item);
    co_return "thumb-" + ctx.job().item;
  };

  // 2. A registered worker with 8 handlers at once. It runs until stopped:
  //    by a stop request (run_options::stop) or, here, by cancelling the
  //    operation once the three jobs are done. Either way the stop is
  //    graceful: jobs in flight get run_options::stop_timeout to finish.
  thoonk::run_options options;
  options.concurrency = 8;
  options.worker_name = "resizer-1";
  asio::cancellation_signal stop;
  auto stop_when_done = [&]() -> asio::awaitable<void> {
    for (;;) {
      auto counts = co_await jobs.async_counts(asio::use_awaitable);
      if (counts.finishes + counts.stalled == 3) break;
      co_await asio::steady_timer(client.get_executor(), 10ms).async_wait(asio::use_awaitable);
    }
    stop.emit(asio::cancellation_type::terminal);
  };
  asio::co_spawn(client.get_executor(), stop_when_done(), asio::detached);
  auto report = co_await jobs.async_run(
      resize, options, asio::bind_cancellation_slot(stop.slot(), asio::use_awaitable));
  out << report.worker_name << ": " << report.finished << " finished, " << report.dead_lettered
      << " dead letter\n";

  // 3. What the jobs left behind.
  out << "result: " << co_await jobs.async_get_result(ids[0], 1s, asio::use_awaitable) << "\n";
  auto broken = co_await jobs.async_get_job(ids[2], asio::use_awaitable);
  out << "broken.jpg: " << broken->last_error << "\n";
  auto workers = co_await jobs.async_get_workers(asio::use_awaitable);
  out << "workers left: " << workers.size() << "\n";
  co_await client.async_delete_feed(name, asio::use_awaitable);
}
// runner-tutorial-end

TEST_CASE("runner tutorial: docs/jobs.md shows exactly the code compiled here",
          "[job][job_docs][run]") {
  thoonk::test::check_tutorial_shown(__FILE__, "docs/jobs.md", "runner-tutorial");
}

TEST_CASE("runner tutorial: runs against a real server",
          "[job][job_docs][run][get_result][get_job][get_workers]") {
  const auto text = thoonk::test::run_tutorial(runner_tutorial, "runner-tutorial");
  const std::string expected =
      "resizer-1: 2 finished, 1 dead letter\n"
      "result: thumb-cat.jpg\n"
      "broken.jpg: not an image\n"
      "workers left: 0\n";
  CHECK(text == expected);
}
