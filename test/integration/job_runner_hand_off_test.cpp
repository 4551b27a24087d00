// job_queue::run's hand-off (run_options::hand_off, docs/jobs.md
// "Hand-off"): a runner that finds the queue dry offers its idle slots,
// and a put claims its jobs for the runner and sends them on the runner's
// channel. Checked here: the job, its item and failure count arrive whole
// and run once; a put of more jobs than slots hands off what fits and
// wakes for the rest; offers that lapsed, of workers that are gone, or on
// a channel the producer may not publish on get nothing; a runner without
// hand-off (the option off, or SUBSCRIBE refused on its channel) works by
// wake-ups; a hand-off lost while the runner's subscriber was down is
// given back after it reconnects, or at the stop.
// co_await stays out of CHECK and REQUIRE (g++ 12, see job_runner_test.cpp).
#include "support/hand_off.hpp"
#include "support/job_engine.hpp"
#include "support/runner.hpp"

#include "detail/keys.hpp"
#include "jobs/hand_off.hpp"
#include "jobs/job_keys.hpp"
#include "thoonk_lua_scripts.hpp"

#include <map>
#include <random>
#include <set>

using namespace thoonk::test;

namespace {

/// A job as its handler saw it.
struct seen_job {
  std::string id, item;
  std::int64_t failures = 0;
};

/// A handler that records each job it starts.
thoonk::job_coroutine recording(std::vector<seen_job>& seen) {
  return [&seen](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    seen.push_back({ctx.job().id, ctx.job().item, ctx.job().failures});
    co_return std::nullopt;
  };
}

/// The server's clock in ms.
asio::awaitable<std::int64_t> server_ms(thoonk::connection& c) {
  auto t = co_await cmd(c, "TIME");
  co_return std::stoll(t.elements.at(0).str) * 1000 + std::stoll(t.elements.at(1).str) / 1000;
}

thoonk::run_options named(std::string worker, std::size_t concurrency) {
  thoonk::run_options o;
  o.worker_name = std::move(worker);
  o.concurrency = concurrency;
  return o;
}

/// A runner in the background whose handler records each job it starts
/// (recording()). Not movable once started: the handler refers to `seen`.
struct recorded_run {
  std::string worker = unique_name("taker");
  std::vector<seen_job> seen;
  std::shared_ptr<background_run> run;

  void start(thoonk::job_queue q, std::size_t concurrency, bool hand_off = true) {
    auto o = named(worker, concurrency);
    o.hand_off = hand_off;
    run = start_run(std::move(q), recording(seen), std::move(o));
  }
  /// Requires that the runner offers `slots` idle slots on `queue` within 5 s.
  asio::awaitable<void> offers(thoonk::connection& c, const std::string& queue, int slots) {
    auto ready = co_await offered(c, queue, worker, slots);
    REQUIRE(ready);
  }
  /// Requires that the handler started `n` jobs within 5 s.
  asio::awaitable<void> started(std::size_t n) {
    auto ran = co_await wait_until([&] { return seen.size() == n; }, 5s);
    REQUIRE(ran);
  }
  /// Puts `n` jobs on `q` one at a time, each after the runner found the
  /// queue dry, and requires that each runs while the runner offers
  /// nothing on `queue` (read on `c`): it works by wake-ups.
  asio::awaitable<void> runs_without_offers(thoonk::job_queue& q, thoonk::connection& c,
                                            const std::string& queue, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) {
      co_await sleep_for(30ms);
      const auto before = seen.size();
      co_await q.async_put("x", asio::use_awaitable);
      co_await started(before + 1);
      auto offer = co_await offer_of(c, queue, worker);
      CHECK(offer.empty());
    }
  }
};

}  // namespace

FIXTURE_TEST_CASE("handoff",
                  "run: a put reaches an idle runner by hand-off: the job, its item and failure "
                  "count arrive whole, and each runs once",
                  "[job][run][hand_off][put]") {
  auto q = co_await engine_queue(f);
  recorded_run r;
  r.start(q, 2);
  // Items with a NUL, an empty one, a long one: the message carries bytes.
  std::vector<std::string> items{std::string("a\0b", 3), "", std::string(5000, 'x')};
  for (int i = 0; i < 17; ++i) items.push_back("job-" + std::to_string(i));
  std::vector<std::string> ids;
  for (std::size_t i = 0; i < items.size(); ++i) {
    // Both slots idle, offered by the round that found the queue dry.
    co_await r.offers(f.c.conn(), f.name, 2);
    auto id = co_await put_item(q, items[i]);
    ids.push_back(id);
    co_await r.started(i + 1);
  }
  auto all = co_await wait_finishes(q, static_cast<std::int64_t>(items.size()));
  CHECK(all);
  co_await stop_run_cleanly(*r.run);
  CHECK(r.run->report.handed_off == items.size());
  CHECK(r.run->report.started == items.size());
  CHECK(r.run->report.finished == items.size());
  REQUIRE(r.seen.size() == items.size());
  for (std::size_t i = 0; i < items.size(); ++i) {
    CHECK(r.seen[i].id == ids[i]);
    CHECK(r.seen[i].item == items[i]);
    CHECK(r.seen[i].failures == 0);
  }
  co_await check_drained(q);
  co_await check_no_claim_records_left(f);
  // The stop withdrew the offer.
  const auto offer = co_await offer_of(f.c.conn(), f.name, r.worker);
  CHECK(offer.empty());
}

FIXTURE_TEST_CASE("handoffsplit",
                  "run: a put of more jobs than idle slots hands off what fits and wakes the "
                  "runner for the rest; a failure count travels with a job handed off",
                  "[job][run][hand_off][put_many]") {
  auto q = co_await engine_queue(f);
  recorded_run r;
  r.start(q, 3);
  co_await r.offers(f.c.conn(), f.name, 3);
  std::vector<std::string> items;
  for (int i = 0; i < 10; ++i) items.push_back("j" + std::to_string(i));
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto all = co_await wait_finishes(q, 10);
  CHECK(all);
  // A job with a failure behind it, handed off.
  co_await r.offers(f.c.conn(), f.name, 3);
  co_await cmd(f.c.conn(), "HSET", key("cancelled", f.name), "failed-once", "1");
  thoonk::put_options po;
  po.id = "failed-once";
  co_await q.async_put("again", po, asio::use_awaitable);
  all = co_await wait_finishes(q, 11);
  CHECK(all);
  co_await stop_run_cleanly(*r.run);
  // The first three went to the idle slots in the put itself.
  CHECK(r.run->report.handed_off == 4);
  CHECK(r.run->report.finished == 11);
  const auto& seen = r.seen;
  std::set<std::string> distinct;
  for (const auto& s : seen) distinct.insert(s.id);
  CHECK(distinct.size() == 11);
  CHECK(seen.size() == 11);
  REQUIRE(!seen.empty());
  CHECK(seen.back().id == "failed-once");
  CHECK(seen.back().failures == 1);
  // The first three started are the oldest three, handed off in order.
  REQUIRE(seen.size() >= 3);
  std::set<std::string> first3{seen[0].id, seen[1].id, seen[2].id};
  CHECK(first3 == std::set<std::string>{ids[0], ids[1], ids[2]});
}

FIXTURE_TEST_CASE("handoffbad",
                  "run: a message on the runner's channel that is no hand-off starts nothing; "
                  "the runner checks its claims and goes on taking hand-offs",
                  "[job][run][hand_off][malformed]") {
  auto q = co_await engine_queue(f);
  recorded_run r;
  r.start(q, 1);
  co_await r.offers(f.c.conn(), f.name, 1);
  const auto channel = "job.take:" + channel_name(f.name) + ":" + r.worker;
  // A job's fields cut short, then a fence nobody asked for.
  co_await raw_notify(f.c.conn(), channel,
                      std::string("x\0"
                                  "1\0"
                                  "0",
                                  5));
  co_await raw_notify(f.c.conn(), channel, std::string("\0fence:99", 9));
  // The runner's check withdraws its offer (jobs/take_fence.lua); its next
  // dry round offers again.
  auto withdrawn = co_await offered(f.c.conn(), f.name, r.worker, 0);
  CHECK(withdrawn);
  co_await r.offers(f.c.conn(), f.name, 1);
  co_await q.async_put("after", asio::use_awaitable);
  co_await r.started(1);
  CHECK(r.seen[0].item == "after");
  co_await stop_run_cleanly(*r.run);
  CHECK(r.run->report.started == 1);
  CHECK(r.run->report.finished == 1);
  CHECK(r.run->report.handed_off == 1);
}

FIXTURE_TEST_CASE("handoffoff",
                  "run: with hand_off false a runner never offers, and puts wake it as before",
                  "[job][run][hand_off]") {
  auto q = co_await engine_queue(f);
  recorded_run r;
  r.start(q, 2, false);
  co_await r.runs_without_offers(q, f.c.conn(), f.name, 5);
  co_await stop_run_cleanly(*r.run);
  CHECK(r.run->report.handed_off == 0);
  CHECK(r.run->report.finished == 5);
}

FIXTURE_TEST_CASE("handoffdead",
                  "put: no hand-off to an offer that lapsed or whose worker is not registered; "
                  "a live offer gets the oldest jobs, claimed under its worker, in one message",
                  "[job][hand_off][put][put_many]") {
  auto q = co_await engine_queue(f);
  auto& c = f.c.conn();
  const auto takers = key("takers", f.name);
  const auto now = co_await server_ms(c);
  const auto later = std::to_string(now + 60000);
  // A registered worker whose offer lapsed, and an offer whose worker is
  // not registered: neither gets a job, and both offers go.
  co_await cmd(c, "ZADD", key("workers", f.name), later, "lapsed-offer");
  co_await cmd(c, "HSET", takers, "lapsed-offer", std::to_string(now - 1) + ":4");
  co_await cmd(c, "HSET", takers, "unregistered", later + ":4");
  co_await cmd(c, "SET", key("sleepers", f.name), "1");
  auto first = co_await put_item(q, "one");
  auto counts = co_await counts_of(q);
  CHECK(counts.waiting == 1);
  CHECK(counts.claimed == 0);
  auto left = co_await cmd(c, "HLEN", takers);
  CHECK(left.integer == 0);
  // The put woke the sleepers instead: the flag is gone.
  auto sleeping = co_await cmd(c, "EXISTS", key("sleepers", f.name));
  CHECK(sleeping.integer == 0);

  // A live offer of one slot: of two jobs put, the oldest waiting one
  // (`first`) is claimed under the worker and sent on its channel; the
  // offer is used up; the other job wakes the sleepers.
  std::vector<std::string> got;
  auto sub = co_await subscribe_notifications(
      f.raw, "job.take:" + channel_name(f.name) + ":live",
      [&](const thoonk::message& m) { got.emplace_back(m.payload); });
  co_await cmd(c, "ZADD", key("workers", f.name), later, "live");
  co_await cmd(c, "HSET", takers, "live", later + ":1");
  co_await cmd(c, "SET", key("sleepers", f.name), "1");
  std::vector<std::string> two{"two", "three"};
  co_await q.async_put_many(two, thoonk::priority::normal, asio::use_awaitable);
  auto heard = co_await wait_until([&] { return got.size() == 1; }, 2s);
  REQUIRE(heard);
  auto jobs = thoonk::detail::jobs::parse_hand_off(got[0]);
  REQUIRE(jobs);
  REQUIRE(jobs->size() == 1);
  CHECK((*jobs)[0].id == first);
  CHECK((*jobs)[0].item == "one");
  CHECK((*jobs)[0].token == 1);
  CHECK((*jobs)[0].failures == 0);
  counts = co_await counts_of(q);
  CHECK(counts.waiting == 2);
  CHECK(counts.claimed == 1);
  auto record = co_await cmd(c, "HGET", key("worker_jobs", f.name), first);
  CHECK(record.str == std::string("live\0"
                                  "1",
                                  6));
  left = co_await cmd(c, "HLEN", takers);
  CHECK(left.integer == 0);
  sleeping = co_await cmd(c, "EXISTS", key("sleepers", f.name));
  CHECK(sleeping.integer == 0);

  // An offer whose slots take every job put: the sleepers stay marked
  // (other claimers still sleep), the rest of the offer stays.
  co_await cmd(c, "HSET", takers, "live", later + ":5");
  co_await cmd(c, "SET", key("sleepers", f.name), "1");
  got.clear();
  co_await q.async_put("four", asio::use_awaitable);
  heard = co_await wait_until([&] { return got.size() == 1; }, 2s);
  REQUIRE(heard);
  jobs = thoonk::detail::jobs::parse_hand_off(got[0]);
  REQUIRE(jobs);
  CHECK(jobs->size() == 1);  // the oldest waiting job, one only
  const auto rest = co_await offer_of(c, f.name, "live");
  CHECK(rest == later + ":4");
  sleeping = co_await cmd(c, "EXISTS", key("sleepers", f.name));
  CHECK(sleeping.integer == 1);

  // Two live offers of one slot each and one job: one runner gets it,
  // the other's offer is left as it was.
  std::vector<std::string> other;
  auto sub2 = co_await subscribe_notifications(
      f.raw, "job.take:" + channel_name(f.name) + ":live2",
      [&](const thoonk::message& m) { other.emplace_back(m.payload); });
  co_await cmd(c, "ZADD", key("workers", f.name), later, "live2");
  co_await cmd(c, "HSET", takers, "live", later + ":1");
  co_await cmd(c, "HSET", takers, "live2", later + ":1");
  co_await cmd(c, "DEL", key("ids", f.name));  // the waiting jobs go
  got.clear();
  co_await q.async_put("five", asio::use_awaitable);
  heard = co_await wait_until([&] { return got.size() + other.size() == 1; }, 2s);
  REQUIRE(heard);
  co_await settle();
  CHECK(got.size() + other.size() == 1);
  left = co_await cmd(c, "HLEN", takers);
  CHECK(left.integer == 1);
  const auto still = co_await offer_of(c, f.name, got.empty() ? "live" : "live2");
  CHECK(still == later + ":1");
}

TEST_CASE("hand-off: a producer that may not publish on the runner's channel wakes it instead",
          "[job][run][hand_off][acl]") {
  gap_parties p;
  run_coro(p.ioc, [&]() -> asio::awaitable<void> {
    const auto name = unique_name("handoffacl");
    // The gap user is the producer here, allowed every channel but the
    // runners' ones.
    auto [q, producer] = co_await restricted_pair(p, name, "~*", "+@all", "&feed.*");
    recorded_run r;
    r.start(q, 1);
    for (std::size_t i = 0; i < 3; ++i) {
      co_await r.offers(p.admin, name, 1);
      auto [ec, id] = co_await producer.async_put("y", asio::as_tuple(asio::use_awaitable));
      CHECK(!ec);
      co_await r.started(i + 1);
    }
    co_await stop_run_cleanly(*r.run);
    CHECK(r.run->report.handed_off == 0);
    CHECK(r.run->report.finished == 3);
    co_await p.finish();
  });
}

TEST_CASE("hand-off: a runner that may not subscribe to its channel works by wake-ups",
          "[job][run][hand_off][acl]") {
  gap_parties p;
  run_coro(p.ioc, [&]() -> asio::awaitable<void> {
    const auto name = unique_name("handoffacl");
    // The gap user is the runner here: no job.take channel.
    auto [q, mine] = co_await restricted_pair(p, name, "~*", "+@all", "&feed.*", "&job.finish:*",
                                              "&job.event:*", "&job.abort:*");
    recorded_run r;
    r.start(mine, 1);
    co_await r.runs_without_offers(q, p.admin, name, 3);
    co_await stop_run_cleanly(*r.run);
    CHECK(r.run->report.handed_off == 0);
    CHECK(r.run->report.finished == 3);
    co_await p.finish();
  });
}

TEST_CASE(
    "hand-off: a runner that may subscribe to its channel but not publish there stops "
    "offering when its check after a reconnect cannot send the fence",
    "[job][run][hand_off][acl]") {
  gap_parties p;
  run_coro(p.ioc, [&]() -> asio::awaitable<void> {
    const auto name = unique_name("handoffnofence");
    // The gap user is the runner: a selector lets it SUBSCRIBE to job.take
    // channels, nothing lets it PUBLISH there (jobs/take_fence.lua's fence).
    auto [q, mine] =
        co_await restricted_pair(p, name, "~*", "+@all", "&feed.*", "&job.finish:*", "&job.event:*",
                                 "&job.abort:*", "(&job.take:* +subscribe +ssubscribe)");
    recorded_run r;
    r.start(mine, 1);
    co_await r.offers(p.admin, name, 1);
    co_await q.async_put("handed", asio::use_awaitable);
    co_await r.started(1);
    // The runner's subscriber is cut and comes back: the check that
    // follows fails on the fence, and the runner offers nothing from then on.
    int reconnects = 0;
    auto events = p.c->sub().on_event([&](const thoonk::subscriber_event& e) {
      if (e.kind == thoonk::subscriber_event::connected) ++reconnects;
    });
    co_await p.user.open_gap(p.admin);
    co_await p.user.close_gap(p.admin);
    auto back = co_await wait_until([&] { return reconnects > 0; }, 5s);
    REQUIRE(back);
    // The offer goes with the runner's next round (within a poll interval).
    auto withdrawn = co_await offered(p.admin, name, r.worker, 0);
    CHECK(withdrawn);
    co_await r.runs_without_offers(q, p.admin, name, 3);
    co_await stop_run_cleanly(*r.run);
    CHECK(r.run->report.handed_off == 1);
    CHECK(r.run->report.finished == 4);
    co_await p.finish();
  });
}

namespace {

/// A runner on the gap user's client whose one hand-off was lost: the
/// queue (on `pub`), the runner at concurrency 1, what its handler saw, and
/// the id of the job handed off while its subscriber was locked out
/// (claimed under the runner, which never heard of it).
struct lost_hand_off {
  std::string name = unique_name("handofflost");
  std::optional<thoonk::job_queue> q;
  recorded_run r;
  std::string id;

  asio::awaitable<void> start(gap_parties& p, std::string item) {
    co_await p.start();
    q = co_await create_job_queue(p.pub, name);
    auto mine = co_await thoonk::job_queue::async_open(*p.c, name, asio::use_awaitable);
    r.start(mine, 1);
    co_await r.offers(p.admin, name, 1);
    id = co_await put_while_unsubscribed(p, name, std::move(item));
    auto record = co_await cmd(p.admin, "HGET", key("worker_jobs", name), id);
    CHECK(record.str == r.worker + std::string("\0"
                                               "1",
                                               2));
  }
};

}  // namespace

TEST_CASE(
    "hand-off: a job handed off while the runner's subscriber was down is given back "
    "after it reconnects, with no failure counted, and runs once",
    "[job][run][hand_off][subscriber][single]") {
  gap_parties p;
  lost_hand_off t;
  run_coro(p.ioc, [&]() -> asio::awaitable<void> {
    co_await t.start(p, "lost");
    co_await sleep_for(300ms);
    CHECK(t.r.seen.empty());
    co_await p.user.close_gap(p.admin);
    // Back within a few seconds (the lease is a minute).
    auto ran = co_await wait_until([&] { return t.r.seen.size() == 1; }, 8s);
    REQUIRE(ran);
    CHECK(t.r.seen[0].id == t.id);
    CHECK(t.r.seen[0].item == "lost");
    CHECK(t.r.seen[0].failures == 0);
    auto all = co_await wait_finishes(*t.q, 1);
    CHECK(all);
    co_await stop_run_cleanly(*t.r.run);
    CHECK(t.r.run->report.handed_off == 0);
    CHECK(t.r.run->report.released == 1);
    CHECK(t.r.run->report.finished == 1);
    CHECK(t.r.seen.size() == 1);
    auto counts = co_await counts_of(*t.q);
    CHECK(counts.claimed == 0);
    CHECK(counts.stalled == 0);
    co_await p.finish();
  });
}

TEST_CASE("hand-off: a job handed off that the runner never received goes back at its stop",
          "[job][run][hand_off][stop][single]") {
  gap_parties p;
  lost_hand_off t;
  run_coro(p.ioc, [&]() -> asio::awaitable<void> {
    co_await t.start(p, "never");
    co_await sleep_for(100ms);
    // Stopped while its subscriber is still locked out.
    co_await stop_run_cleanly(*t.r.run);
    CHECK(t.r.seen.empty());
    CHECK(t.r.run->report.released == 1);
    auto j = co_await job_of(*t.q, t.id);
    CHECK(j.state == thoonk::job_state::waiting);
    CHECK(j.retry_count == 0);
    CHECK(j.stall_count == 0);
    auto offers = co_await cmd(p.admin, "HLEN", key("takers", t.name));
    CHECK(offers.integer == 0);
    auto records = co_await cmd(p.admin, "HLEN", key("worker_jobs", t.name));
    CHECK(records.integer <= 1);  // the encoding keeper at most
    co_await p.user.close_gap(p.admin);
    co_await p.finish();
  });
}

namespace {

/// What the runners of the churn below saw.
struct churn_state {
  bool stop = false;
  int running = 0;
  std::map<std::string, int> starts;  // id -> handler starts
  thoonk::run_report total;           // summed over every run
  std::size_t runs = 0;
  std::vector<std::string> unexpected;
};

/// Runs `q`'s runner again and again until told to stop: each run with a
/// fresh worker, 1 – 4 slots and handlers of 0 – 4 ms, stopped gracefully
/// 5 – 60 ms after its start, so stops often meet hand-offs on the way.
asio::awaitable<void> churning_runner(thoonk::job_queue q, std::shared_ptr<churn_state> st,
                                      unsigned seed) {
  std::minstd_rand rng(seed);
  ++st->running;
  while (!st->stop) {
    auto handler = [st, pause = std::chrono::milliseconds(rng() % 5)](
                       thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
      ++st->starts[ctx.job().id];
      co_await sleep_for(pause);
      co_return std::nullopt;
    };
    auto run =
        start_run(q, thoonk::job_coroutine(handler), named(unique_name("churn"), 1 + rng() % 4));
    co_await sleep_for(std::chrono::milliseconds(5 + rng() % 56));
    const bool stopped = co_await stop_run(*run);
    if (!stopped) st->unexpected.push_back("a run did not stop within 15 s");
    else if (run->ec) st->unexpected.push_back("run: " + run->ec.message());
    const auto& r = run->report;
    st->total.started += r.started;
    st->total.finished += r.finished;
    st->total.lost += r.lost;
    st->total.cancelled += r.cancelled;
    st->total.released += r.released;
    st->total.handed_off += r.handed_off;
    ++st->runs;
  }
  --st->running;
}

}  // namespace

TWO_CLIENT_TEST_CASE("handoffchurn",
                     "hand-off: runners on two clients started and stopped again and again "
                     "while puts hand jobs off to them: each job's handler starts once, every "
                     "job is finished, none waits for its lease",
                     "[job][run][hand_off][stop]") {
  auto q = co_await engine_queue(f);
  auto q2 = co_await open_on(other, f.name);
  auto st = std::make_shared<churn_state>();
  const unsigned seed = std::random_device{}();
  INFO("seed " << seed);
  std::minstd_rand rng(seed);
  auto ex = co_await asio::this_coro::executor;
  for (unsigned i = 0; i < 4; ++i)
    asio::co_spawn(ex, churning_runner(i % 2 ? q2 : q, st, seed + i), asio::detached);

  auto ids = co_await trickle_put(q, 600, rng, "churn");
  // Far below the lease (60 s): a job lost on the way would wait for it.
  const bool all = co_await wait_finishes(q, static_cast<std::int64_t>(ids.size()), 15s);
  st->stop = true;
  const bool ended = co_await wait_until([&] { return st->running == 0; }, 20s);
  CHECK(all);
  CHECK(ended);
  check_none_unexpected(st->unexpected);
  check_each_once(ids, st->starts);
  // The churn ran: many runs, jobs handed off, and stops that gave jobs
  // back; no claim was lost and no handler cut short.
  CHECK(st->runs > 10);
  CHECK(st->total.handed_off > 0);
  CHECK(st->total.finished == ids.size());
  CHECK(st->total.lost == 0);
  CHECK(st->total.cancelled == 0);
  CHECK(st->total.released > 0);
  auto c = co_await counts_of(q);
  CHECK(c.finishes == static_cast<std::int64_t>(ids.size()));
  CHECK(c.waiting == 0);
  CHECK(c.claimed == 0);
  co_await check_no_claim_records_left(f);
}
