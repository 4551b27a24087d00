// Scheduled jobs (docs/jobs.md §9): not claimable before run_at, then in
// run_at order with ties in put order, promoted by claims and by
// maintenance in bounded batches, claimers woken at the due time.
#include "support/job_engine.hpp"

#include <limits>

using namespace thoonk::test;

FIXTURE_TEST_CASE("sched",
                  "schedule: run_at in the past, now and later; claimable in order and not before",
                  "[job][schedule][put][claim][get_job]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  const auto later_at = now + 200;
  auto later = co_await put_at(q, "later", later_at);
  auto at_now = co_await put_at(q, "now", now);
  auto past = co_await put_at(q, "past", now - 5000);

  auto js = co_await job_of(q, later);
  CHECK(js.state == thoonk::job_state::scheduled);
  CHECK(js.run_at == later_at);
  CHECK(js.item == "later");
  auto at_now_job = co_await job_of(q, at_now);
  CHECK(at_now_job.state == thoonk::job_state::waiting);
  // A scheduled job is not in the contract's keys: a contract client's
  // Get (BRPOP feed.ids) or HKEYS feed.items cannot see it early.
  auto stored = co_await cmd(f.c.conn(), "HEXISTS", key("items", f.name), later);
  CHECK(stored.integer == 0);
  auto pos = co_await cmd(f.c.conn(), "LPOS", key("ids", f.name), later);
  CHECK(pos.is_null());

  auto a = co_await try_claim(q);
  auto b = co_await try_claim(q);
  REQUIRE(a);
  REQUIRE(b);
  CHECK(a->id == at_now);  // put first
  CHECK(b->id == past);
  auto claimed = co_await try_claim(q);
  CHECK(!claimed);  // "later" is not due
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.scheduled == 1);

  auto c = co_await q.async_claim(5s, asio::use_awaitable);
  CHECK(c.id == later);
  CHECK(c.item == "later");
  CHECK(thoonk::now_epoch_ms() >= later_at);  // never before its time
  counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.scheduled == 0);
}

FIXTURE_TEST_CASE("sched",
                  "schedule: equal run_at times are claimed in put order, whatever the ids",
                  "[job][schedule][put][claim]") {
  auto q = co_await engine_queue(f);
  const auto at = thoonk::now_epoch_ms() + 150;
  // Ids in reverse order of their names, and generated ones between.
  std::vector<std::string> put_order;
  for (char c = 'z'; c >= 'q'; --c) {
    const std::string id(1, c);
    co_await put_id(q, id, "job " + id, at);
    put_order.push_back(id);
    put_order.push_back(co_await put_at(q, "generated", at));
  }
  // A job due earlier but put last still comes first.
  const auto first = co_await put_at(q, "earlier", at - 50);
  co_await sleep_for(250ms);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j.id == first);
  for (const auto& id : put_order) {
    auto k = co_await q.async_claim(1s, asio::use_awaitable);
    CHECK(k.id == id);
  }
}

FIXTURE_TEST_CASE("sched",
                  "schedule: a delay; a waiting claimer wakes at the due time, not at the poll",
                  "[job][schedule][put][claim]") {
  thoonk::job_queue_options o;
  o.poll_interval = 60s;  // only the due time can explain a delivery within the claim
  const thoonk::job_queue::settings defaults;
  auto q = co_await engine_queue(f, defaults, o);
  // The claimer waits first: its empty claim learns nothing is scheduled.
  auto waiting = std::make_shared<std::optional<thoonk::claimed_job>>();
  asio::co_spawn(
      f.ioc,
      [](thoonk::job_queue q,
         std::shared_ptr<std::optional<thoonk::claimed_job>> out) -> asio::awaitable<void> {
        auto [ec, j] = co_await q.async_claim(10s, nothrow);
        if (!ec) *out = std::move(j);
      }(q, waiting),
      asio::detached);
  co_await sleep_for(100ms);
  thoonk::put_options po;
  po.delay = 300ms;
  const auto before = thoonk::now_epoch_ms();
  auto r = co_await q.async_put("delayed", po, asio::use_awaitable);
  const auto info = co_await job_of(q, r.id);
  CHECK(info.state == thoonk::job_state::scheduled);
  CHECK(info.run_at >= before + 300);
  CHECK(info.run_at <= thoonk::now_epoch_ms() + 300);
  // The put of a scheduled job wakes nobody up (nothing is claimable),
  // and the poll is a minute away: the waiting claimer must still get it,
  // because the first claim after the put learns its due time.
  auto arrived = co_await wait_until([&] { return waiting->has_value(); }, 8s);
  CHECK(arrived);
  REQUIRE(waiting->has_value());
  CHECK((*waiting)->id == r.id);
}

FIXTURE_TEST_CASE_WITHIN(
    120s, "sched-many",
    "schedule: 100,000 scheduled jobs become due in bounded batches: no script call over 50 ms",
    "[job][schedule][claim][maintain][slow]") {
  auto q = co_await engine_queue(f);
  // 100,000 scheduled jobs, all due (run_at 1 s ago), written in the
  // engine's layout by one EVAL (faster than 100,000 puts here).
  const auto due = std::to_string(thoonk::now_epoch_ms() - 1000);
  const std::string fill =
      "for i = 1, 100000 do "
      "local seq = string.format('%011d', i) "
      "redis.call('ZADD', KEYS[1], ARGV[1], seq .. 'job' .. i) "
      "redis.call('HSET', KEYS[2], 'job' .. i, seq .. 'payload') end return 1";
  co_await cmd(f.c.conn(), "EVAL", fill, "2", key("scheduled", f.name),
               key("scheduled_items", f.name), due);
  auto filled = co_await q.async_counts(asio::use_awaitable);
  CHECK(filled.scheduled == 100000);
  // The bound is on the work per call (batches of at most 1000), not
  // on the machine's speed: one call that promoted all 100,000 would
  // take far longer than 50 ms anywhere, while a batch takes about a
  // millisecond (6 ms seen on a 2-core machine busy with compilers).
  co_await cmd(f.c.conn(), "CONFIG", "SET", "slowlog-log-slower-than", "50000");
  co_await cmd(f.c.conn(), "SLOWLOG", "RESET");

  // Claims promote (1000 per call at most) and take what is due.
  std::size_t claimed = 0;
  for (int i = 0; i < 20; ++i)
    if (co_await try_claim(q)) ++claimed;
  CHECK(claimed == 20);
  // Maintenance promotes the rest in batches.
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.scheduled == 0);
  CHECK(counts.waiting == 100000 - 20);
  // Each claim call promoted a bounded batch; maintenance the rest.
  CHECK(rep.promoted > 0);
  CHECK(rep.promoted < 100000);

  auto slow = co_await cmd(f.c.conn(), "SLOWLOG", "GET", "100");
  std::vector<std::string> scripts;
  for (const auto& entry : slow.elements)
    if (entry.elements.size() > 3 && !entry.elements[3].elements.empty())
      scripts.push_back(entry.elements[3].elements[0].str + " " +
                        std::to_string(entry.elements[2].integer) + " us");
  std::string listing;
  for (const auto& s : scripts) listing += s + "\n";
  INFO("calls over 50 ms:\n" << listing);
  for (const auto& s : scripts) {
    CHECK(s.rfind("EVALSHA", 0) != 0);
    CHECK(s.rfind("FCALL", 0) != 0);
  }
  co_await cmd(f.c.conn(), "CONFIG", "SET", "slowlog-log-slower-than", "10000");
}

FIXTURE_TEST_CASE("sched",
                  "schedule: maintenance promotes due jobs nobody claims; retract and ids see them",
                  "[job][schedule][maintain][retract][get_ids][get_scheduled]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  auto soon = co_await put_at(q, "soon", now + 100);
  auto gone = co_await put_at(q, "gone", now + 100);
  auto far = co_await put_at(q, "far", now + 3600000);
  auto ids = co_await q.async_get_ids(asio::use_awaitable);
  std::sort(ids.begin(), ids.end());
  std::vector<std::string> want{soon, gone, far};
  std::sort(want.begin(), want.end());
  CHECK(ids == want);

  co_await q.async_retract(gone, asio::use_awaitable);
  auto job = co_await q.async_get_job(gone, asio::use_awaitable);
  CHECK(!job);
  auto [rec] = co_await q.async_retract(gone, nothrow);
  CHECK(rec == thoonk::error::job_not_found);

  auto page = co_await q.async_get_scheduled("", 10, asio::use_awaitable);
  REQUIRE(page.jobs.size() == 2);
  CHECK(page.jobs[0].id == soon);  // run_at order
  CHECK(page.jobs[1].id == far);
  CHECK(page.next.empty());

  co_await sleep_for(150ms);
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.promoted == 1);
  CHECK(rep.counts.waiting == 1);
  CHECK(rep.counts.scheduled == 1);
  // Now it is where a contract client looks.
  auto stored = co_await cmd(f.c.conn(), "HGET", key("items", f.name), soon);
  CHECK(stored.str == "soon");
  auto pos = co_await cmd(f.c.conn(), "LPOS", key("ids", f.name), soon);
  CHECK(pos.integer == 0);
}

FIXTURE_TEST_CASE("sched",
                  "schedule: paging through many scheduled jobs sees each once, in run_at order",
                  "[job][schedule][get_scheduled][put]") {
  auto q = co_await engine_queue(f);
  const auto base = thoonk::now_epoch_ms() + 3600000;
  std::vector<std::string> ids;
  for (int i = 0; i < 25; ++i) ids.push_back(co_await put_at(q, "x", base + (i * 7) % 25));
  std::vector<std::pair<thoonk::epoch_ms, std::string>> seen;
  std::string cursor;
  int pages = 0;
  do {
    auto page = co_await q.async_get_scheduled(cursor, 10, asio::use_awaitable);
    for (auto& j : page.jobs) seen.emplace_back(j.run_at, j.id);
    cursor = page.next;
    ++pages;
  } while (!cursor.empty() && pages < 10);
  CHECK(pages == 3);
  REQUIRE(seen.size() == 25);
  CHECK(std::is_sorted(seen.begin(), seen.end(),
                       [](const auto& a, const auto& b) { return a.first < b.first; }));
  std::vector<std::string> got;
  for (auto& s : seen) got.push_back(s.second);
  std::sort(got.begin(), got.end());
  std::sort(ids.begin(), ids.end());
  CHECK(got == ids);
}

namespace {

constexpr thoonk::epoch_ms sched_limit = 9007199254740991;  // 2^53 - 1

// A put with `o` that must be refused with invalid_argument, whose message
// names the limit, before any I/O. (A named coroutine: g++ 12 frees
// by-value parameters of coroutine lambdas wrongly.)
asio::awaitable<void> expect_put_refused(fixture& f, thoonk::job_queue& q, thoonk::put_options o) {
  const auto before = f.c.conn().stats().requests;
  auto [ec, r] = co_await q.async_put(std::string("x"), std::move(o), nothrow);
  CHECK(ec == thoonk::error::invalid_argument);
  CHECK(ec.message().find("9007199254740991") != std::string::npos);
  CHECK(r.id.empty());
  CHECK(f.c.conn().stats().requests == before);  // nothing sent
}

}  // namespace

FIXTURE_TEST_CASE("sched-limit",
                  "schedule: a run_at or delay beyond 2^53 - 1 ms is refused before any I/O; "
                  "run_at 2^53 - 1 reads back exactly",
                  "[job][schedule][put][get_job][errors]") {
  auto q = co_await engine_queue(f);
  const auto before = co_await snapshot(f.c.conn(), f.name);

  // now + milliseconds::max() overflowed to a time in the past (claimable
  // at once); it is checked, not wrapped.
  thoonk::put_options max_delay;
  max_delay.delay = std::chrono::milliseconds::max();
  co_await expect_put_refused(f, q, max_delay);
  thoonk::put_options min_delay;
  min_delay.delay = std::chrono::milliseconds::min();
  co_await expect_put_refused(f, q, min_delay);
  // A delay within the limit whose sum with now is not.
  thoonk::put_options sum_past;
  sum_past.delay = std::chrono::milliseconds(sched_limit);
  co_await expect_put_refused(f, q, sum_past);
  // INT64_MAX was stored and read back as INT64_MIN.
  thoonk::put_options max_at;
  max_at.run_at = std::numeric_limits<thoonk::epoch_ms>::max();
  co_await expect_put_refused(f, q, max_at);
  thoonk::put_options min_at;
  min_at.run_at = std::numeric_limits<thoonk::epoch_ms>::min();
  co_await expect_put_refused(f, q, min_at);
  thoonk::put_options pow53;
  pow53.run_at = sched_limit + 1;
  co_await expect_put_refused(f, q, pow53);
  thoonk::put_options minus_pow53;
  minus_pow53.run_at = -sched_limit - 1;
  co_await expect_put_refused(f, q, minus_pow53);
  // A delay beside run_at is ignored, but checked all the same.
  thoonk::put_options both;
  both.run_at = thoonk::now_epoch_ms();
  both.delay = std::chrono::milliseconds::max();
  co_await expect_put_refused(f, q, both);
  // With an id (an update of an existing job would be written too).
  thoonk::put_options by_id;
  by_id.id = "limit-id";
  by_id.run_at = std::numeric_limits<thoonk::epoch_ms>::max();
  co_await expect_put_refused(f, q, by_id);
  // A retry strategy's backoff beyond it.
  thoonk::put_options backoff;
  thoonk::retry_strategy endless;
  endless.max_backoff = std::chrono::milliseconds::max();
  backoff.retry = endless;
  co_await expect_put_refused(f, q, backoff);

  // Nothing was written: every key of the queue as before, nothing scheduled.
  const auto after = co_await snapshot(f.c.conn(), f.name);
  CHECK(after == before);
  auto none = co_await q.async_counts(asio::use_awaitable);
  CHECK(none.scheduled == 0);
  CHECK(none.waiting == 0);
  auto missing = co_await q.async_get_job("limit-id", asio::use_awaitable);
  CHECK(!missing);

  // 2^53 - 1 itself is a time the scripts hold exactly.
  thoonk::put_options at_limit;
  at_limit.id = "at-limit";
  at_limit.run_at = sched_limit;
  auto r = co_await q.async_put(std::string("far"), at_limit, asio::use_awaitable);
  CHECK(r.outcome == thoonk::put_result::outcome_t::added);
  auto info = co_await job_of(q, "at-limit");
  CHECK(info.state == thoonk::job_state::scheduled);
  CHECK(info.run_at == sched_limit);
  auto page = co_await q.async_get_scheduled("", 10, asio::use_awaitable);
  REQUIRE(page.jobs.size() == 1);
  CHECK(page.jobs[0].run_at == sched_limit);
  auto claimed = co_await try_claim(q);
  CHECK(!claimed);  // not due for a while
}

FIXTURE_TEST_CASE("sched-limit",
                  "time options beyond 2^53 - 1 ms are refused before any I/O: the settings' "
                  "lease, backoffs and result time, the maintenance lock",
                  "[job][create_or_open][maintain][errors]") {
  co_await f.c.async_connect(asio::use_awaitable);
  const auto endless = std::chrono::milliseconds::max();
  const auto pow53 = std::chrono::milliseconds(sched_limit + 1);
  std::vector<thoonk::job_queue::settings> bad(6);
  bad[0].claim_timeout = endless;
  bad[1].claim_timeout = pow53;
  bad[2].result_ttl = endless;
  bad[3].retry.min_backoff = pow53;
  bad[3].retry.max_backoff = pow53;
  bad[4].retry.max_backoff = endless;
  bad[5].claim_timeout = -endless;
  for (std::size_t i = 0; i < bad.size(); ++i) {
    INFO("settings " << i);
    CHECK(!bad[i].problem().empty());
    const auto before = f.c.conn().stats().requests;
    auto [ec, q] = co_await thoonk::job_queue::async_create_or_open(f.c, f.name, bad[i], nothrow);
    CHECK(ec == thoonk::error::invalid_argument);
    CHECK(f.c.conn().stats().requests == before);
  }
  auto exists = co_await cmd(f.c.conn(), "EXISTS", key("config", f.name));
  CHECK(exists.integer == 0);  // no queue was made

  auto q = co_await engine_queue(f);
  auto lock = thoonk::test::no_stats();
  lock.lock_ttl = endless;
  const auto before = f.c.conn().stats().requests;
  auto [mec, rep] = co_await q.async_maintain(lock, nothrow);
  CHECK(mec == thoonk::error::invalid_argument);
  CHECK(!rep.ran);
  CHECK(f.c.conn().stats().requests == before);
  auto locked = co_await cmd(f.c.conn(), "EXISTS", key("maintenance", f.name));
  CHECK(locked.integer == 0);
}
