// job_queue::run, the worker runner (docs/jobs.md "Workers and the runner"),
// in one process against the real server: results and failures, 10,000
// jobs with failures at concurrency 32, aborts from another client reaching
// the handler, pause and resume, a worker failed from outside, progress,
// the graceful stop, and the options and names refused before any I/O.
// Handlers on a thread pool: job_runner_threads_test.cpp.
// co_await stays out of CHECK and REQUIRE: Catch2 also passes the
// expression to __builtin_constant_p, and g++ 12 then awaits it twice.
#include "support/job_engine.hpp"
#include "support/runner.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>

using namespace thoonk::test;
using E = thoonk::error;

namespace {

// A coroutine handler that waits `d` (cancellable) and returns "ok:<item>".
thoonk::job_coroutine waiting_handler(std::chrono::milliseconds d) {
  return [d](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
    co_return "ok:" + ctx.job().item;
  };
}

// (A named coroutine: g++ 12 frees by-value parameters of coroutine
// lambdas wrongly.)
asio::awaitable<void> expect_refused(thoonk::job_queue& q, thoonk::run_options o,
                                     thoonk::job_coroutine handler, thoonk::error want) {
  auto [ec, rep] = co_await q.async_run(std::move(handler), std::move(o), nothrow);
  CHECK(ec == want);
}

thoonk::job_queue::settings quick_retries(std::int64_t max_retries) {
  return retries(max_retries, 1ms, 2ms);
}

}  // namespace

FIXTURE_TEST_CASE(
    "run", "run: every job finished once with its handler's result; the stop removes the worker",
    "[job][run][get_result][get_workers]") {
  auto q = co_await engine_queue(f);
  std::vector<std::string> items;
  for (int i = 0; i < 200; ++i) items.push_back("item" + std::to_string(i));
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  thoonk::run_options o;
  o.concurrency = 4;
  auto run = start_run(q, waiting_handler(0ms), o);
  auto all = co_await wait_finishes(q, 200);
  CHECK(all);
  co_await stop_run_cleanly(*run);
  CHECK(run->report.started == 200);
  CHECK(run->report.finished == 200);
  CHECK(run->report.lost == 0);
  CHECK(run->report.released == 0);
  CHECK(run->report.registrations == 1);
  CHECK(!run->report.worker_name.empty());
  for (int i : {0, 77, 199}) {
    auto r = co_await q.async_get_result(ids[static_cast<std::size_t>(i)], 1s, asio::use_awaitable);
    CHECK(r == "ok:item" + std::to_string(i));
  }
  auto c = co_await counts_of(q);
  CHECK(c.items == 0);
  CHECK(c.claimed == 0);
  auto ws = co_await q.async_get_workers(asio::use_awaitable);
  CHECK(ws.empty());
  co_await check_no_claim_records_left(f);
}

FIXTURE_TEST_CASE(
    "runfail",
    "run: an exception fails the job with its retry strategy; permanent_job_error makes a "
    "dead letter at once",
    "[job][run][fail][dead_letter]") {
  auto q = co_await engine_queue(f, quick_retries(3));
  auto flaky = co_await put_item(q, "flaky");
  auto fatal = co_await put_item(q, "fatal");
  thoonk::job_coroutine h =
      [](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    if (ctx.job().item == "fatal") throw thoonk::permanent_job_error("bad input: cannot parse");
    throw std::runtime_error("upstream unavailable");
    co_return std::nullopt;
  };
  auto run = start_run(q, h, thoonk::run_options{});
  thoonk::job_counts c;
  auto both = co_await wait_until([&]() -> asio::awaitable<bool> {
    c = co_await counts_of(q);
    co_return c.stalled == 2;
  });
  CHECK(both);
  CHECK(c.stalled == 2);
  co_await stop_run_cleanly(*run);
  CHECK(run->report.failed == 2);         // flaky's first two attempts
  CHECK(run->report.dead_lettered == 2);  // flaky's third, fatal's first
  CHECK(run->report.finished == 0);
  auto jf = co_await job_of(q, flaky);
  CHECK(jf.state == thoonk::job_state::stalled);
  CHECK(jf.retry_count == 3);
  CHECK(jf.last_error == "upstream unavailable");
  auto jp = co_await job_of(q, fatal);
  CHECK(jp.state == thoonk::job_state::stalled);
  CHECK(jp.retry_count == 1);
  CHECK(jp.last_error == "bad input: cannot parse");
  // The failed claims' records under the worker went with them.
  co_await check_no_claim_records_left(f);
}

TEST_CASE(
    "run: 10,000 jobs at concurrency 32 with 10% handler failures: each ends finished "
    "exactly once or dead-lettered, and the counts match",
    "[job][run][fail][dead_letter]") {
  fixture f("run10k");
  run_coro(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        constexpr int total = 10000;
        auto q = co_await engine_queue(f, quick_retries(2));
        auto ids = co_await put_copies(q, total, "payload");
        std::map<std::string, int> succeeded, attempts;
        std::mt19937 rng(12345);
        thoonk::job_coroutine h =
            [&](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
          ++attempts[ctx.job().id];
          if (std::uniform_int_distribution<int>(0, 9)(rng) == 0)
            throw std::runtime_error("unlucky");
          ++succeeded[ctx.job().id];
          co_return std::nullopt;
        };
        thoonk::run_options o;
        o.concurrency = 32;
        auto run = start_run(q, h, o);
        thoonk::job_counts c;
        auto ended = co_await wait_until(
            [&]() -> asio::awaitable<bool> {
              c = co_await counts_of(q);
              co_return c.finishes + c.stalled == total&& c.claimed == 0 && c.waiting == 0 &&
                  c.scheduled == 0;
            },
            100s);
        CHECK(ended);
        co_await stop_run_cleanly(*run);
        INFO("finishes " << c.finishes << ", dead letters " << c.stalled << ", report: finished "
                         << run->report.finished << ", failed " << run->report.failed << ", dead "
                         << run->report.dead_lettered);
        CHECK(c.finishes + c.stalled == total);
        CHECK(c.scheduled == 0);
        CHECK(c.claimed == 0);
        CHECK(static_cast<std::int64_t>(run->report.finished) == c.finishes);
        CHECK(static_cast<std::int64_t>(run->report.dead_lettered) == c.stalled);
        CHECK(run->report.lost == 0);
        // With 10% failures and two tries, about 1% end as dead letters.
        CHECK(c.stalled > 0);
        CHECK(c.stalled < 300);
        int twice = 0;
        for (auto& [id, n] : succeeded)
          if (n > 1) ++twice;
        CHECK(twice == 0);
        CHECK(static_cast<std::int64_t>(succeeded.size()) == c.finishes);
        // Every job is accounted for once: finished, or dead after 2 tries.
        std::int64_t dead = 0;
        for (const auto& id : ids) {
          if (succeeded.count(id)) continue;
          ++dead;
          CHECK(attempts[id] == 2);
        }
        CHECK(dead == c.stalled);
      },
      120s);
}

TWO_CLIENT_TEST_CASE(
    "runabort", "run: an abort from another client reaches the handler's cancellation slot at once",
    "[job][run][abort]") {
  auto q = co_await engine_queue(f);
  auto q2 = co_await open_on(other, f.name);
  constexpr int n = 5;
  auto ids = co_await put_copies(q, n, "long");
  std::map<std::string, std::chrono::steady_clock::time_point> cancelled_at;
  std::set<std::string> started;
  thoonk::job_coroutine h =
      [&](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    started.insert(ctx.job().id);
    asio::steady_timer t(co_await asio::this_coro::executor, 30s);
    auto [ec] = co_await t.async_wait(nothrow);
    if (ec) cancelled_at[ctx.job().id] = std::chrono::steady_clock::now();
    CHECK(ctx.cancelled());
    co_return std::nullopt;
  };
  thoonk::run_options o;
  o.concurrency = n;
  auto run = start_run(q, h, o);
  auto all = co_await wait_until([&] { return started.size() == n; });
  REQUIRE(all);
  std::vector<std::int64_t> delays;
  for (const auto& id : ids) {
    thoonk::abort_options ao;
    ao.outcome = thoonk::abort_options::failed;
    ao.error = "operator abort";
    ao.permanent = true;
    co_await q2.async_abort(id, ao, asio::use_awaitable);
    const auto t0 = std::chrono::steady_clock::now();
    auto seen = co_await wait_until([&] { return cancelled_at.count(id) > 0; }, 5s);
    CHECK(seen);
    if (seen) delays.push_back(ms_since(t0) - ms_since(cancelled_at[id]));
  }
  std::sort(delays.begin(), delays.end());
  std::ostringstream all_delays;
  for (auto d : delays) all_delays << d << " ";
  INFO("abort completion to handler cancellation (ms): " << all_delays.str());
  REQUIRE(delays.size() == n);
  CHECK(delays[n / 2] < 100);  // the median: one pub/sub hop
  co_await stop_run_cleanly(*run);
  CHECK(run->report.cancelled == n);
  CHECK(run->report.finished == 0);
  auto c = co_await counts_of(q);
  CHECK(c.stalled == n);  // each aborted as a permanent failure: dead letters
  CHECK(c.claimed == 0);
}

FIXTURE_TEST_CASE("runpause", "run: pause holds the runner's claims, resume wakes it at once",
                  "[job][run][pause][resume]") {
  thoonk::job_queue_options slow;
  slow.poll_interval = 60s;  // served sooner only by a wake-up
  const thoonk::job_queue::settings defaults;
  auto q = co_await engine_queue(f, defaults, slow);
  auto run = start_run(q, waiting_handler(0ms), thoonk::run_options{});
  co_await q.async_put("first", asio::use_awaitable);
  auto one = co_await wait_finishes(q, 1, 5s);
  CHECK(one);
  co_await q.async_pause(asio::use_awaitable);
  // The puts wake the runner (a message on the wake channel, feed.sleepers
  // gone); its claim, held by the pause, marks it asleep again.
  auto wake = co_await capture_patterns(f.raw, feed_channel("wake", f.name));
  co_await put_copies(q, 10, "held");
  auto woken = co_await wait_until([&] { return !wake->msgs.empty(); });
  REQUIRE(woken);
  // That nothing runs while paused is checked over a window in which the
  // woken runner claims (and is held) many times over.
  co_await sleep_for(300ms);
  auto paused = co_await counts_of(q);
  CHECK(paused.finishes == 1);
  CHECK(paused.waiting == 10);
  co_await q.async_resume(asio::use_awaitable);
  auto rest = co_await wait_finishes(q, 11, 5s);
  CHECK(rest);
  auto stopped = co_await stop_run(*run);
  REQUIRE(stopped);
  CHECK(run->report.finished == 11);
  f.raw.stop();
}

TWO_CLIENT_TEST_CASE(
    "runfailw",
    "run: a worker failed from another client loses its claims (handlers cancelled, jobs "
    "back with a stall counted) and registers again",
    "[job][run][fail_worker][get_workers]") {
  auto q = co_await engine_queue(f);
  auto q2 = co_await open_on(other, f.name);
  auto ids = co_await put_copies(q, 3, "slow");
  std::multiset<std::string> starts;
  int cancelled = 0;
  thoonk::job_coroutine h =
      [&](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    starts.insert(ctx.job().id);
    // The first attempt waits to be cancelled; the second is quick.
    const auto d = starts.count(ctx.job().id) == 1 ? 30s : 0ms;
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    auto [ec] = co_await t.async_wait(nothrow);
    if (ec) ++cancelled;
    co_return std::string("second");
  };
  thoonk::run_options o;
  o.concurrency = 3;
  o.worker_name = "fragile";
  o.heartbeat_interval = 100ms;
  auto run = start_run(q, h, o);
  auto all = co_await wait_until([&] { return starts.size() == 3; });
  REQUIRE(all);
  auto listed = co_await q2.async_get_workers(asio::use_awaitable);
  REQUIRE(listed.size() == 1);
  CHECK(listed[0].claims.size() == 3);
  auto returned = co_await q2.async_fail_worker("fragile", asio::use_awaitable);
  CHECK(returned == 3);
  // The next heartbeat tells the runner: its handlers stop, it registers
  // again and takes the jobs back.
  auto back = co_await wait_finishes(q, 3, 10s);
  CHECK(back);
  CHECK(cancelled == 3);
  co_await stop_run_cleanly(*run);
  CHECK(run->report.registrations == 2);
  CHECK(run->report.finished == 3);
  CHECK(run->report.cancelled == 3);
  auto r = co_await q.async_get_result(ids[0], 1s, asio::use_awaitable);
  CHECK(r == "second");
  // Failing an unknown (or already failed) worker changes nothing.
  auto [ec, n] = co_await q2.async_fail_worker("fragile", nothrow);
  CHECK(ec == E::worker_not_found);
  auto [ec2, n2] = co_await q2.async_fail_worker(std::string("bad\0name", 8), nothrow);
  CHECK(ec2 == E::invalid_name);
}

TWO_CLIENT_TEST_CASE(
    "runlost",
    "run: a claim that lapsed and went to another claimer is reported by the next heartbeat: "
    "its handler is cancelled and the new claim keeps its place",
    "[job][run][heartbeat][maintain]") {
  thoonk::job_queue::settings s;
  s.claim_timeout = 200ms;
  auto q = co_await engine_queue(f, s);
  auto q2 = co_await open_on(other, f.name);
  auto id = co_await put_item(q, "slow");
  bool started = false, cancelled = false;
  thoonk::job_coroutine h =
      [&](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
    started = true;
    asio::steady_timer t(co_await asio::this_coro::executor, 30s);
    auto [ec] = co_await t.async_wait(nothrow);
    cancelled = static_cast<bool>(ec);
    co_return std::nullopt;
  };
  thoonk::run_options o;
  o.worker_ttl = 20s;
  // Far longer than the lease (200 ms) and the 300 ms wait below, so the
  // claim has lapsed and been taken before the first heartbeat even on a
  // machine that stalls for seconds.
  o.heartbeat_interval = 5s;
  auto run = start_run(q, h, o);
  auto began = co_await wait_until([&] { return started; });
  REQUIRE(began);
  auto lapsed = co_await claim_lapsed(f.c.conn(), f.name, id, 200ms);
  REQUIRE(lapsed);
  auto rep = co_await q2.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.requeued == 1);
  // Another claimer takes the job (the runner's one slot is busy): the
  // runner's claim is gone for good, and only its heartbeat can say so.
  auto j = co_await q2.async_claim(1s, asio::use_awaitable);
  CHECK(j.id == id);
  auto told = co_await wait_until([&] { return cancelled; }, 20s);
  CHECK(told);
  // The new claim was not disturbed by the old one's report.
  auto [fec] = co_await q2.async_finish(j, nothrow);
  CHECK(!fec);
  co_await stop_run_cleanly(*run);
  CHECK(run->report.cancelled == 1);
  CHECK(run->report.finished == 0);
  co_await check_no_claim_records_left(f);
}

FIXTURE_TEST_CASE(
    "runstop",
    "run: graceful stop lets jobs in flight finish within the stop timeout, and gives the "
    "rest back with no failure counted",
    "[job][run][stop]") {
  auto q = co_await engine_queue(f);
  std::vector<std::string> items{"quick", "quick", "stuck", "stuck"};
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  int started = 0;
  thoonk::job_coroutine h =
      [&](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    ++started;
    const auto d = ctx.job().item == "quick" ? 200ms : 30s;
    asio::steady_timer t(co_await asio::this_coro::executor, d);
    co_await t.async_wait(asio::use_awaitable);
    co_return std::string("done");
  };
  thoonk::run_options o;
  o.concurrency = 4;
  o.stop_timeout = 1s;
  auto run = start_run(q, h, o);
  auto all = co_await wait_until([&] { return started == 4; });
  REQUIRE(all);
  const auto t0 = std::chrono::steady_clock::now();
  auto stopped = co_await stop_run(*run);
  REQUIRE(stopped);
  const auto took = ms_since(t0);
  INFO("the stop took " << took << " ms (stop timeout 1000 ms)");
  CHECK(took >= 900);
  CHECK(took < 5000);
  CHECK(!run->ec);
  CHECK(run->report.finished == 2);
  CHECK(run->report.released == 2);
  auto c = co_await counts_of(q);
  CHECK(c.finishes == 2);
  CHECK(c.waiting == 2);
  CHECK(c.claimed == 0);
  for (std::size_t i = 2; i < 4; ++i) {
    auto j = co_await job_of(q, ids[i]);
    CHECK(j.state == thoonk::job_state::waiting);
    CHECK(j.failures == 0);
  }
  auto ws = co_await q.async_get_workers(asio::use_awaitable);
  CHECK(ws.empty());
}

FIXTURE_TEST_CASE("runbad",
                  "run: bad options, a bad worker name and a live worker's name are refused",
                  "[job][run][errors]") {
  auto q = co_await engine_queue(f);
  auto h = waiting_handler(30s);
  auto expect = [&](thoonk::run_options o, thoonk::job_coroutine handler, E want) {
    return expect_refused(q, std::move(o), std::move(handler), want);
  };
  thoonk::run_options zero;
  zero.concurrency = 0;
  co_await expect(zero, h, E::invalid_argument);
  thoonk::run_options short_ttl;
  short_ttl.worker_ttl = 50ms;
  co_await expect(short_ttl, h, E::invalid_argument);
  // A worker's time to live beyond 2^53 - 1 ms (what a script's number
  // holds exactly; the registration adds it to the server's clock).
  thoonk::run_options endless_ttl;
  endless_ttl.worker_ttl = std::chrono::milliseconds::max();
  co_await expect(endless_ttl, h, E::invalid_argument);
  thoonk::run_options past_limit_ttl;
  past_limit_ttl.worker_ttl = std::chrono::milliseconds(9007199254740992);  // 2^53
  co_await expect(past_limit_ttl, h, E::invalid_argument);
  thoonk::run_options slow_beat;
  slow_beat.worker_ttl = 1s;
  slow_beat.heartbeat_interval = 1s;
  co_await expect(slow_beat, h, E::invalid_argument);
  thoonk::run_options big_batch;
  big_batch.max_claim_batch = 1001;
  co_await expect(big_batch, h, E::invalid_argument);
  thoonk::run_options big_prefetch;
  big_prefetch.prefetch = 10001;
  co_await expect(big_prefetch, h, E::invalid_argument);
  // (Named arguments: g++ 12 mishandles class temporaries in a co_await
  // expression.)
  const thoonk::run_options defaults;
  const thoonk::job_coroutine no_handler;
  co_await expect(defaults, no_handler, E::invalid_argument);
  thoonk::run_options nul;
  nul.worker_name = std::string("a\0b", 3);
  co_await expect(nul, h, E::invalid_name);
  thoonk::run_options longname;
  longname.worker_name = std::string(201, 'w');
  co_await expect(longname, h, E::invalid_name);
  // Nothing was registered by any of them.
  auto none = co_await q.async_get_workers(asio::use_awaitable);
  CHECK(none.empty());

  thoonk::run_options named;
  named.worker_name = "only-one";
  auto first = start_run(q, h, named);
  auto up = co_await wait_until([&]() -> bool { return false; }, 200ms);  // let it register
  CHECK(!up);
  co_await expect(named, h, E::worker_exists);
  auto ws = co_await q.async_get_workers(asio::use_awaitable);
  REQUIRE(ws.size() == 1);
  CHECK(ws[0].name == "only-one");
  CHECK(ws[0].description.find("\"queue\":\"" + f.name + "\"") != std::string::npos);
  CHECK(ws[0].last_heartbeat <= ws[0].server_now);
  CHECK(ws[0].server_now <= ws[0].lapses_at);
  CHECK(ws[0].lapses_at - ws[0].last_heartbeat == 10000);
  co_await stop_run_cleanly(*first);

  // A queue that does not exist.
  thoonk::job_queue missing(f.c, f.name + ".missing");
  auto [mec, mrep] = co_await missing.async_run(h, defaults, nothrow);
  CHECK(mec == E::feed_not_found);
}

FIXTURE_TEST_CASE("runprog",
                  "run: a handler's progress is kept on the job and refused once the claim is lost",
                  "[job][run][progress][get_job]") {
  auto q = co_await engine_queue(f);
  auto id = co_await put_item(q, "report");
  bool reported = false, release = false;
  std::optional<thoonk::job_context> held;
  thoonk::job_coroutine h =
      [&](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    ctx.progress("halfway");
    held = ctx;
    reported = true;
    co_await wait_until([&] { return release; }, 20s);
    co_return std::nullopt;
  };
  auto run = start_run(q, h, thoonk::run_options{});
  auto started = co_await wait_until([&] { return reported; });
  REQUIRE(started);
  std::string seen;
  auto kept = co_await wait_until([&]() -> asio::awaitable<bool> {
    auto j = co_await job_of(q, id);
    seen = j.progress;
    co_return seen == "halfway";
  });
  CHECK(kept);
  CHECK(seen == "halfway");
  release = true;
  auto done = co_await wait_finishes(q, 1);
  CHECK(done);
  // The job ended: a later report from its context is refused (and counted).
  const auto sent = requests_accepted(f.c);
  held->progress("too late");
  // The refusal is counted when its reply arrives. Requests on one
  // connection are answered in order: once the report's request is sent, the
  // reply to a read of the same job (on the same connection: the one serving
  // the queue's keys) comes after it.
  auto issued = co_await wait_until([&] { return requests_accepted(f.c) > sent; });
  REQUIRE(issued);
  co_await q.async_get_job(id, asio::use_awaitable);
  auto stopped = co_await stop_run(*run);
  REQUIRE(stopped);
  CHECK(run->report.progress_refused == 1);
  CHECK(run->report.finished == 1);
}
