// The job queue part of the example program: a producer putting jobs, a few
// worker coroutines claiming and finishing them (one job is cancelled once
// and comes back), and a caller waiting for a result. See docs/jobs.md.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace job_demo {

namespace asio = boost::asio;
using namespace std::chrono_literals;
inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

inline asio::awaitable<void> pause(std::chrono::milliseconds d) {
  asio::steady_timer t(co_await asio::this_coro::executor, d);
  co_await t.async_wait(nothrow);
}

// Claims jobs until none arrives for a second. Finishes each with a result;
// the first time it meets "resize photo-3.jpg" it gives the job back
// (cancel), to show a job coming back with its failure count.
inline asio::awaitable<void> worker(thoonk::job_queue q, int n) {
  for (;;) {
    auto [ec, job] = co_await q.async_claim(1s, nothrow);
    if (ec == thoonk::error::queue_empty) break;
    if (ec) {
      std::cout << "  worker " << n << ": claim failed: " << ec.message() << "\n";
      break;
    }
    std::cout << "  worker " << n << ": claimed " << job.id << " \"" << job.item << "\" (attempt "
              << job.token << ", failures " << job.failures << ")\n";
    if (job.item == "resize photo-3.jpg" && job.failures == 0) {
      auto [cec, failures] = co_await q.async_cancel(job, nothrow);
      std::cout << "  worker " << n << ": gave " << job.id << " back (failures now " << failures
                << ")\n";
      continue;
    }
    co_await pause(30ms);  // the work
    auto [fec] = co_await q.async_finish(job, "done: " + job.item, nothrow);
    if (fec) std::cout << "  worker " << n << ": finish failed: " << fec.message() << "\n";
  }
  std::cout << "  worker " << n << ": no more jobs\n";
}

// Waits for one job's result (it may be finished before or after we ask).
inline asio::awaitable<void> caller(thoonk::job_queue q, std::string id) {
  std::cout << "  caller: waiting for the result of " << id << "\n";
  auto [ec, result] = co_await q.async_get_result(id, 10s, nothrow);
  if (ec) std::cout << "  caller: no result: " << ec.message() << "\n";
  else std::cout << "  caller: result of " << id << ": \"" << result << "\"\n";
}

}  // namespace job_demo

/// Runs the job queue demo on a connected client: creates the job queue
/// "demo.jobs" (claims lapse after 5 s), subscribes to its finish events,
/// puts 6 jobs, runs 3 workers and a caller waiting for a result, prints
/// the counts and a maintenance report, and deletes the queue.
inline boost::asio::awaitable<void> run_job_demo(thoonk::client& c) {
  namespace asio = boost::asio;
  using namespace boost::asio::experimental::awaitable_operators;
  using job_demo::nothrow;
  using namespace std::chrono_literals;
  const std::string name = "demo.jobs";
  std::cout << "== job queue demo ==\n";

  // A fresh queue (a leftover from an interrupted run is removed first).
  co_await c.async_delete_feed(name, nothrow);
  thoonk::job_queue::settings settings;
  settings.claim_timeout = 5s;
  settings.retry.max_stalls = 4;
  auto [cec, q] = co_await thoonk::job_queue::async_create_or_open(c, name, settings, nothrow);
  if (cec) {
    std::cout << "  cannot create " << name << ": " << cec.message() << "\n";
    co_return;
  }
  // Every finish with a result, from any client, as a typed event.
  auto [sec, finished] = co_await q.async_subscribe_finished(
      [](const thoonk::job_finished& e) {
        std::cout << "  event: " << e.id << " finished: \"" << e.result << "\"\n";
      },
      nothrow);

  // Producer: one urgent job and five normal ones.
  std::vector<std::string> items;
  for (int i = 1; i <= 5; ++i) items.push_back("resize photo-" + std::to_string(i) + ".jpg");
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto urgent =
      (co_await q.async_put("resize avatar.png", thoonk::priority::high, asio::use_awaitable)).id;
  std::cout << "  producer: put " << ids.size() << " jobs and one urgent job " << urgent << "\n";

  co_await (job_demo::worker(q, 1) && job_demo::worker(q, 2) && job_demo::worker(q, 3) &&
            job_demo::caller(q, ids[2]));

  auto counts = co_await q.async_counts(asio::use_awaitable);
  std::cout << "  counts: waiting " << counts.waiting << ", claimed " << counts.claimed
            << ", stalled " << counts.stalled << ", puts " << counts.puts << ", finishes "
            << counts.finishes << "\n";
  // A late caller still gets a result: it is kept for the result_ttl setting.
  auto [rec, late] = co_await q.async_get_result(urgent, 1s, nothrow);
  std::cout << "  late caller: result of " << urgent << ": \"" << late << "\"\n";

  thoonk::maintenance_options mo;
  mo.publish_stats = false;
  auto [mec, rep] = co_await q.async_maintain(mo, nothrow);
  std::cout << "  maintenance: ran " << (rep.ran ? "yes" : "no") << ", lapsed claims requeued "
            << rep.requeued << ", stalled " << rep.stalled << ", unaccounted "
            << rep.unaccounted_suspects << "\n";
  co_await c.async_delete_feed(name, nothrow);
}
