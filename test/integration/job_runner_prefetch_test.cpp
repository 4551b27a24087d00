// job_queue::run claiming ahead (run_options::prefetch, docs/jobs.md "The
// runner"): short handlers get jobs claimed ahead of the idle slots, and
// prefetch 0 never does; a handler that turns out long sends the jobs
// waiting behind it back to the line; a stop gives them back at once, no
// failure counted, and so it does with the jobs of a round that lands
// during the stop; an abort from another client of a job claimed ahead
// keeps its handler from ever starting, and so does a claim ended without
// an abort message (the heartbeat names it lost). What the worker holds is
// read from the queue's registry (get_workers), as another client would
// see it.
// co_await stays out of CHECK and REQUIRE (g++ 12, see job_runner_test.cpp).
#include "support/job_engine.hpp"
#include "support/runner.hpp"

#include <set>

using namespace thoonk::test;

namespace {

/// The claims the queue's only worker holds now (0 when none is listed).
asio::awaitable<std::size_t> claims_held(thoonk::job_queue& q) {
  auto ws = co_await q.async_get_workers(asio::use_awaitable);
  co_return ws.empty() ? 0 : ws.front().claims.size();
}

/// Runs n no-op jobs through a runner at concurrency 1 with these options;
/// returns the most claims the worker was seen holding at once.
asio::awaitable<std::size_t> most_held_at_concurrency_1(thoonk::job_queue q,
                                                        std::optional<std::size_t> prefetch,
                                                        int n) {
  co_await put_copies(q, static_cast<std::size_t>(n), "x");
  const auto before = (co_await counts_of(q)).finishes;
  thoonk::run_options o;
  o.prefetch = prefetch;
  thoonk::job_coroutine h = [](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
    co_return std::nullopt;
  };
  auto run = start_run(q, h, o);
  std::size_t most = 0;
  for (;;) {
    const auto held = co_await claims_held(q);
    most = std::max(most, held);
    auto c = co_await counts_of(q);
    if (c.finishes >= before + n) break;
    if (run->done) break;
  }
  co_await stop_run_cleanly(*run);
  CHECK(run->report.finished == static_cast<std::uint64_t>(n));
  co_await check_drained(q);
  co_return most;
}

/// 300 short jobs, one named `slow`, then `after` more short ones: the
/// short ones turn the claiming ahead on before `slow` starts.
asio::awaitable<std::vector<std::string>> put_with_slow_job(thoonk::job_queue& q, int after) {
  std::vector<std::string> items(300, "short");
  items.push_back("slow");
  for (int i = 0; i < after; ++i) items.push_back("short");
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  co_return ids;
}

/// A handler that records each job it starts in `ran` and, for the job
/// named `slow`, sets `slow_started` and holds its slot until the test sets
/// `release` (at most 60 s); no time for the others.
thoonk::job_coroutine slow_job_handler(std::multiset<std::string>& ran, bool& slow_started,
                                       const bool& release) {
  return [&ran, &slow_started,
          &release](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    ran.insert(ctx.job().id);
    if (ctx.job().item == "slow") {
      slow_started = true;
      co_await wait_until([&] { return release; }, 60s);
    }
    co_return std::nullopt;
  };
}

/// A run whose handler blocks on the job named `slow` (see
/// put_with_slow_job) while jobs behind it are claimed ahead.
struct slow_run {
  std::multiset<std::string> started;
  bool slow_started = false;
  bool release = false;  // ends the slow job's handler
  std::string slow_id;
  std::shared_ptr<background_run> run;

  /// Waits until every job but `id` finished (350 of the 351 put), stops
  /// the run cleanly, and checks that `id`'s handler never started.
  asio::awaitable<void> finish_without(thoonk::job_queue& q, const std::string& id) {
    auto all = co_await wait_finishes(q, 350);
    CHECK(all);
    co_await stop_run_cleanly(*run);
    CHECK(started.count(id) == 0);
  }
};

/// Puts the jobs (50 after the slow one), starts `s.run` with `o` and a
/// handler that holds the slow job until `s.release`, and waits until the
/// slow job runs; returns a claim the worker holds for a job behind it,
/// claimed ahead (looked up in the registry for up to 10 s), if any.
asio::awaitable<std::optional<thoonk::claim_ref>> claim_behind_slow_job(thoonk::job_queue& q,
                                                                        slow_run& s,
                                                                        thoonk::run_options o) {
  auto ids = co_await put_with_slow_job(q, 50);
  s.slow_id = ids[300];
  s.run = start_run(q, slow_job_handler(s.started, s.slow_started, s.release), std::move(o));
  auto blocked = co_await wait_until([&] { return s.slow_started; }, 10s);
  REQUIRE(blocked);
  std::optional<thoonk::claim_ref> ahead;
  co_await wait_until([&]() -> asio::awaitable<bool> {
    auto ws = co_await q.async_get_workers(asio::use_awaitable);
    for (const auto& w : ws)
      for (const auto& c : w.claims)
        if (c.id != s.slow_id && !s.started.count(c.id)) ahead = c;
    co_return ahead.has_value();
  });
  co_return ahead;
}

/// What a handler does for one job, given its run.
using job_step = std::function<asio::awaitable<void>(background_run&)>;

/// A run that its handler stopped, and how many jobs the handler started.
struct stopped_run {
  std::shared_ptr<background_run> run;
  int handled = 0;
};

/// Runs q (options `o`) with a handler that does nothing but, for its
/// `n`th job, awaits `nth`, which stops the run (through its stop signal);
/// requires that the run ends within 15 s, with no error.
asio::awaitable<stopped_run> run_stopped_by_job(thoonk::job_queue& q, int n, job_step nth,
                                                thoonk::run_options o) {
  auto s = std::make_shared<stopped_run>();
  thoonk::job_coroutine h =
      [s, n, nth](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
    if (++s->handled == n) co_await nth(*s->run);
    co_return std::nullopt;
  };
  s->run = start_run(q, h, std::move(o));
  auto done = co_await wait_until([&] { return s->run->done; }, 15s);
  REQUIRE(done);
  CHECK(!s->run->ec);
  co_return *s;
}

// No default argument on the coroutine above: g++ 12 copies a coroutine's
// defaulted class-type argument bitwise, leaving its strings pointing into
// the caller's frame.
asio::awaitable<stopped_run> run_stopped_by_job(thoonk::job_queue& q, int n, job_step nth) {
  return run_stopped_by_job(q, n, std::move(nth), thoonk::run_options{});
}

}  // namespace

FIXTURE_TEST_CASE("runahead",
                  "run: short handlers at concurrency 1 get jobs claimed ahead; prefetch 0 and "
                  "prefetch 1 bound what the worker holds",
                  "[job][run][prefetch]") {
  auto q = co_await engine_queue(f);
  // The default: the slot's next jobs are claimed while its handler runs.
  const auto by_default = co_await most_held_at_concurrency_1(q, std::nullopt, 2000);
  CHECK(by_default > 1);
  // prefetch 0: a finish and the next claim go in one call, so the worker
  // never holds more than the job in its slot.
  const auto none = co_await most_held_at_concurrency_1(q, std::size_t{0}, 500);
  CHECK(none == 1);
  // prefetch 1: the slot's job, one ahead, and the finishes of two rounds
  // in flight at most.
  const auto one = co_await most_held_at_concurrency_1(q, std::size_t{1}, 500);
  CHECK(one >= 1);
  CHECK(one <= 4);
}

FIXTURE_TEST_CASE("runaheadlong",
                  "run: jobs claimed ahead behind a handler that turns out long go back to the "
                  "line within two heartbeat intervals, and each job still runs once",
                  "[job][run][prefetch][heartbeat]") {
  auto q = co_await engine_queue(f);
  co_await put_with_slow_job(q, 100);
  bool long_started = false, release = false;
  std::multiset<std::string> ran;
  auto h = slow_job_handler(ran, long_started, release);
  thoonk::run_options o;
  o.heartbeat_interval = 100ms;
  o.worker_ttl = 2s;
  auto run = start_run(q, h, o);
  auto started = co_await wait_until([&] { return long_started; }, 10s);
  REQUIRE(started);
  // While the long handler holds its slot (until `release`): only the long
  // job is held, the rest wait in the line for any worker.
  std::size_t held = 0;
  std::int64_t waiting = 0;
  auto given_back = co_await wait_until([&]() -> asio::awaitable<bool> {
    held = co_await claims_held(q);
    waiting = (co_await counts_of(q)).waiting;
    co_return held == 1 && waiting == 100;
  });
  CHECK(given_back);
  CHECK(held == 1);
  CHECK(waiting == 100);
  release = true;
  auto all = co_await wait_finishes(q, 401);
  CHECK(all);
  co_await stop_run_cleanly(*run);
  CHECK(run->report.finished == 401);
  CHECK(run->report.released >= 1);  // the jobs given back behind the long one
  CHECK(ran.size() == 401);
  std::set<std::string> distinct(ran.begin(), ran.end());
  CHECK(distinct.size() == 401);  // none ran twice
  auto c = co_await counts_of(q);
  CHECK(c.stalled == 0);
}

FIXTURE_TEST_CASE("runaheadstop",
                  "run: a stop gives the jobs claimed ahead back at once, to the front of the "
                  "line, with no failure counted",
                  "[job][run][prefetch][stop]") {
  auto q = co_await engine_queue(f);
  auto ids = co_await put_copies(q, 2000, "x");
  std::size_t held_before_stop = 0;
  std::size_t held_during_stop = 0;
  const job_step job_300 = [&](background_run& r) -> asio::awaitable<void> {
    // Rounds claim ahead while this handler holds the slot (it has not
    // ended, so the handlers still look short); then the stop: what was
    // claimed ahead cannot start any more.
    co_await wait_until([&]() -> asio::awaitable<bool> {
      held_before_stop = co_await claims_held(q);
      co_return held_before_stop > 1;
    });
    r.stop_signal.emit(asio::cancellation_type::terminal);
    // Given back at the stop, not at the leave (which waits for this
    // handler): meanwhile the worker holds only this job.
    co_await wait_until([&]() -> asio::awaitable<bool> {
      held_during_stop = co_await claims_held(q);
      co_return held_during_stop == 1;
    });
  };
  auto [run, handled] = co_await run_stopped_by_job(q, 300, job_300);
  CHECK(handled == 300);
  CHECK(held_before_stop > 1);
  CHECK(held_during_stop == 1);
  CHECK(run->report.finished == 300);
  CHECK(run->report.released >= 1);
  auto c = co_await counts_of(q);
  CHECK(c.claimed == 0);
  CHECK(c.waiting == 1700);
  CHECK(c.finishes == 300);
  // The next job in the line is the first one not handled, given back with
  // no failure counted.
  auto next = co_await job_of(q, ids[300]);
  CHECK(next.state == thoonk::job_state::waiting);
  CHECK(next.retry_count == 0);
  co_await check_no_claim_records_left(f);
}

// A round in flight when the stop comes. The queue runs dry while the
// last job's handler holds the only slot; then another client sends, in
// one write, a put of 50 jobs as a contract client makes it (plain
// commands), the wake-up a put publishes, and CLIENT PAUSE WRITE. The
// server runs the three before it reads the runner's next request, so the
// round the wake-up makes the runner send to claim ahead waits on the
// server until after the stop. One single server: a pause on a cluster
// node would hold only the rounds of that node's slots.
TWO_CLIENT_TEST_CASE("runaheadstopround",
                     "run: jobs a round claimed ahead, landing during a stop, go back at once, "
                     "with no failure counted",
                     "[job][run][prefetch][stop][single]") {
  auto q = co_await engine_queue(f);
  co_await put_copies(q, 300, "x");
  std::size_t held_during_stop = 0;
  std::size_t waiting_during_stop = 0;
  const job_step job_300 = [&](background_run& r) -> asio::awaitable<void> {
    asio::steady_timer t(co_await asio::this_coro::executor, 100ms);
    co_await t.async_wait(asio::use_awaitable);  // the runner finds the queue dry
    thoonk::request req;
    req.push("MULTI");
    for (int i = 0; i < 50; ++i) {
      const auto id = "late-" + std::to_string(i);
      req.push("LPUSH", key("ids", f.name), id);
      req.push("HSET", key("items", f.name), id, "y");
    }
    req.push("INCRBY", key("publishes", f.name), 50);
    req.push("EXEC");
    req.push("PUBLISH", feed_channel("wake", f.name), 50);
    // The pause outlasts the runner's answer to the wake-up on a loaded
    // machine: its round is held on the server when the stop comes.
    req.push("CLIENT", "PAUSE", 3000, "WRITE");
    co_await raw_exec(other.conn(), req);
    t.expires_after(1500ms);
    co_await t.async_wait(asio::use_awaitable);
    r.stop_signal.emit(asio::cancellation_type::terminal);
    // Long after the pause: the held round landed during the stop and
    // its jobs went back at once, not at the leave: the worker holds
    // only this job, and all 50 wait.
    t.expires_after(3300ms);
    co_await t.async_wait(asio::use_awaitable);
    held_during_stop = co_await claims_held(q);
    waiting_during_stop = static_cast<std::size_t>((co_await counts_of(q)).waiting);
  };
  auto [run, handled] = co_await run_stopped_by_job(q, 300, job_300);
  CHECK(handled == 300);  // none of the 50 started
  CHECK(held_during_stop == 1);
  CHECK(waiting_during_stop == 50);
  CHECK(run->report.released >= 1);  // the round claimed some of them ahead
  CHECK(run->report.finished == 300);
  auto c = co_await counts_of(q);
  CHECK(c.claimed == 0);
  CHECK(c.stalled == 0);
  CHECK(c.waiting == 50);
  co_await check_no_claim_records_left(f);
}

TWO_CLIENT_TEST_CASE("runaheadabort",
                     "run: an abort from another client of a job claimed ahead: its handler "
                     "never starts, and the job ends as the abort asked",
                     "[job][run][prefetch][abort]") {
  auto q = co_await engine_queue(f);
  auto q2 = co_await open_on(other, f.name);
  thoonk::run_options o;
  o.heartbeat_interval = 5s;  // no give-back of waiting jobs meanwhile
  o.worker_ttl = 15s;
  slow_run s;
  auto claim = co_await claim_behind_slow_job(q, s, o);
  REQUIRE(claim);  // some job waits, claimed ahead, behind the slow one
  const std::string ahead = claim->id;
  thoonk::abort_options ao;
  ao.outcome = thoonk::abort_options::failed;
  ao.error = "operator abort";
  ao.permanent = true;
  co_await q2.async_abort(ahead, ao, asio::use_awaitable);
  // The slow job's slot frees once the runner has the abort message.
  co_await fence(f.c.sub(), f.c.conn(), f.name);
  s.release = true;
  co_await s.finish_without(q, ahead);
  CHECK(s.started.size() == 350);
  CHECK(s.run->report.finished == 350);
  CHECK(s.run->report.cancelled == 0);  // no handler ran for it
  auto j = co_await job_of(q, ahead);
  CHECK(j.state == thoonk::job_state::stalled);  // a permanent failure: a dead letter
  CHECK(j.last_error == "operator abort");
  co_await check_drained(q);
}

TWO_CLIENT_TEST_CASE("runaheadlost",
                     "run: a job claimed ahead whose claim ends without an abort message (a "
                     "stall from another client) is dropped when the heartbeat names it lost",
                     "[job][run][prefetch][heartbeat][stall]") {
  auto q = co_await engine_queue(f);
  auto q2 = co_await open_on(other, f.name);
  thoonk::run_options o;
  // The claimed-ahead jobs wait a whole interval before the heartbeat gives
  // them back, so the heartbeat that follows the stall names the stalled
  // claim (unless it comes a whole interval after the claim: then the job
  // is given back instead, which the server refuses, with the same outcome).
  o.heartbeat_interval = 1s;
  o.worker_ttl = 3s;
  slow_run s;
  auto ahead = co_await claim_behind_slow_job(q, s, o);
  REQUIRE(ahead);
  co_await q2.async_stall(*ahead, asio::use_awaitable);
  // The slow job's slot frees once a heartbeat after the stall has been
  // answered: the worker's registration shows one later than the stall,
  // read over the runner's connection, behind that heartbeat's reply.
  const auto stalled_at = ms_now();
  auto beat = co_await wait_until([&]() -> asio::awaitable<bool> {
    auto ws = co_await q.async_get_workers(asio::use_awaitable);
    co_return !ws.empty() && ws.front().last_heartbeat > stalled_at;
  });
  CHECK(beat);
  s.release = true;
  co_await s.finish_without(q, ahead->id);
  CHECK(s.run->report.lost == 0);  // no handler ran for it, no finish refused
  CHECK(s.run->report.finished == 350);
  auto j = co_await job_of(q, ahead->id);
  CHECK(j.state == thoonk::job_state::stalled);
  auto c = co_await counts_of(q);
  CHECK(c.claimed == 0);
  CHECK(c.stalled == 1);
}
