// The tutorial of docs/jobs.md, compiled and run against the test server,
// plus a check that the document shows exactly this code, and a run of the
// example program's job part (examples/job_demo.hpp).
#include "support/doc_snippet.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include "../../examples/job_demo.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

// tutorial-begin
#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace asio = boost::asio;
using namespace std::chrono_literals;

// A worker: claims jobs until none arrives for 200 ms; finishes each with a
// result. (Coroutines take their arguments by value.)
asio::awaitable<void> jobs_tutorial_worker(thoonk::job_queue jobs) {
  for (;;) {
    auto [ec, job] = co_await jobs.async_claim(200ms, asio::as_tuple(asio::use_awaitable));
    if (ec) co_return;  // error::queue_empty: nothing arrived in time
    co_await jobs.async_finish(job, "done: " + job.item, asio::use_awaitable);
  }
}

asio::awaitable<void> jobs_tutorial(thoonk::client& client, std::string name, std::ostream& out) {
  // 1. Create the job queue (or open it, if it exists). Claims lapse after
  //    30 s without a finish or a heartbeat; a job whose claim lapses more
  //    than 3 times is stalled.
  thoonk::job_queue::settings settings;
  settings.claim_timeout = 30s;
  settings.retry.max_stalls = 4;
  auto jobs =
      co_await thoonk::job_queue::async_create_or_open(client, name, settings, asio::use_awaitable);

  // 2. Producer: each put returns the job's id. High priority is next out.
  auto cat = (co_await jobs.async_put("resize cat.jpg", asio::use_awaitable)).id;
  std::vector<std::string> more{"resize dog.jpg", "resize owl.jpg"};
  co_await jobs.async_put_many(more, thoonk::priority::normal, asio::use_awaitable);
  co_await jobs.async_put("resize logo.png", thoonk::priority::high, asio::use_awaitable);

  // 3. Worker: claim, work, finish. The token proves the claim is ours.
  auto job = co_await jobs.async_claim(5s, asio::use_awaitable);
  out << "claimed " << job.item << ", attempt " << job.token << "\n";
  co_await jobs.async_finish(job, "logo done", asio::use_awaitable);

  // 4. Give a job back: it returns to the end of the line, failure +1.
  job = co_await jobs.async_claim(5s, asio::use_awaitable);
  auto failures = co_await jobs.async_cancel(job, asio::use_awaitable);
  out << "gave back " << job.item << ", failures " << failures << "\n";

  // 5. The old token is dead: errors are codes, not exceptions, with
  //    as_tuple.
  auto [ec] = co_await jobs.async_finish(job, asio::as_tuple(asio::use_awaitable));
  out << "stale finish: " << ec.message() << "\n";

  // 6. A caller waits for one result while two workers empty the queue.
  using namespace asio::experimental::awaitable_operators;
  auto result = co_await (jobs.async_get_result(cat, 5s, asio::use_awaitable) &&
                          jobs_tutorial_worker(jobs) && jobs_tutorial_worker(jobs));
  out << "result: " << result << "\n";

  // 7. Maintenance (run it every few seconds in one or more processes: a
  //    lock keeps one runner at a time) recovers lapsed claims and reports.
  thoonk::maintenance_options mo;
  auto report = co_await jobs.async_maintain(mo, asio::use_awaitable);
  out << "waiting " << report.counts.waiting << ", finished " << report.counts.finishes << "\n";

  co_await client.async_delete_feed(name + ".stats", asio::use_awaitable);
  co_await client.async_delete_feed(name, asio::use_awaitable);
}
// tutorial-end

TEST_CASE("jobs tutorial: docs/jobs.md shows exactly the code compiled here", "[job][job_docs]") {
  thoonk::test::check_tutorial_shown(__FILE__, "docs/jobs.md");
}

TEST_CASE("jobs tutorial: runs against a real server", "[job][job_docs]") {
  const auto text = thoonk::test::run_tutorial(jobs_tutorial, "jobs-tutorial");
  INFO(text);
  CHECK(text.find("claimed resize logo.png, attempt 1\n") != std::string::npos);
  CHECK(text.find("gave back resize cat.jpg, failures 1\n") != std::string::npos);
  CHECK(text.find("stale finish: " + make_error_code(thoonk::error::job_not_claimed).message()) !=
        std::string::npos);
  CHECK(text.find("result: done: resize cat.jpg\n") != std::string::npos);
  CHECK(text.find("waiting 0, finished 4\n") != std::string::npos);
}

TEST_CASE("jobs example: the job part of the example program runs", "[job][job_docs]") {
  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), thoonk::test::test_config());
  std::ostringstream captured;
  auto* old = std::cout.rdbuf(captured.rdbuf());
  try {
    thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
      co_await client.async_connect(asio::use_awaitable);
      co_await run_job_demo(client);
      client.stop();
    });
  } catch (...) {
    std::cout.rdbuf(old);
    throw;
  }
  std::cout.rdbuf(old);
  auto text = captured.str();
  INFO(text);
  CHECK(text.find("counts: waiting 0, claimed 0, stalled 0, puts 6, finishes 6") !=
        std::string::npos);
  CHECK(text.find("caller: result of") != std::string::npos);
  CHECK(text.find("(attempt 2, failures 1)") != std::string::npos);
}
