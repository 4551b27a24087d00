// Workers in processes of their own (test/tools/job_runner_worker.cpp,
// started and stopped by pid): a worker killed with SIGKILL in the middle
// of its jobs has them back within its registration's time to live plus
// one maintenance period, long before their leases would lapse, and every
// job is then finished exactly once; a worker stopped with SIGTERM (its
// runner's stop request) gives its jobs in flight back within its stop
// timeout, with no failure counted, and leaves the registry.
// co_await stays out of CHECK and REQUIRE: Catch2 also passes the
// expression to __builtin_constant_p, and g++ 12 then awaits it twice.
#include "support/child_process.hpp"
#include "support/job_engine.hpp"
#include "support/runner.hpp"

#include <set>

using namespace thoonk::test;

namespace {

// How many "start" lines the worker printed.
std::size_t starts(child_process& w) {
  const auto& out = w.output();
  std::size_t n = 0;
  for (auto at = out.find("start "); at != std::string::npos; at = out.find("start ", at + 1)) ++n;
  return n;
}

std::vector<std::string> worker_args(const std::string& queue, int concurrency, int handler_ms,
                                     int ttl_ms) {
  return {shared_redis_url(),     queue, std::to_string(concurrency), std::to_string(handler_ms),
          std::to_string(ttl_ms), "60"};
}

}  // namespace

FIXTURE_TEST_CASE_WITHIN(
    60s, "runkill",
    "runner process killed with SIGKILL mid-job: its jobs come back within the worker TTL "
    "plus one maintenance period, none lost, each finished once",
    "[job][run][process][maintain][fail_worker]") {
  thoonk::job_queue::settings s;
  s.claim_timeout = 60s;  // a lapsed lease would take a minute
  auto q = co_await engine_queue(f, s);
  auto ids = co_await put_copies(q, 8, "work");
  constexpr int ttl_ms = 1000;
  constexpr auto maintenance_period = 200ms;
  child_process w(THOONK_JOB_RUNNER_WORKER, worker_args(f.name, 4, 60000, ttl_ms));
  auto busy = co_await wait_until([&] { return starts(w) == 4; }, 15s);
  REQUIRE(busy);
  auto ws = co_await q.async_get_workers(asio::use_awaitable);
  REQUIRE(ws.size() == 1);
  CHECK(ws[0].claims.size() == 4);
  w.kill();
  const auto killed = std::chrono::steady_clock::now();

  // Maintenance every 200 ms, as a deployment would run it.
  thoonk::job_counts c;
  std::int64_t dead_workers = 0, requeued = 0;
  while (ms_since(killed) < 10000) {
    auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
    dead_workers += rep.dead_workers;
    requeued += rep.worker_jobs_requeued;
    c = co_await counts_of(q);
    if (c.waiting == 8) break;
    co_await sleep_for(maintenance_period);
  }
  const auto back_after = ms_since(killed);
  INFO("jobs back " << back_after << " ms after the kill (worker ttl " << ttl_ms
                    << " ms, maintenance every 200 ms, lease 60 s)");
  CHECK(c.waiting == 8);
  CHECK(c.claimed == 0);
  CHECK(dead_workers == 1);
  CHECK(requeued == 4);
  CHECK(back_after < ttl_ms + 200 + 1500);  // the slack covers a loaded machine
  std::int64_t stalls = 0;
  for (const auto& id : ids) {
    auto j = co_await job_of(q, id);
    stalls += j.stall_count;
    if (j.stall_count > 0) CHECK(j.last_error.find("lapsed") != std::string::npos);
  }
  CHECK(stalls == 4);

  // Another worker finishes them all, each once.
  std::multiset<std::string> ran;
  thoonk::job_coroutine h =
      [&](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    ran.insert(ctx.job().id);
    co_return std::string("ok");
  };
  thoonk::run_options o;
  o.concurrency = 4;
  auto run = start_run(q, h, o);
  auto all = co_await wait_finishes(q, 8);
  CHECK(all);
  auto stopped = co_await stop_run(*run);
  REQUIRE(stopped);
  CHECK(ran.size() == 8);
  for (const auto& id : ids) CHECK(ran.count(id) == 1);
  auto after = co_await counts_of(q);
  CHECK(after.finishes == 8);
  CHECK(after.items == 0);
  auto none = co_await q.async_get_workers(asio::use_awaitable);
  CHECK(none.empty());
}

FIXTURE_TEST_CASE_WITHIN(
    40s, "runterm",
    "runner process stopped with SIGTERM: jobs in flight go back within the stop timeout, "
    "no failure counted, the worker leaves the registry",
    "[job][run][process][stop]") {
  auto q = co_await engine_queue(f);
  auto ids = co_await put_copies(q, 4, "long");
  child_process w(THOONK_JOB_RUNNER_WORKER, worker_args(f.name, 4, 60000, 10000));
  auto busy = co_await wait_until([&] { return starts(w) == 4; }, 15s);
  REQUIRE(busy);
  const auto t0 = std::chrono::steady_clock::now();
  auto status = co_await w.stop();
  const auto took = ms_since(t0);
  INFO("exit status " << status << " after " << took
                      << " ms (stop timeout 2000 ms); output: " << w.output());
  CHECK(status == 0);
  CHECK(took < 2000 + 3000);
  CHECK(w.number_after("finished") == 0);
  auto c = co_await counts_of(q);
  CHECK(c.waiting == 4);
  CHECK(c.claimed == 0);
  for (const auto& id : ids) {
    auto j = co_await job_of(q, id);
    CHECK(j.failures == 0);
    CHECK(j.state == thoonk::job_state::waiting);
  }
  auto none = co_await q.async_get_workers(asio::use_awaitable);
  CHECK(none.empty());
}
