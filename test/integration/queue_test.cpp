// thoonk::queue against a real redis-server: order, priority, timeouts,
// wake-ups, coalesced getters, interop with the contract's plain commands.
#include "support/helpers.hpp"

#include <set>

using namespace thoonk::test;
using thoonk::test::run_coro;

FIXTURE_TEST_CASE("queue", "queue: FIFO order; high priority jumps the line",
                  "[queue][get][get_ids][length][open][put][put_many]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "queue");
  auto q = co_await thoonk::queue::async_open(f.c, f.name, asio::use_awaitable);
  auto a = co_await put_item(q, "a");
  auto b = co_await q.async_put("b", asio::use_awaitable);
  auto c = co_await q.async_put("c", asio::use_awaitable);
  auto x = co_await put_item(q, "x", thoonk::priority::high);
  std::vector<std::string> many{"m1", "m2"};
  auto mids = co_await q.async_put_many(many, thoonk::priority::normal, asio::use_awaitable);
  CHECK(mids.size() == 2);
  std::vector<std::string> urgent{"u1", "u2"};
  co_await q.async_put_many(urgent, thoonk::priority::high, asio::use_awaitable);

  auto len = co_await q.async_length(asio::use_awaitable);
  CHECK(len == 8);
  // Contract order (LRANGE 0 -1): the last element is the next one out.
  auto ids = co_await q.async_get_ids(asio::use_awaitable);
  REQUIRE(ids.size() == 8);
  CHECK(ids[0] == mids[1]);
  CHECK(ids[4] == a);
  CHECK(ids[5] == x);

  std::vector<std::string> got;
  for (int i = 0; i < 8; ++i) {
    auto it = co_await q.async_get(1s, asio::use_awaitable);
    got.push_back(it.item);
  }
  CHECK(got == std::vector<std::string>{"u1", "u2", "x", "a", "b", "c", "m1", "m2"});
  (void)b;
  (void)c;
  // An item got is gone from the server.
  auto items = co_await cmd(f.c.conn(), "HLEN", key("items", f.name));
  CHECK(items.integer == 0);
  auto puts = co_await cmd(f.c.conn(), "GET", key("publishes", f.name));
  CHECK(puts.str == "8");
}

FIXTURE_TEST_CASE("queue",
                  "queue: new ids count on from the put's clock x 1024, and a counter that "
                  "is gone starts afresh there",
                  "[queue][put][put_many]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "queue");
  auto q = co_await thoonk::queue::async_open(f.c, f.name, asio::use_awaitable);
  const auto counter = key("idincr", f.name);
  auto value = [&]() -> asio::awaitable<std::int64_t> {
    auto v = co_await cmd(f.c.conn(), "GET", counter);
    co_return std::stoll(v.str);
  };
  const auto t0 = thoonk::now_epoch_ms();
  co_await q.async_put("a", asio::use_awaitable);
  const auto first = co_await value();
  CHECK(first >= t0 * 1024 + 1);
  CHECK(first <= thoonk::now_epoch_ms() * 1024 + 1);
  std::vector<std::string> two{"b", "c"};
  co_await q.async_put_many(two, thoonk::priority::normal, asio::use_awaitable);
  const auto next = co_await value();
  CHECK(next == first + 2);
  // A counter that is gone (a queue deleted only in part, a plain DEL)
  // starts again from the clock, past every id it gave.
  co_await cmd(f.c.conn(), "DEL", counter);
  co_await next_millisecond();
  co_await q.async_put("d", asio::use_awaitable);
  const auto fresh = co_await value();
  CHECK(fresh > next);
  auto ids = co_await q.async_get_ids(asio::use_awaitable);
  CHECK(std::set<std::string>(ids.begin(), ids.end()).size() == 4);
}

FIXTURE_TEST_CASE(
    "queue", "queue: get on an empty queue fails with queue_empty after the timeout, not before",
    "[queue][get][put]") {
  auto q = co_await contract_queue(f);
  auto t0 = std::chrono::steady_clock::now();
  auto [ec, it] = co_await q.async_get(300ms, nothrow);
  auto waited = ms_since(t0);
  CHECK(ec == thoonk::error::queue_empty);
  CHECK(waited >= 300);

  // 0: one attempt. Empty: at once; not empty: the item.
  auto [ec0, it0] = co_await q.async_get(0ms, nothrow);
  CHECK(ec0 == thoonk::error::queue_empty);
  co_await q.async_put("here", asio::use_awaitable);
  auto [ec1, it1] = co_await q.async_get(0ms, nothrow);
  CHECK(!ec1);
  CHECK(it1.item == "here");
}

FIXTURE_TEST_CASE("queue", "queue: a waiting getter is woken by a put; many getters share fetches",
                  "[queue][get][open][put_many]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "queue");
  // A long poll interval: only the wake-up can explain a quick delivery.
  thoonk::queue_options opts;
  opts.poll_interval = 60s;
  auto q = co_await thoonk::queue::async_open(f.c, f.name, opts, asio::use_awaitable);

  constexpr int n = 50;
  std::multiset<std::string> got;
  int done = 0;
  const auto pops = co_await command_calls_on(f.c.conn(), f.name, "rpop");
  for (int i = 0; i < n; ++i) {
    asio::co_spawn(
        f.ioc,
        [&]() -> asio::awaitable<void> {
          auto [ec, it] = co_await q.async_get(15s, nothrow);
          if (!ec) got.insert(it.item);
          ++done;
        },
        asio::detached);
  }
  // The getters wait once a fetch has found the queue empty (they start at
  // this coroutine's next suspension, before any fetch).
  auto waiting = co_await ran_since(f.c.conn(), f.name, "rpop", pops);
  REQUIRE(waiting);
  CHECK(done == 0);
  // Another client puts.
  thoonk::client other(f.ioc.get_executor(), named_config());
  co_await other.async_connect(asio::use_awaitable);
  thoonk::queue q2(other, f.name);
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) items.push_back("item-" + std::to_string(i));
  auto t0 = std::chrono::steady_clock::now();
  co_await q2.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto all = co_await wait_until([&] { return done == n; }, 30s);
  CHECK(all);
  CHECK(done == n);
  CHECK(ms_since(t0) < 30000);  // well before the 60 s poll
  CHECK(got.size() == static_cast<std::size_t>(n));
  CHECK(std::set<std::string>(got.begin(), got.end()).size() == static_cast<std::size_t>(n));
}

FIXTURE_TEST_CASE("queue", "queue: a cancelled getter loses nothing",
                  "[queue][get][length][put_many]") {
  auto q = co_await contract_queue(f);
  // Cancel many getters while their fetch is in flight, with items there.
  std::vector<std::string> items{"1", "2", "3", "4", "5"};
  co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  asio::cancellation_signal sig;
  int aborted = 0, got = 0;
  asio::co_spawn(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        auto [ec, it] = co_await q.async_get(5s, asio::bind_cancellation_slot(sig.slot(), nothrow));
        if (ec == asio::error::operation_aborted) ++aborted;
        else if (!ec) ++got;
      },
      asio::detached);
  // Let the getter register and its fetch go out, then cancel it.
  for (int i = 0; i < 3; ++i) co_await asio::post(f.ioc, asio::use_awaitable);
  sig.emit(asio::cancellation_type::terminal);
  auto ended = co_await wait_until([&] { return aborted + got == 1; });
  CHECK(ended);
  // What a fetch in flight took for the cancelled getter goes back in the
  // background: wait until it is there.
  std::size_t len = 0;
  auto back = co_await wait_until([&]() -> asio::awaitable<bool> {
    len = co_await q.async_length(asio::use_awaitable);
    co_return len + got == 5;
  });
  CHECK(back);
  CHECK(len + got == 5);
  CHECK(aborted + got == 1);
  // Whatever was taken for the cancelled getter went back to the front.
  auto first = co_await q.async_get(1s, asio::use_awaitable);
  if (got == 0) CHECK(first.item == "1");
}

FIXTURE_TEST_CASE("queue", "queue: errors before and after I/O", "[queue][get][length][put]") {
  co_await f.c.async_connect(asio::use_awaitable);
  thoonk::queue q(f.c, f.name);
  auto [ec1, id1] = co_await q.async_put("x", nothrow);
  CHECK(ec1 == thoonk::error::feed_not_found);
  auto [ec2, it2] = co_await q.async_get(0ms, nothrow);
  CHECK(ec2 == thoonk::error::feed_not_found);
  co_await create_feed(f.c.conn(), f.name, "job");
  auto [ec3, n3] = co_await q.async_length(nothrow);
  CHECK(ec3 == thoonk::error::wrong_feed_type);
  thoonk::queue bad(f.c, "");
  auto [ec4, id4] = co_await bad.async_put("x", nothrow);
  CHECK(ec4 == thoonk::error::invalid_name);
}

FIXTURE_TEST_CASE("queue", "queue: interop with the contract's plain commands",
                  "[queue][get][put]") {
  auto q = co_await contract_queue(f);
  // Contract "Normal Priority Put", verbatim.
  {
    co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
      r.push("LPUSH", key("ids", f.name), "plain-id");
      r.push("HSET", key("items", f.name), "plain-id", "plain item");
      r.push("INCR", key("publishes", f.name));
    });
  }
  auto it = co_await q.async_get(2s, asio::use_awaitable);
  CHECK(it.id == "plain-id");
  CHECK(it.item == "plain item");

  // The library's put, taken with the contract's "Get" (RPOP instead of
  // BRPOP: the item is already there).
  auto id = co_await put_item(q, "library item");
  auto popped = co_await cmd(f.c.conn(), "RPOP", key("ids", f.name));
  CHECK(popped.str == id);
  auto resp = co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
    r.push("HGET", key("items", f.name), id);
    r.push("HDEL", key("items", f.name), id);
  });
  REQUIRE(resp.back().elements.size() == 2);
  CHECK(resp.back().elements[0].str == "library item");
}
