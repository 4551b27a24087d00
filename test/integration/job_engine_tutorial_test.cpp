// The job engine tutorial of docs/jobs.md (§11), compiled and run against
// the test server, plus a check that the page shows exactly this code.
#include "support/doc_snippet.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <catch2/catch.hpp>

#include <sstream>

// engine-tutorial-begin
#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>

#include <ostream>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

asio::awaitable<void> engine_tutorial(thoonk::client& client, std::string name, std::ostream& out) {
  // 1. A queue whose failed jobs come back after 100 ms, 200 ms, ... and
  //    give up at the third failure, sending a record to "<name>.dead".
  auto dead =
      co_await thoonk::job_queue::async_create_or_open(client, name + ".dead", asio::use_awaitable);
  thoonk::job_queue::settings settings;
  settings.retry.max_retries = 3;
  settings.retry.min_backoff = 100ms;
  settings.retry.max_backoff = 1s;
  settings.dead_letter_queue = name + ".dead";
  auto jobs =
      co_await thoonk::job_queue::async_create_or_open(client, name, settings, asio::use_awaitable);

  // 2. A job for later: not claimable before its time.
  thoonk::put_options later;
  later.delay = 300ms;
  auto reminder = co_await jobs.async_put("send reminder", later, asio::use_awaitable);
  auto [ec, none] = co_await jobs.async_claim(0ms, asio::as_tuple(asio::use_awaitable));
  out << "before its time: " << (ec == thoonk::error::queue_empty ? "nothing" : none.item) << "\n";
  auto job = co_await jobs.async_claim(5s, asio::use_awaitable);
  out << "at its time: " << job.item << " (" << (job.id == reminder.id ? "same id" : "?") << ")\n";
  co_await jobs.async_finish(job, asio::use_awaitable);

  // 3. De-duplication: puts naming the same id update one job. While it is
  //    claimed, a put is held and applied when the claim ends.
  thoonk::put_options report;
  report.id = "daily-report";
  co_await jobs.async_put("report v1", report, asio::use_awaitable);
  auto again = co_await jobs.async_put("report v2", report, asio::use_awaitable);
  out << "second put: "
      << (again.outcome == thoonk::put_result::outcome_t::updated ? "updated" : "?") << "\n";
  job = co_await jobs.async_claim(5s, asio::use_awaitable);
  auto held = co_await jobs.async_put("report v3", report, asio::use_awaitable);
  out << "claimed " << job.item << ", put while claimed: "
      << (held.outcome == thoonk::put_result::outcome_t::held ? "held" : "?") << "\n";
  co_await jobs.async_finish(job, asio::use_awaitable);
  job = co_await jobs.async_claim(5s, asio::use_awaitable);
  out << "after the finish: " << job.item << "\n";

  // 4. Failures: retried after a growing backoff, then a dead letter.
  for (int attempt = 1;; ++attempt) {
    auto failed = co_await jobs.async_fail(job, "printer on fire", asio::use_awaitable);
    if (failed.outcome == thoonk::fail_result::outcome_t::dead_lettered) {
      out << "failure " << attempt << ": dead letter\n";
      break;
    }
    out << "failure " << attempt << ": retry scheduled\n";
    job = co_await jobs.async_claim(5s, asio::use_awaitable);
  }
  auto info = co_await jobs.async_get_job("daily-report", asio::use_awaitable);
  out << "kept: " << info->item << ", " << info->retry_count << " failures, last error \""
      << info->last_error << "\"\n";
  auto record = co_await dead.async_claim(5s, asio::use_awaitable);
  out << "dead-letter record: " << record.item << "\n";
  co_await dead.async_finish(record, asio::use_awaitable);

  co_await client.async_delete_feed(name, asio::use_awaitable);
  co_await client.async_delete_feed(name + ".dead", asio::use_awaitable);
}
// engine-tutorial-end

TEST_CASE("job engine tutorial: docs/jobs.md shows exactly the code compiled here",
          "[job][job_docs]") {
  thoonk::test::check_tutorial_shown(__FILE__, "docs/jobs.md", "engine-tutorial");
}

// On a cluster the queue's name is a hash tag of its own, so that
// "<name>.dead" shares its slot (docs/cluster.md, "Dead-letter queues").
TEST_CASE("job engine tutorial: runs against a real server",
          "[job][job_docs][put][claim][fail][finish][get_job]") {
  const auto text = thoonk::test::run_tutorial(engine_tutorial, "engine-tutorial", true);
  const std::string expected =
      "before its time: nothing\n"
      "at its time: send reminder (same id)\n"
      "second put: updated\n"
      "claimed report v2, put while claimed: held\n"
      "after the finish: report v3\n"
      "failure 1: retry scheduled\n"
      "failure 2: retry scheduled\n"
      "failure 3: dead letter\n"
      "kept: report v3, 3 failures, last error \"printer on fire\"\n"
      "dead-letter record: [\"daily-report\",\"report v3\",\"printer on fire\"]\n";
  CHECK(text == expected);
}
