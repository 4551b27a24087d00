// Maintenance: lapsed claims and stale tokens, failures past the limit,
// two-pass detection of jobs in no state, orphaned tokens, the stats feed,
// the lock, the background loop.
#include "support/helpers.hpp"

#include <optional>

using namespace thoonk::test;
using thoonk::test::run_coro;

FIXTURE_TEST_CASE(
    "jobs-maint", "job: a stale token is refused and the job is finished exactly once",
    "[job][cancel][claim][counts][finish][get_result][heartbeat][maintain][put][stall]") {
  fields cfg{{"claim_timeout_ms", "100"}};
  auto qa = co_await contract_job_queue(f, cfg);
  thoonk::client other(f.ioc.get_executor(), named_config());
  co_await other.async_connect(asio::use_awaitable);
  thoonk::job_queue qb(other, f.name);

  auto id = co_await put_item(qa, "slow work");
  auto ja = co_await qa.async_claim(1s, asio::use_awaitable);
  // Worker A hangs past the claim timeout; maintenance requeues the job.
  auto lapsed = co_await claim_lapsed(f.c.conn(), f.name, id, 100ms);
  REQUIRE(lapsed);
  auto rep = co_await qb.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.ran);
  CHECK(rep.requeued == 1);
  CHECK(rep.stalled == 0);
  // Worker B claims it again.
  auto jb = co_await qb.async_claim(1s, asio::use_awaitable);
  CHECK(jb.id == id);
  CHECK(jb.failures == 1);
  CHECK(jb.token != ja.token);
  // A wakes up: every call with its old token is refused, nothing changes.
  auto before = co_await snapshot(f.c.conn(), f.name);
  auto [e1] = co_await qa.async_finish(ja, std::string("from A"), nothrow);
  CHECK(e1 == thoonk::error::lost_claim);
  auto [e2, n2] = co_await qa.async_cancel(ja, nothrow);
  CHECK(e2 == thoonk::error::lost_claim);
  auto [e3] = co_await qa.async_stall(ja, nothrow);
  CHECK(e3 == thoonk::error::lost_claim);
  auto [e4] = co_await qa.async_heartbeat(ja, nothrow);
  CHECK(e4 == thoonk::error::lost_claim);
  auto after = co_await snapshot(f.c.conn(), f.name);
  CHECK(after == before);
  // B finishes; A still cannot.
  co_await qb.async_finish(jb, std::string("from B"), asio::use_awaitable);
  auto [e5] = co_await qa.async_finish(ja, std::string("from A"), nothrow);
  CHECK(e5 == thoonk::error::job_not_found);
  auto counts = co_await qa.async_counts(asio::use_awaitable);
  CHECK(counts.finishes == 1);
  auto result = co_await qa.async_get_result(id, 1s, asio::use_awaitable);
  CHECK(result == "from B");
  auto stored =
      co_await cmd(f.c.conn(), "LLEN", key("jobfinished", f.name) + std::string(1, '\0') + id);
  CHECK(stored.integer == 1);
}

FIXTURE_TEST_CASE("jobs-maint", "job: a claim lapsing max_stalls times makes the job a dead letter",
                  "[job][claim][finish][maintain][put][retry]") {
  fields cfg{{"claim_timeout_ms", "50"}, {"max_stalls", "2"}};
  auto q = co_await contract_job_queue(f, cfg);
  auto id = co_await put_item(q, "poison");
  co_await q.async_claim(1s, asio::use_awaitable);
  auto lapsed1 = co_await claim_lapsed(f.c.conn(), f.name, id, 50ms);
  REQUIRE(lapsed1);
  auto r1 = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(r1.requeued == 1);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j.failures == 1);
  auto lapsed2 = co_await claim_lapsed(f.c.conn(), f.name, id, 50ms);
  REQUIRE(lapsed2);
  auto r2 = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(r2.requeued == 0);
  CHECK(r2.stalled == 1);
  CHECK(r2.counts.stalled == 1);
  CHECK(r2.counts.claimed == 0);
  CHECK(r2.counts.waiting == 0);
  co_await expect_only_stalled(f, q, id);
  // The dead letter can be retried.
  co_await q.async_retry(id, asio::use_awaitable);
  auto j3 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j3.id == id);
  CHECK(j3.token > j.token);
  co_await q.async_finish(j3, asio::use_awaitable);
}

JOB_QUEUE_TEST_CASE("jobs-maint", "job: a job in no state is requeued only on the second pass",
                    "[job][claim][maintain][put_many]") {
  std::vector<std::string> items{"a", "b", "c"};
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);

  // Two contract clients do "Get" (BRPOP, then ZADD claimed) and stop
  // between the two steps. One of them dies there ...
  auto lost = co_await cmd(f.c.conn(), "RPOP", key("ids", f.name));
  CHECK(lost.str == ids[0]);
  // ... the other is just slow.
  auto slow = co_await cmd(f.c.conn(), "RPOP", key("ids", f.name));
  CHECK(slow.str == ids[1]);

  auto r1 = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(r1.unaccounted_suspects == 2);
  CHECK(r1.unaccounted_requeued == 0);
  auto waiting = co_await llen(f.c.conn(), key("ids", f.name));
  CHECK(waiting == 1);

  // The slow one completes its claim.
  co_await cmd(f.c.conn(), "ZADD", key("claimed", f.name), std::to_string(ms_now()), slow.str);

  auto r2 = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(r2.unaccounted_requeued == 1);
  CHECK(r2.unaccounted_suspects == 0);
  auto pos = co_await cmd(f.c.conn(), "LPOS", key("ids", f.name), lost.str);
  CHECK(!pos.is_null());
  auto dup = co_await cmd(f.c.conn(), "LPOS", key("ids", f.name), slow.str);
  CHECK(dup.is_null());
  // Requeued at the end of the line: c first, then the recovered one.
  auto j1 = co_await q.async_claim(1s, asio::use_awaitable);
  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j1.id == ids[2]);
  CHECK(j2.id == lost.str);
  auto r3 = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(r3.unaccounted_suspects == 0);
  CHECK(r3.unaccounted_requeued == 0);
}

JOB_QUEUE_TEST_CASE("jobs-maint",
                    "job: maintenance removes tokens of jobs finished with plain commands",
                    "[job][claim][maintain][put]") {
  auto [id, j] = co_await put_and_claim(q, "x");
  // Contract "Finish", by hand.
  co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
    r.push("ZREM", key("claimed", f.name), id);
    r.push("HDEL", key("cancelled", f.name), id);
    r.push("INCR", key("finishes", f.name));
    r.push("HDEL", key("items", f.name), id);
  });
  auto left = co_await cmd(f.c.conn(), "HEXISTS", key("attempts", f.name), id);
  CHECK(left.integer == 1);
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.orphans_removed == 1);
  left = co_await cmd(f.c.conn(), "HEXISTS", key("attempts", f.name), id);
  CHECK(left.integer == 0);
  // The encoding field stays (docs/jobs.md).
  auto keep =
      co_await cmd(f.c.conn(), "HEXISTS", key("attempts", f.name), std::string("\0encoding", 9));
  CHECK(keep.integer == 1);
  auto enc = co_await cmd(f.c.conn(), "OBJECT", "ENCODING", key("attempts", f.name));
  CHECK(enc.str == "hashtable");
  (void)j;
}

JOB_QUEUE_TEST_CASE("jobs-maint", "job: maintenance publishes stats to a feed and takes a lock",
                    "[job][claim][finish][maintain][put_many]") {
  std::vector<std::string> items{"a", "b", "c"};
  co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_finish(j, asio::use_awaitable);

  thoonk::maintenance_options o;
  o.stats_max_length = 2;
  auto rep = co_await q.async_maintain(o, asio::use_awaitable);
  CHECK(rep.ran);
  CHECK(rep.stats_published);
  CHECK(rep.counts.waiting == 2);
  CHECK(rep.counts.puts == 3);
  CHECK(rep.counts.finishes == 1);
  const std::string stats = f.name + ".stats";
  auto type = co_await cmd(f.c.conn(), "HGET", key("config", stats), "type");
  CHECK(type.str == "feed");
  auto items_now = co_await cmd(f.c.conn(), "HVALS", key("items", stats));
  REQUIRE(items_now.elements.size() == 1);
  auto json = boost::json::parse(items_now.elements[0].str).as_object();
  CHECK(json.at("waiting").as_int64() == 2);
  CHECK(json.at("finishes").as_int64() == 1);
  CHECK(json.at("queue").as_string() == f.name);
  for (int i = 0; i < 3; ++i) co_await q.async_maintain(o, asio::use_awaitable);
  auto n = co_await cmd(f.c.conn(), "ZCARD", key("ids", stats));
  CHECK(n.integer == 2);  // max_length

  // Someone else holds the lock: nothing is done.
  co_await cmd(f.c.conn(), "SET", key("maintenance", f.name), "someone", "PX", 5000);
  auto rep2 = co_await q.async_maintain(o, asio::use_awaitable);
  CHECK(!rep2.ran);
  auto holder = co_await cmd(f.c.conn(), "GET", key("maintenance", f.name));
  CHECK(holder.str == "someone");
  // Our own lock is released by the time each run completes.
  co_await cmd(f.c.conn(), "DEL", key("maintenance", f.name));
  co_await q.async_maintain(no_stats(), asio::use_awaitable);
  auto free_now = co_await cmd(f.c.conn(), "EXISTS", key("maintenance", f.name));
  CHECK(free_now.integer == 0);
}

TEST_CASE("job: maintain() releases its lock before it completes (run once and exit)",
          "[job][claim][maintain][put]") {
  // A cron job: connect, run maintenance once, stop. The lock must be gone
  // when maintain() completes, so the next run (another process, at once)
  // does its work instead of finding the lock held for lock_ttl (30 s).
  asio::io_context ioc;
  const auto name = thoonk::test::unique_name("jobs-maint-once");
  thoonk::client admin(ioc.get_executor(), named_config());
  std::optional<thoonk::client> first, second;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await admin.async_connect(asio::use_awaitable);
    fields cfg{{"claim_timeout_ms", "50"}};
    co_await create_feed(admin.conn(), name, "job", cfg);
    thoonk::job_queue aq(admin, name);
    auto id = co_await put_item(aq, "x");

    first.emplace(ioc.get_executor(), named_config("thoonk-maint-cron-1"));
    co_await first->async_connect(asio::use_awaitable);
    {
      thoonk::job_queue q(*first, name);
      auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
      CHECK(rep.ran);
      first->stop();  // the process exits right away
    }
    auto held = co_await cmd(admin.conn(), "EXISTS", key("maintenance", name));
    CHECK(held.integer == 0);

    // A worker claims and dies; its claim lapses.
    co_await aq.async_claim(1s, asio::use_awaitable);
    auto lapsed = co_await claim_lapsed(admin.conn(), name, id, 50ms);
    REQUIRE(lapsed);
    // The next run, from another process, does its work at once.
    second.emplace(ioc.get_executor(), named_config("thoonk-maint-cron-2"));
    co_await second->async_connect(asio::use_awaitable);
    {
      thoonk::job_queue q(*second, name);
      auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
      CHECK(rep.ran);
      CHECK(rep.requeued == 1);
      second->stop();
    }
    auto j = co_await aq.async_claim(1s, asio::use_awaitable);
    CHECK(j.id == id);
    CHECK(j.failures == 1);
  });
}

JOB_QUEUE_TEST_CASE("jobs-maint",
                    "job: a cancelled maintenance run still releases its lock before completing",
                    "[job][maintain][put_many]") {
  std::vector<std::string> items(50, "x");
  co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  thoonk::maintenance_options o = no_stats();
  o.batch = 1;  // many steps: the cancellation lands between two of them
  asio::cancellation_signal sig;
  bool done = false;
  error_code ec;
  q.async_maintain(
      o, asio::bind_cancellation_slot(sig.slot(), [&](error_code e, thoonk::maintenance_report) {
        ec = e;
        done = true;
      }));
  // Cancelled once the run is under way (it holds the lock), unless it is
  // done by then.
  auto started = co_await wait_until([&]() -> asio::awaitable<bool> {
    auto lock = co_await cmd(f.c.conn(), "EXISTS", key("maintenance", f.name));
    co_return done || lock.integer == 1;
  });
  CHECK(started);
  sig.emit(asio::cancellation_type::terminal);
  auto ended = co_await wait_until([&] { return done; });
  REQUIRE(ended);
  CHECK((!ec || ec == asio::error::operation_aborted));
  // Whether it was cut short or had finished: no lock left behind.
  auto held = co_await cmd(f.c.conn(), "EXISTS", key("maintenance", f.name));
  CHECK(held.integer == 0);
  // And the next run is not blocked.
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.ran);
}

FIXTURE_TEST_CASE("jobs-maint",
                  "job: background maintenance recovers lapsed claims until cancelled",
                  "[job][claim][put][run_maintenance]") {
  fields cfg{{"claim_timeout_ms", "50"}};
  auto q = co_await contract_job_queue(f, cfg);
  auto id = co_await put_item(q, "x");
  co_await q.async_claim(1s, asio::use_awaitable);  // and "crash"

  asio::cancellation_signal sig;
  error_code loop_ec;
  bool loop_done = false;
  q.async_run_maintenance(20ms, no_stats(),
                          asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) {
                            loop_ec = ec;
                            loop_done = true;
                          }));
  auto j = co_await q.async_claim(5s, asio::use_awaitable);
  CHECK(j.id == id);
  CHECK(j.failures == 1);
  sig.emit(asio::cancellation_type::terminal);
  auto ended = co_await wait_until([&] { return loop_done; });
  CHECK(ended);
  CHECK(loop_ec == asio::error::operation_aborted);
}
