// Job queue flows against a real redis-server.
#include "support/helpers.hpp"

using namespace thoonk::test;
using thoonk::test::run_coro;

JOB_QUEUE_TEST_CASE("jobs-flow", "job: put, claim, finish leaves nothing behind",
                    "[job][claim][counts][finish][get_ids][put]") {
  auto id = co_await put_item(q, "payload");
  CHECK(!id.empty());
  auto waiting = co_await llen(f.c.conn(), key("ids", f.name));
  CHECK(waiting == 1);
  // By default the put-time index (feed.published) is not written.
  auto score = co_await cmd(f.c.conn(), "ZSCORE", key("published", f.name), id);
  CHECK(score.is_null());

  auto ids = co_await q.async_get_ids(asio::use_awaitable);
  CHECK(ids == std::vector<std::string>{id});

  auto job = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(job.id == id);
  CHECK(job.item == "payload");
  CHECK(job.failures == 0);
  CHECK(job.token == 1);
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 0);
  CHECK(counts.claimed == 1);
  CHECK(counts.items == 1);
  CHECK(counts.puts == 1);

  co_await q.async_finish(job, asio::use_awaitable);
  ids = co_await q.async_get_ids(asio::use_awaitable);
  CHECK(ids.empty());
  counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 0);
  CHECK(counts.claimed == 0);
  CHECK(counts.stalled == 0);
  CHECK(counts.items == 0);
  CHECK(counts.finishes == 1);
  // Raw keys: only the counters remain.
  auto snap = co_await snapshot(f.c.conn(), f.name);
  CHECK(snap ==
        "ids:[]\nitems:{}\nclaimed:[]\npublished:[]\ncancelled:{}\nstalled:{}\n"
        "publishes:bulk \"1\"\nfinishes:bulk \"1\"\nattempts:{}\nunaccounted:{}\n");
}

JOB_QUEUE_TEST_CASE("jobs-flow", "job: cancel puts it back with the failure count",
                    "[job][cancel][claim][failures][finish][put]") {
  auto [id, j1] = co_await put_and_claim(q, "x");
  auto fails = co_await q.async_cancel(j1, asio::use_awaitable);
  CHECK(fails == 1);
  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j2.id == id);
  CHECK(j2.failures == 1);
  CHECK(j2.token > j1.token);
  fails = co_await q.async_cancel(j2, asio::use_awaitable);
  CHECK(fails == 2);
  auto j3 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j3.id == id);
  CHECK(j3.failures == 2);
  fails = co_await q.async_failures(id, asio::use_awaitable);
  CHECK(fails == 2);
  // The old tokens are dead.
  const thoonk::claim_ref claim{id, j1.token};
  auto [ec] = co_await q.async_finish(claim, nothrow);
  CHECK(ec == thoonk::error::lost_claim);
  const thoonk::claim_ref claim2{id, j3.token};
  co_await q.async_finish(claim2, asio::use_awaitable);
  auto [ec2, n] = co_await q.async_failures(id, nothrow);
  CHECK(ec2 == thoonk::error::job_not_found);
}

JOB_QUEUE_TEST_CASE("jobs-flow", "job: stall, retry, claim, finish with a result",
                    "[job][claim][counts][finish][get_result][put][retry][stall][subscribe]") {
  std::vector<std::string> events;
  auto sub = co_await subscribe_notifications(
      f.c.sub(), job_finish_channel(f.name),
      [&](const thoonk::message& m) { events.emplace_back(m.payload); });

  auto [id, j1] = co_await put_and_claim(q, "work");
  co_await q.async_stall(j1, asio::use_awaitable);
  co_await expect_only_stalled(f, q, id);
  // Nothing to claim while it is stalled.
  auto [eec, none] = co_await q.async_claim(0ms, nothrow);
  CHECK(eec == thoonk::error::queue_empty);

  co_await q.async_retry(id, asio::use_awaitable);

  // A result waiter that starts before the finish ...
  auto early = result_in_background(f.ioc, q, id);

  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j2.id == id);
  CHECK(j2.token > j1.token);
  co_await q.async_finish(j2, std::string("the result"), asio::use_awaitable);
  // ... and one that starts after it.
  auto late = co_await q.async_get_result(id, 1s, asio::use_awaitable);
  CHECK(late == "the result");
  auto both = co_await wait_until([&] { return early->done && !events.empty(); });
  CHECK(both);
  co_await fence(f.c.sub(), f.c.conn(), f.name);  // one finish message, no more
  CHECK(early->done);
  CHECK(early->value == "the result");
  REQUIRE(events.size() == 1);
  CHECK(events[0] == id + std::string("\0the result", 11));
  // The durable result with its expiry.
  auto rk = key("jobfinished", f.name) + std::string(1, '\0') + id;
  auto stored = co_await cmd(f.c.conn(), "LRANGE", rk, 0, -1);
  CHECK(stored.elements.size() == 1);
  auto pttl = co_await cmd(f.c.conn(), "PTTL", rk);
  CHECK(pttl.integer > 0);
  auto [tec, nothing] = co_await q.async_get_result("no-such-job", 200ms, nothrow);
  CHECK(tec == thoonk::error::result_timeout);
}

JOB_QUEUE_TEST_CASE("jobs-flow", "job: retract removes a job from every key, in every state",
                    "[job][cancel][claim][finish][put][retract][stall]") {
  const std::string empty =
      "ids:[]\nitems:{}\nclaimed:[]\npublished:[]\ncancelled:{}\nstalled:{}\n";

  // waiting
  auto a = co_await put_item(q, "a");
  co_await q.async_retract(a, asio::use_awaitable);
  auto snap = co_await snapshot(f.c.conn(), f.name);
  CHECK(snap.starts_with(empty));
  // claimed, with a failure counted
  auto b = co_await put_item(q, "b");
  auto jb = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_cancel(jb, asio::use_awaitable);
  jb = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_retract(b, asio::use_awaitable);
  snap = co_await snapshot(f.c.conn(), f.name);
  CHECK(snap.starts_with(empty));
  auto [ec] = co_await q.async_finish(jb, nothrow);
  CHECK(ec == thoonk::error::job_not_found);
  // stalled
  auto c = co_await put_item(q, "c");
  auto jc = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_stall(jc, asio::use_awaitable);
  co_await q.async_retract(c, asio::use_awaitable);
  snap = co_await snapshot(f.c.conn(), f.name);
  CHECK(snap.starts_with(empty));
  CHECK(snap.find("attempts:{}") != std::string::npos);
  auto [ec2] = co_await q.async_retract(c, nothrow);
  CHECK(ec2 == thoonk::error::job_not_found);
}

JOB_QUEUE_TEST_CASE("jobs-flow", "job: high priority jumps the line; put_many keeps order",
                    "[job][claim][finish][put][put_many]") {
  std::vector<std::string> items{"1", "2", "3"};
  co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  co_await q.async_put("urgent", thoonk::priority::high, asio::use_awaitable);
  std::vector<std::string> hi{"h1", "h2"};
  co_await q.async_put_many(hi, thoonk::priority::high, asio::use_awaitable);
  std::vector<std::string> got;
  for (int i = 0; i < 6; ++i) {
    auto j = co_await q.async_claim(1s, asio::use_awaitable);
    got.push_back(j.item);
    co_await q.async_finish(j, asio::use_awaitable);
  }
  CHECK(got == std::vector<std::string>{"h1", "h2", "urgent", "1", "2", "3"});
}

JOB_QUEUE_TEST_CASE("jobs-flow", "job: heartbeat renews the claim time",
                    "[job][claim][heartbeat][put]") {
  co_await q.async_put("x", asio::use_awaitable);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  auto before = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", f.name), j.id);
  co_await next_millisecond();
  co_await q.async_heartbeat(j, asio::use_awaitable);
  auto after = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", f.name), j.id);
  auto num = [](const thoonk::resp3::value& v) { return v.str.empty() ? v.dbl : std::stod(v.str); };
  CHECK(num(after) > num(before));
  const thoonk::claim_ref claim3{j.id, j.token + 1};
  auto [ec] = co_await q.async_heartbeat(claim3, nothrow);
  CHECK(ec == thoonk::error::lost_claim);
}

JOB_QUEUE_TEST_CASE("jobs-flow", "job: heartbeat_many renews a worker's claims in one call",
                    "[job][claim][finish][heartbeat_many][put_many]") {
  std::vector<std::string> items{"a", "b", "c", "d"};
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto a = co_await q.async_claim(1s, asio::use_awaitable);
  auto b = co_await q.async_claim(1s, asio::use_awaitable);
  auto c = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_finish(b, asio::use_awaitable);
  auto num = [](const thoonk::resp3::value& v) { return v.str.empty() ? v.dbl : std::stod(v.str); };
  auto before = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", f.name), a.id);
  auto c_before = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", f.name), c.id);
  co_await next_millisecond();

  std::vector<thoonk::claim_ref> held{{a.id, a.token},      // renewed
                                      {b.id, b.token},      // finished: gone
                                      {c.id, c.token + 1},  // not its token
                                      {ids[3], 1},          // waiting
                                      {"no-such-job", 1}};  // unknown
  auto st = co_await q.async_heartbeat_many(held, asio::use_awaitable);
  REQUIRE(st.size() == 5);
  CHECK(!st[0]);
  CHECK(st[1] == thoonk::error::job_not_found);
  CHECK(st[2] == thoonk::error::lost_claim);
  CHECK(st[3] == thoonk::error::job_not_claimed);
  CHECK(st[4] == thoonk::error::job_not_found);
  auto after = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", f.name), a.id);
  CHECK(num(after) > num(before));
  // A refused renewal changes nothing.
  auto c_after = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", f.name), c.id);
  CHECK(num(c_after) == num(c_before));
  auto waiting = co_await llen(f.c.conn(), key("ids", f.name));
  CHECK(waiting == 1);

  // A bad id fails the whole call before any I/O.
  std::vector<thoonk::claim_ref> bad{{a.id, a.token}, {"", 1}};
  auto [ec, none] = co_await q.async_heartbeat_many(bad, nothrow);
  CHECK(ec == thoonk::error::invalid_id);
  CHECK(none.empty());
  // More than one script's worth: chunks, statuses in order.
  std::vector<thoonk::claim_ref> many(2500, thoonk::claim_ref(a.id, a.token));
  many.back() = thoonk::claim_ref(c.id, c.token);
  auto st2 = co_await q.async_heartbeat_many(many, asio::use_awaitable);
  REQUIRE(st2.size() == 2500);
  CHECK(std::all_of(st2.begin(), st2.end(), [](error_code e) { return !e; }));
}

FIXTURE_TEST_CASE("jobs-flow", "job: names, ids and types are checked",
                  "[job][claim][finish][open][put]") {
  co_await f.c.async_connect(asio::use_awaitable);
  {
    thoonk::job_queue bad(f.c, std::string("a\0b", 3));
    auto [ec, id] = co_await bad.async_put("x", nothrow);
    CHECK(ec == thoonk::error::invalid_name);
  }
  thoonk::job_queue missing(f.c, f.name);
  auto [ec1, id1] = co_await missing.async_put("x", nothrow);
  CHECK(ec1 == thoonk::error::feed_not_found);
  auto [ec2, j2] = co_await missing.async_claim(0ms, nothrow);
  CHECK(ec2 == thoonk::error::feed_not_found);
  auto [ec3, opened] = co_await thoonk::job_queue::async_open(f.c, f.name, nothrow);
  CHECK(ec3 == thoonk::error::feed_not_found);

  co_await create_feed(f.c.conn(), f.name, "queue");
  auto [ec4, id4] = co_await missing.async_put("x", nothrow);
  CHECK(ec4 == thoonk::error::wrong_feed_type);
  const thoonk::claim_ref claim4{"", 1};
  auto [ec5] = co_await missing.async_finish(claim4, nothrow);
  CHECK(ec5 == thoonk::error::invalid_id);
  const thoonk::claim_ref claim5{std::string("a\0b", 3), 1};
  auto [ec6] = co_await missing.async_finish(claim5, nothrow);
  CHECK(ec6 == thoonk::error::invalid_id);
}

FIXTURE_TEST_CASE("jobs-flow", "job: with published=1 the contract's put-time index is kept",
                  "[job][claim][finish][put][retry][stall]") {
  fields cfg{{"published", "1"}};
  auto q = co_await contract_job_queue(f, cfg);
  auto before = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  auto id = co_await put_item(q, "work");
  auto score = co_await cmd(f.c.conn(), "ZSCORE", key("published", f.name), id);
  REQUIRE(!score.is_null());
  const double put_ms = score.is_string() ? std::stod(score.str) : score.dbl;
  CHECK(put_ms >= static_cast<double>(before));
  // Stall drops it (contract "Stall"), retry writes it again ("Retry").
  auto j1 = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_stall(j1, asio::use_awaitable);
  score = co_await cmd(f.c.conn(), "ZSCORE", key("published", f.name), id);
  CHECK(score.is_null());
  co_await q.async_retry(id, asio::use_awaitable);
  score = co_await cmd(f.c.conn(), "ZSCORE", key("published", f.name), id);
  CHECK(!score.is_null());
  // Finish drops it too (the contract's finish would leak it).
  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_finish(j2, asio::use_awaitable);
  auto card = co_await cmd(f.c.conn(), "ZCARD", key("published", f.name));
  CHECK(card.integer == 0);
}

JOB_QUEUE_TEST_CASE("jobs-flow", "job: a finish cancelled before it is sent changes nothing",
                    "[job][claim][counts][finish][put]") {
  co_await q.async_put("work", asio::use_awaitable);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);

  // Finishes of one tick are sent together at the end of the tick, so a
  // cancellation in the same tick reaches this one before it is sent.
  asio::cancellation_signal sig;
  error_code got = thoonk::error::unexpected_type;
  bool called = false;
  q.async_finish(j, asio::bind_cancellation_slot(sig.slot(), [&](error_code ec) {
                   got = ec;
                   called = true;
                 }));
  sig.emit(asio::cancellation_type::terminal);
  auto ended = co_await wait_until([&] { return called; });
  CHECK(ended);
  CHECK(called);
  CHECK(got == asio::error::operation_aborted);
  // A finish behind it through the same batch queue, which changes
  // nothing: had the cancelled finish been sent, it would have gone first.
  const thoonk::claim_ref unknown{"no-such-job", 1};
  auto [fence_ec] = co_await q.async_finish(unknown, nothrow);
  CHECK(fence_ec == thoonk::error::job_not_found);
  auto c = co_await q.async_counts(asio::use_awaitable);
  CHECK(c.claimed == 1);
  CHECK(c.finishes == 0);
  // The claim is intact: finishing it now works, once.
  auto [ec1] = co_await q.async_finish(j, nothrow);
  CHECK(!ec1);
  auto [ec2] = co_await q.async_finish(j, nothrow);
  CHECK(ec2 == thoonk::error::job_not_found);
}
