// Claim ahead (job_queue_options::prefetch): jobs claimed before a worker
// asks are handed out once each, released when nobody takes them, and
// released when the queue object closes. Real redis-server.
#include "support/helpers.hpp"

#include <set>

using namespace thoonk::test;
using thoonk::test::run_coro;
using thoonk::test::sleep_for;

namespace {

thoonk::job_queue_options prefetching(std::size_t n, std::chrono::milliseconds hold) {
  thoonk::job_queue_options o;
  o.prefetch = n;
  o.prefetch_hold = hold;
  return o;
}

// Polls counts until `done` holds (prefetches and releases are in flight
// in the background), at most 5 s; returns the last counts.
template <class Pred>
asio::awaitable<thoonk::job_counts> counts_when(thoonk::job_queue& q, Pred done) {
  thoonk::job_counts c;
  for (int i = 0; i < 500; ++i) {
    c = co_await q.async_counts(asio::use_awaitable);
    if (done(c)) break;
    co_await sleep_for(10ms);
  }
  co_return c;
}

}  // namespace

FIXTURE_TEST_CASE("jobs-prefetch", "job prefetch: jobs claimed ahead are handed out once each",
                  "[job][claim][counts][finish][put_many]") {
  auto q = co_await contract_job_queue(f, prefetching(8, 10s));
  std::vector<std::string> items;
  for (int i = 0; i < 40; ++i) items.push_back("job-" + std::to_string(i));
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  REQUIRE(ids.size() == 40);

  // The first claim is served, then up to 8 more are claimed ahead.
  auto first = co_await q.async_claim(1s, asio::use_awaitable);
  auto c1 = co_await counts_when(q, [](const auto& c) { return c.claimed == 9; });
  CHECK(c1.claimed == 9);
  CHECK(c1.waiting == 31);

  // Every job comes out exactly once, in order, with a live token.
  std::set<std::string> seen{first.id};
  std::vector<thoonk::claimed_job> got{first};
  for (int i = 1; i < 40; ++i) {
    auto j = co_await q.async_claim(1s, asio::use_awaitable);
    got.push_back(j);
    CHECK(seen.insert(j.id).second);
  }
  for (std::size_t i = 0; i < got.size(); ++i) CHECK(got[i].id == ids[i]);
  for (auto& j : got) {
    auto [ec] = co_await q.async_finish(j, nothrow);
    CHECK(!ec);
  }
  auto c2 = co_await q.async_counts(asio::use_awaitable);
  CHECK(c2.claimed == 0);
  CHECK(c2.waiting == 0);
  CHECK(c2.items == 0);
  CHECK(c2.finishes == 40);
}

FIXTURE_TEST_CASE("jobs-prefetch", "job prefetch: jobs nobody takes are released after the hold",
                  "[job][claim][failures][finish][put_many]") {
  auto q = co_await contract_job_queue(f, prefetching(4, 150ms));
  std::vector<std::string> items(10, "x");
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_finish(j, asio::use_awaitable);
  // Claimed ahead, not taken: back at the front of the line after the
  // hold, no failure counted, their claims (tokens) ended.
  auto c = co_await counts_when(q, [](const auto& c) { return c.claimed == 0; });
  CHECK(c.claimed == 0);
  CHECK(c.waiting == 9);
  auto next = co_await cmd(f.c.conn(), "LINDEX", key("ids", f.name), -1);
  CHECK(next.str == ids[1]);
  auto fails = co_await q.async_failures(ids[1], asio::use_awaitable);
  CHECK(fails == 0);
  // A token from the released claim is refused: the attempt ended.
  auto att = co_await cmd(f.c.conn(), "HGET", key("attempts", f.name), ids[1]);
  CHECK(att.str == "-1");
  auto again = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(again.id == ids[1]);
  CHECK(again.token == 2);
  const thoonk::claim_ref claim{again.id, 1};
  auto [ec] = co_await q.async_finish(claim, nothrow);
  CHECK(ec == thoonk::error::lost_claim);
}

FIXTURE_TEST_CASE("jobs-prefetch", "job prefetch: closing the queue releases what it holds",
                  "[job][claim][finish][put_many]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "job");
  std::vector<std::string> items(10, "x");
  thoonk::claimed_job j;
  {
    thoonk::job_queue q(f.c, f.name, prefetching(4, 60s));
    co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
    j = co_await q.async_claim(1s, asio::use_awaitable);
    auto c = co_await counts_when(q, [](const auto& c) { return c.claimed == 5; });
    CHECK(c.claimed == 5);
  }  // last handle gone: the object closes
  thoonk::job_queue other(f.c, f.name);
  auto c = co_await counts_when(other, [](const auto& c) { return c.claimed == 1; });
  CHECK(c.claimed == 1);  // only the job a worker holds
  CHECK(c.waiting == 9);
  auto [ec] = co_await other.async_finish(j, nothrow);
  CHECK(!ec);
}
