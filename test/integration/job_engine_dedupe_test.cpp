// De-duplication by explicit id and held puts (docs/jobs.md §9,
// "De-duplication by id"), with the three rules of held puts each in its own
// test case.
#include "support/job_engine.hpp"

using namespace thoonk::test;
using E = thoonk::error;
using put_outcome = thoonk::put_result::outcome_t;
using flags = thoonk::update_flags;
using state = thoonk::job_state;

namespace {

flags with_run_at(flags::run_at_mode m) { return {.run_at = m}; }

flags keep_data() { return {.data = flags::data_mode::keep}; }

constexpr thoonk::epoch_ms hour = 3600000;

// Claims the next job and checks that it holds `item`.
asio::awaitable<thoonk::claimed_job> claim_expecting(thoonk::job_queue& q, std::string item) {
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j.item == item);
  co_return j;
}

// Puts job `id` (put_id) and claims it: a job a next put finds claimed.
asio::awaitable<thoonk::claimed_job> put_id_and_claim(thoonk::job_queue& q, std::string id,
                                                      std::string item, thoonk::epoch_ms run_at) {
  co_await put_id(q, std::move(id), std::move(item), run_at);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  co_return j;
}

}  // namespace

FIXTURE_TEST_CASE("dedupe", "dedupe: a put with an existing id updates it; data replace and keep",
                  "[job][dedupe][put][get_job][counts]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  auto r1 = co_await put_id(q, "a", "v1", now);
  CHECK(r1.outcome == put_outcome::added);
  CHECK(r1.id == "a");
  auto r2 = co_await put_id(q, "a", "v2", now);
  CHECK(r2.outcome == put_outcome::updated);
  auto a_job = co_await job_of(q, "a");
  CHECK(a_job.item == "v2");
  co_await put_id(q, "a", "v3", now, keep_data());
  a_job = co_await job_of(q, "a");
  CHECK(a_job.item == "v2");
  auto c = co_await q.async_counts(asio::use_awaitable);
  CHECK(c.waiting == 1);  // one job, one place in the line
  CHECK(c.items == 1);
  CHECK(c.puts == 1);
  co_await claim_expecting(q, "v2");
  auto claimed = co_await try_claim(q);
  CHECK(!claimed);
}

FIXTURE_TEST_CASE("dedupe", "dedupe: every run_at mode on a scheduled and on a waiting job",
                  "[job][dedupe][schedule][put][get_job]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  const auto t1 = now + 2 * hour, earlier = now + hour, later = now + 3 * hour;
  struct row {
    flags::run_at_mode mode;
    thoonk::epoch_ms put;
    thoonk::epoch_ms want;
  };
  const row rows[] = {
      {flags::run_at_mode::always, earlier, earlier},
      {flags::run_at_mode::always, later, later},
      {flags::run_at_mode::if_later, earlier, t1},
      {flags::run_at_mode::if_later, later, later},
      {flags::run_at_mode::if_earlier, earlier, earlier},
      {flags::run_at_mode::if_earlier, later, t1},
      {flags::run_at_mode::never, earlier, t1},
      {flags::run_at_mode::never, later, t1},
  };
  int i = 0;
  for (const auto& r : rows) {
    const std::string id = "s" + std::to_string(i++);
    co_await put_id(q, id, "old", t1);
    auto res = co_await put_id(q, id, "new", r.put, with_run_at(r.mode));
    CHECK(res.outcome == put_outcome::updated);
    auto info = co_await job_of(q, id);
    INFO(id << " mode " << static_cast<int>(r.mode));
    CHECK(info.state == state::scheduled);
    CHECK(info.run_at == r.want);
    CHECK(info.item == "new");
  }
  // A scheduled job moved to now or the past becomes claimable.
  co_await put_id(q, "due", "old", t1);
  co_await put_id(q, "due", "now", now - 10);
  auto due_job = co_await job_of(q, "due");
  CHECK(due_job.state == state::waiting);
  // A waiting job counts as run_at 0: if_later to the future schedules
  // it, if_earlier leaves it waiting, never too; the default (always)
  // schedules it.
  struct waiting_row {
    const char* id;
    flags::run_at_mode mode;
    state want;
  };
  const waiting_row waiting_rows[] = {
      {"w1", flags::run_at_mode::if_later, state::scheduled},
      {"w2", flags::run_at_mode::if_earlier, state::waiting},
      {"w3", flags::run_at_mode::never, state::waiting},
      {"w4", flags{}.run_at, state::scheduled},
  };
  for (const auto& w : waiting_rows) {
    co_await put_id(q, w.id, "w", now);
    co_await put_id(q, w.id, "w", later, with_run_at(w.mode));
    auto w_job = co_await job_of(q, w.id);
    INFO(w.id);
    CHECK(w_job.state == w.want);
  }
  // Moved out of the line: not claimable, nothing left behind in feed.ids.
  auto c = co_await q.async_counts(asio::use_awaitable);
  CHECK(c.waiting == 3);  // due, w2, w3
  std::vector<std::string> got;
  while (auto j = co_await try_claim(q)) got.push_back(j->id);
  std::sort(got.begin(), got.end());
  CHECK(got == std::vector<std::string>{"due", "w2", "w3"});
}

FIXTURE_TEST_CASE("dedupe", "dedupe: strategy replace and keep; counters reset and keep",
                  "[job][dedupe][put][fail][get_job]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  thoonk::put_options o;
  o.id = "k";
  o.retry = thoonk::retry_strategy{};
  o.retry->max_retries = 7;
  o.retry->min_backoff = 0ms;
  co_await q.async_put("v", o, asio::use_awaitable);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_fail(j, "one", asio::use_awaitable);
  // The job's own strategy and its one failure: after the failure, and
  // again after a put that keeps both.
  auto expect_first_strategy = [&]() -> asio::awaitable<void> {
    auto info = co_await job_of(q, "k");
    CHECK(info.retry.max_retries == 7);
    CHECK(info.retry_count == 1);
    CHECK(info.failures == 1);
  };
  co_await expect_first_strategy();

  // keep strategy, keep counters.
  thoonk::put_options keep;
  keep.id = "k";
  keep.update.strategy = flags::strategy_mode::keep;
  keep.retry = thoonk::retry_strategy{};
  keep.retry->max_retries = 2;
  co_await q.async_put("v2", keep, asio::use_awaitable);
  co_await expect_first_strategy();

  // replace strategy (with none: the queue's), reset counters.
  thoonk::put_options reset;
  reset.id = "k";
  reset.update.counters = flags::counters_mode::reset;
  co_await q.async_put("v3", reset, asio::use_awaitable);
  auto info = co_await job_of(q, "k");
  CHECK(info.retry == thoonk::retry_strategy{});
  CHECK(info.retry_count == 0);
  CHECK(info.stall_count == 0);
  CHECK(info.failures == 0);
  CHECK(info.last_error == "one");  // the last error stays readable
  CHECK(info.item == "v3");
  (void)now;
}

FIXTURE_TEST_CASE(
    "dedupe", "dedupe: a put for a claimed id is held, never claimable twice, applied at finish",
    "[job][dedupe][held][put][claim][finish][get_job][counts]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  auto j = co_await put_id_and_claim(q, "h", "first", now);
  auto r = co_await put_id(q, "h", "second", now);
  CHECK(r.outcome == put_outcome::held);
  auto info = co_await job_of(q, "h");
  CHECK(info.state == state::claimed);
  CHECK(info.item == "first");  // the running job is untouched
  REQUIRE(info.held);
  CHECK(info.held->item == "second");
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.held == 1);
  auto claimed = co_await try_claim(q);
  CHECK(!claimed);

  // A second held put merges: keep data keeps the held item.
  co_await put_id(q, "h", "third", now, keep_data());
  auto h_job = co_await job_of(q, "h");
  CHECK(h_job.held->item == "second");

  co_await q.async_finish(j, asio::use_awaitable);
  info = co_await job_of(q, "h");
  CHECK(info.state == state::waiting);
  CHECK(info.item == "second");
  CHECK(!info.held);
  counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.held == 0);
  auto j2 = co_await claim_expecting(q, "second");
  // The first claim's token can never finish the new job.
  auto [ec] = co_await q.async_finish(j, nothrow);
  CHECK(ec == E::lost_claim);
  CHECK(j2.token != j.token);
}

FIXTURE_TEST_CASE("dedupe", "dedupe: a held put is applied however the claim ends",
                  "[job][dedupe][held][fail][cancel][stall][maintain][close]") {
  thoonk::job_queue::settings s;
  s.retry.max_retries = 2;
  s.retry.max_stalls = 5;
  s.retry.min_backoff = 0ms;
  auto q = co_await engine_queue(f, s);
  const auto now = thoonk::now_epoch_ms();
  auto hold = [&](std::string id) -> asio::awaitable<thoonk::claimed_job> {
    auto j = co_await put_id_and_claim(q, id, "old", now);
    REQUIRE(j.id == id);
    auto r = co_await put_id(q, id, "new", now);
    CHECK(r.outcome == put_outcome::held);
    co_return j;
  };
  auto expect_new = [&](std::string id, state st) -> asio::awaitable<void> {
    auto info = co_await job_of(q, id);
    INFO(id);
    CHECK(info.state == st);
    CHECK(info.item == "new");
    CHECK(!info.held);
  };

  auto j1 = co_await hold("by-fail");
  auto f1 = co_await q.async_fail(j1, "x", asio::use_awaitable);
  CHECK(f1.outcome == thoonk::fail_result::outcome_t::retry_scheduled);
  co_await expect_new("by-fail", state::waiting);
  (void)co_await q.async_claim(1s, asio::use_awaitable);  // take it out of the way

  auto j2 = co_await hold("by-cancel");
  co_await q.async_cancel(j2, asio::use_awaitable);
  co_await expect_new("by-cancel", state::waiting);
  (void)co_await q.async_claim(1s, asio::use_awaitable);

  auto j3 = co_await hold("by-stall");
  co_await q.async_stall(j3, asio::use_awaitable);
  co_await expect_new("by-stall", state::waiting);  // revived by the held put
  (void)co_await q.async_claim(1s, asio::use_awaitable);

  co_await hold("by-lapse");
  co_await lapse(f, "by-lapse");
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.requeued == 1);
  co_await expect_new("by-lapse", state::waiting);
  auto by_lapse_job = co_await job_of(q, "by-lapse");
  CHECK(by_lapse_job.stall_count == 1);
  (void)co_await q.async_claim(1s, asio::use_awaitable);

  // Dead letter: the held put revives the job.
  auto j5 = co_await put_id_and_claim(q, "by-dead", "old", now);
  thoonk::fail_options perm;
  perm.permanent = true;
  co_await put_id(q, "by-dead", "new", now);
  auto f5 = co_await q.async_fail(j5, "fatal", perm, asio::use_awaitable);
  CHECK(f5.outcome == thoonk::fail_result::outcome_t::dead_lettered);
  co_await expect_new("by-dead", state::waiting);
}

FIXTURE_TEST_CASE("dedupe",
                  "dedupe: reference bug 1: a held put with run_at 0 or in the past stays held",
                  "[job][dedupe][held][put][claim]") {
  auto q = co_await engine_queue(f);
  auto j = co_await put_id_and_claim(q, "b1", "running", thoonk::now_epoch_ms());
  for (thoonk::epoch_ms at : {thoonk::epoch_ms{0}, thoonk::now_epoch_ms() - 60000}) {
    auto r = co_await put_id(q, "b1", "next", at);
    CHECK(r.outcome == put_outcome::held);
    // The reference made it claimable at once: the same id twice.
    auto claimed = co_await try_claim(q);
    CHECK(!claimed);
    auto counts = co_await q.async_counts(asio::use_awaitable);
    CHECK(counts.waiting == 0);
  }
  co_await q.async_finish(j, asio::use_awaitable);
  co_await claim_expecting(q, "next");
}

FIXTURE_TEST_CASE("dedupe",
                  "dedupe: reference bug 2: held puts with run_at never or if_earlier are released",
                  "[job][dedupe][held][put][finish]") {
  auto q = co_await engine_queue(f);
  for (auto mode : {flags::run_at_mode::never, flags::run_at_mode::if_earlier}) {
    const std::string id = mode == flags::run_at_mode::never ? "never" : "if_earlier";
    auto j = co_await put_id_and_claim(q, id, "running", thoonk::now_epoch_ms());
    auto r = co_await put_id(q, id, "held", thoonk::now_epoch_ms(), with_run_at(mode));
    CHECK(r.outcome == put_outcome::held);
    co_await q.async_finish(j, asio::use_awaitable);
    auto info = co_await q.async_get_job(id, asio::use_awaitable);
    REQUIRE(info);
    CHECK(info->state == state::waiting);
    CHECK(info->item == "held");
    auto again = co_await q.async_claim(1s, asio::use_awaitable);
    CHECK(again.id == id);
    co_await q.async_finish(again, asio::use_awaitable);
  }
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.held == 0);
}

FIXTURE_TEST_CASE(
    "dedupe",
    "dedupe: reference bug 3: failing a job with a held put retries it and applies the put",
    "[job][dedupe][held][fail][claim]") {
  thoonk::job_queue::settings s;
  s.retry.min_backoff = 0ms;
  auto q = co_await engine_queue(f, s);
  auto j = co_await put_id_and_claim(q, "b3", "v1", thoonk::now_epoch_ms());
  flags keep_run_at;
  keep_run_at.run_at = flags::run_at_mode::never;
  co_await put_id(q, "b3", "v2", thoonk::now_epoch_ms() + hour, keep_run_at);
  auto r = co_await q.async_fail(j, "boom", asio::use_awaitable);  // the reference crashed here
  CHECK(r.outcome == thoonk::fail_result::outcome_t::retry_scheduled);
  auto info = co_await job_of(q, "b3");
  CHECK(info.item == "v2");  // the held data, applied
  CHECK(info.retry_count == 1);
  CHECK(!info.held);
  CHECK(info.state == state::waiting);  // run_at never: the retry's time stands
  co_await claim_expecting(q, "v2");
}

FIXTURE_TEST_CASE("dedupe",
                  "dedupe: a put revives a stalled job; retract removes the job and its held put",
                  "[job][dedupe][held][put][retract][stall]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  auto j = co_await put_id_and_claim(q, "dead", "v1", now);
  co_await q.async_stall(j, asio::use_awaitable);
  auto dead_job = co_await job_of(q, "dead");
  CHECK(dead_job.state == state::stalled);
  auto r = co_await put_id(q, "dead", "v2", now);
  CHECK(r.outcome == put_outcome::updated);
  dead_job = co_await job_of(q, "dead");
  CHECK(dead_job.state == state::waiting);
  auto stalled = co_await cmd(f.c.conn(), "SCARD", key("stalled", f.name));
  CHECK(stalled.integer == 0);
  auto j2 = co_await claim_expecting(q, "v2");

  co_await put_id(q, "dead", "held", now);
  co_await q.async_retract("dead", asio::use_awaitable);
  auto job = co_await q.async_get_job("dead", asio::use_awaitable);
  CHECK(!job);
  auto c = co_await q.async_counts(asio::use_awaitable);
  CHECK(c.held == 0);
  CHECK(c.claimed == 0);
  auto [ec] = co_await q.async_finish(j2, nothrow);
  CHECK(ec == E::job_not_found);
}

FIXTURE_TEST_CASE("dedupe",
                  "dedupe: maintenance applies a held put whose claim ended through plain commands",
                  "[job][dedupe][held][maintain][interop]") {
  auto q = co_await engine_queue(f);
  auto j = co_await put_id_and_claim(q, "c1", "v1", thoonk::now_epoch_ms());
  co_await put_id(q, "c1", "v2", thoonk::now_epoch_ms());
  // A contract client's Finish: ZREM claimed, HDEL items, INCR finishes.
  co_await cmd(f.c.conn(), "ZREM", key("claimed", f.name), "c1");
  co_await cmd(f.c.conn(), "HDEL", key("items", f.name), "c1");
  auto job = co_await q.async_get_job("c1", asio::use_awaitable);
  CHECK(!job);
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.held_released == 1);
  auto info = co_await job_of(q, "c1");
  CHECK(info.item == "v2");
  CHECK(info.state == state::waiting);
  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j2.token != j.token);
}

FIXTURE_TEST_CASE("dedupe", "dedupe: every update flag on a waiting, a scheduled and a claimed job",
                  "[job][dedupe][held][put][finish][get_job]") {
  auto q = co_await engine_queue(f);
  const auto now = thoonk::now_epoch_ms();
  const auto t1 = now + 2 * hour, t2 = now + 3 * hour;
  struct variant {
    const char* name;
    flags f;
    // What the job holds afterwards (for a claimed job: after the finish
    // that applies the held put to a new job, where counters and
    // strategy start afresh whatever the flags).
    bool new_item, new_run_at, new_strategy, counters_reset;
  };
  flags keep_all;
  keep_all.data = flags::data_mode::keep;
  keep_all.run_at = flags::run_at_mode::never;
  keep_all.strategy = flags::strategy_mode::keep;
  flags reset = keep_all;
  reset.counters = flags::counters_mode::reset;
  flags data_only = keep_all;
  data_only.data = flags::data_mode::replace;
  flags run_at_only = keep_all;
  run_at_only.run_at = flags::run_at_mode::if_later;
  flags strategy_only = keep_all;
  strategy_only.strategy = flags::strategy_mode::replace;
  const variant variants[] = {
      {"keep all", keep_all, false, false, false, false},
      {"data", data_only, true, false, false, false},
      {"run_at if_later", run_at_only, false, true, false, false},
      {"strategy", strategy_only, false, false, true, false},
      {"counters", reset, false, false, false, true},
  };
  int n = 0;
  for (const char* where : {"waiting", "scheduled", "claimed", "claimed, then retried"}) {
    for (const auto& v : variants) {
      const std::string id = std::string(where) + "-" + std::to_string(n++);
      INFO(id << " (" << v.name << ")");
      const std::string w = where;
      // The job: its own strategy (max_retries 5), one failure counted,
      // then put where the case wants it.
      thoonk::put_options first;
      first.id = id;
      first.retry = thoonk::retry_strategy{};
      first.retry->max_retries = 5;
      co_await q.async_put("old", first, asio::use_awaitable);
      auto j = co_await q.async_claim(1s, asio::use_awaitable);
      REQUIRE(j.id == id);
      thoonk::fail_options fo;
      fo.retry_at = w == "scheduled" ? t1 : now - 1;
      co_await q.async_fail(j, "counted", fo, asio::use_awaitable);
      std::optional<thoonk::claimed_job> held_claim;
      if (w != "waiting" && w != "scheduled") {
        auto k = co_await q.async_claim(1s, asio::use_awaitable);
        REQUIRE(k.id == id);
        held_claim = k;
      }
      // The put under test: new item, a later run_at, another strategy.
      thoonk::put_options second;
      second.id = id;
      second.run_at = t2;
      second.update = v.f;
      second.retry = thoonk::retry_strategy{};
      second.retry->max_retries = 9;
      auto r = co_await q.async_put("new", second, asio::use_awaitable);
      CHECK(r.outcome == (held_claim ? put_outcome::held : put_outcome::updated));
      std::int64_t failed = 1;
      if (held_claim) {
        auto id_job = co_await job_of(q, id);
        CHECK(id_job.item == "old");  // untouched while it runs
        if (w == "claimed") {
          co_await q.async_finish(*held_claim, asio::use_awaitable);
        } else {
          // Retried at once: the held put then applies its flags to the
          // waiting job, as a put would.
          thoonk::fail_options again;
          again.retry_at = now - 1;
          co_await q.async_fail(*held_claim, "again", again, asio::use_awaitable);
          failed = 2;
        }
      }
      auto info = co_await job_of(q, id);
      if (w == "claimed") {
        // A new job from the held put: the held put's item and run_at
        // (the first held put sets them whatever its flags).
        CHECK(info.item == "new");
        CHECK(info.state == state::scheduled);
        CHECK(info.run_at == t2);
        CHECK(info.retry_count == 0);
        CHECK(info.retry.max_retries == 9);
        continue;
      }
      CHECK(info.item == (v.new_item ? "new" : "old"));
      CHECK(!info.held);
      const thoonk::epoch_ms old_run_at = w == "scheduled" ? t1 : 0;
      const thoonk::epoch_ms want_run_at = v.new_run_at ? t2 : old_run_at;
      CHECK(info.state == (want_run_at > now ? state::scheduled : state::waiting));
      if (want_run_at > now) CHECK(info.run_at == want_run_at);
      CHECK(info.retry.max_retries == (v.new_strategy ? 9 : 5));
      CHECK(info.retry_count == (v.counters_reset ? 0 : failed));
      CHECK(info.failures == (v.counters_reset ? 0 : failed));
      co_await q.async_retract(id, asio::use_awaitable);
    }
  }
}
