// Interop with clients that follow the contract (docs/contract.md) with plain commands
// (jobs put with plain commands exactly as the contract writes them are
// claimed and finished by the library; a job put by the library and claimed
// with the contract's plain commands is in the expected keys).
#include "support/helpers.hpp"

using namespace thoonk::test;
using thoonk::test::run_coro;

namespace {

// The contract's "Normal Priority Put", verbatim (MULTI ... EXEC).
asio::awaitable<void> plain_put(thoonk::connection& c, std::string name, std::string id,
                                std::string item) {
  co_await plain_transaction(c, [&](thoonk::request& r) {
    r.push("LPUSH", key("ids", name), id);
    r.push("INCR", key("publishes", name));
    r.push("HSET", key("items", name), id, item);
    r.push("ZADD", key("published", name), std::to_string(ms_now()), id);
  });
}

}  // namespace

FIXTURE_TEST_CASE("jobs-interop",
                  "job interop: jobs put with plain commands are claimed and finished",
                  "[job][claim][finish][get_result]") {
  // A short poll: plain puts send no wake-up.
  thoonk::job_queue_options opts;
  opts.poll_interval = 100ms;
  auto q = co_await contract_job_queue(f, opts);

  co_await plain_put(f.c.conn(), f.name, "0b9a5f7e-1111-4c3a-9d1e-000000000001", "first");
  auto j = co_await q.async_claim(2s, asio::use_awaitable);
  CHECK(j.id == "0b9a5f7e-1111-4c3a-9d1e-000000000001");
  CHECK(j.item == "first");
  CHECK(j.failures == 0);
  co_await q.async_finish(j, std::string("done"), asio::use_awaitable);
  auto snap = co_await snapshot(f.c.conn(), f.name);
  CHECK(snap ==
        "ids:[]\nitems:{}\nclaimed:[]\npublished:[]\ncancelled:{}\nstalled:{}\n"
        "publishes:bulk \"1\"\nfinishes:bulk \"1\"\nattempts:{}\nunaccounted:{}\n");
  auto r = co_await q.async_get_result(j.id, 1s, asio::use_awaitable);
  CHECK(r == "done");

  // A claimer already waiting picks up a plain put by the poll.
  bool got = false;
  const auto pops = co_await command_calls_on(f.c.conn(), f.name, "rpop");
  asio::co_spawn(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        auto [ec, j2] = co_await q.async_claim(10s, nothrow);
        got = !ec && j2.item == "second";
        if (got) co_await q.async_finish(j2, asio::use_awaitable);
      },
      asio::detached);
  // Waiting: its first attempt found the queue empty.
  auto waiting = co_await ran_since(f.c.conn(), f.name, "rpop", pops);
  REQUIRE(waiting);
  co_await plain_put(f.c.conn(), f.name, "0b9a5f7e-1111-4c3a-9d1e-000000000002", "second");
  auto polled = co_await wait_until([&] { return got; });
  CHECK(polled);
  CHECK(got);
}

JOB_QUEUE_TEST_CASE("jobs-interop",
                    "job interop: jobs put by the library work with the contract's plain commands",
                    "[job][counts][finish][get_result][put]") {
  auto id = co_await put_item(q, "library job");

  // Put: in feed.ids and feed.items, counted. feed.published (read by no
  // contract operation) is written only with the queue config published=1.
  auto ids = co_await cmd(f.c.conn(), "LRANGE", key("ids", f.name), 0, -1);
  REQUIRE(ids.elements.size() == 1);
  CHECK(ids.elements[0].str == id);
  auto item = co_await cmd(f.c.conn(), "HGET", key("items", f.name), id);
  CHECK(item.str == "library job");
  auto pub = co_await cmd(f.c.conn(), "ZSCORE", key("published", f.name), id);
  CHECK(pub.is_null());
  auto puts = co_await cmd(f.c.conn(), "GET", key("publishes", f.name));
  CHECK(puts.str == "1");

  // Contract "Get" (RPOP for BRPOP: the job is there), then MULTI.
  auto popped = co_await cmd(f.c.conn(), "RPOP", key("ids", f.name));
  CHECK(popped.str == id);
  {
    auto resp = co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
      r.push("ZADD", key("claimed", f.name), std::to_string(ms_now()), id);
      r.push("HGET", key("items", f.name), id);
    });
    REQUIRE(resp.back().elements.size() == 2);
    CHECK(resp.back().elements[1].str == "library job");
  }
  auto claimed = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", f.name), id);
  CHECK(!claimed.is_null());
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 0);
  CHECK(counts.claimed == 1);
  CHECK(counts.items == 1);

  // Its claim carries no token of ours: the library cannot finish it ...
  const thoonk::claim_ref claim{id, 1};
  auto [ec] = co_await q.async_finish(claim, nothrow);
  CHECK(ec == thoonk::error::lost_claim);

  // ... but sees the plain client's "Finish" with a result.
  const auto reads = co_await command_calls_on(f.c.conn(), f.name, "lindex");
  auto result = result_in_background(f.ioc, q, id);
  // Waiting: subscribed to the finish channel, then a first look at the
  // stored result.
  auto waiting = co_await ran_since(f.c.conn(), f.name, "lindex", reads);
  REQUIRE(waiting);
  {
    co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
      r.push("ZREM", key("claimed", f.name), id);
      r.push("HDEL", key("cancelled", f.name), id);
      r.push("INCR", key("finishes", f.name));
      r.push(notify_command(), job_finish_channel(f.name),
             id + std::string(1, '\0') + "plain result");
      r.push("HDEL", key("items", f.name), id);
    });
  }
  auto finished = co_await wait_until([&] { return result->done; });
  CHECK(finished);
  CHECK(result->done);
  CHECK(result->value == "plain result");
  counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.items == 0);
  CHECK(counts.finishes == 1);
}

JOB_QUEUE_TEST_CASE("jobs-interop", "job interop: plain Cancel / Stall / Retry on library claims",
                    "[job][claim][counts][finish][put][retry]") {
  auto [id, j1] = co_await put_and_claim(q, "x");

  // Contract "Cancel" by a plain client.
  {
    co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
      r.push("HINCRBY", key("cancelled", f.name), id, 1);
      r.push("LPUSH", key("ids", f.name), id);
      r.push("ZREM", key("claimed", f.name), id);
    });
  }
  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j2.id == id);
  CHECK(j2.failures == 1);
  CHECK(j2.token > j1.token);
  const thoonk::claim_ref claim2{id, j1.token};
  auto [ec] = co_await q.async_finish(claim2, nothrow);
  CHECK(ec == thoonk::error::lost_claim);

  // Contract "Stall", then the library's retry.
  {
    co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
      r.push("ZREM", key("claimed", f.name), id);
      r.push("HDEL", key("cancelled", f.name), id);
      r.push("SADD", key("stalled", f.name), id);
      r.push("ZREM", key("published", f.name), id);
    });
  }
  const thoonk::claim_ref claim3{id, j2.token};
  auto [ec2] = co_await q.async_finish(claim3, nothrow);
  CHECK(ec2 == thoonk::error::job_not_claimed);
  co_await q.async_retry(id, asio::use_awaitable);
  auto j3 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j3.id == id);
  CHECK(j3.failures == 0);
  co_await q.async_finish(j3, asio::use_awaitable);
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.items == 0);
  CHECK(counts.finishes == 1);
}
