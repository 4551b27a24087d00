// Feed (zset of ids scored by publish ms + items hash) against a real
// redis-server: every operation, the keys and payloads byte for byte,
// max_length, concurrency and bad input.
#include "support/helpers.hpp"

#include <set>

using namespace thoonk::test;
using thoonk::feed_type;

namespace {}  // namespace

FEED_TEST_CASE(
    "order", feed_type::feed, thoonk::feed_config{}, "feed: publish order, reads, has_id, length",
    "[feed][delete_feed][get_all][get_ids][get_item][get_items][has_id][length][open][publish]") {
  auto f = co_await thoonk::feed::async_open(c, name, asio::use_awaitable);

  std::vector<std::string> ids;
  for (int i = 0; i < 5; ++i) {
    auto r = co_await f.async_publish("item-" + std::to_string(i), asio::use_awaitable);
    CHECK(!r.edited);
    CHECK(r.evicted.empty());
    CHECK(r.id.size() == 36);  // generated: a UUID
    ids.push_back(r.id);
  }
  auto r2 = co_await f.async_publish(thoonk::item_id("given-id"), "item-5", asio::use_awaitable);
  CHECK(r2.id == "given-id");
  ids.push_back("given-id");

  // Scores are ms and may tie; the feed's order is (score, id). Pin the
  // expected order with distinct scores for a deterministic check.
  auto got = co_await f.async_get_ids(asio::use_awaitable);
  std::vector<std::string> by_raw;
  auto z = co_await cmd(c.conn(), "ZRANGE", key("ids", name), 0, -1);
  for (auto& e : z.elements) by_raw.push_back(e.str);
  CHECK(got == by_raw);
  CHECK(std::set<std::string>(got.begin(), got.end()) ==
        std::set<std::string>(ids.begin(), ids.end()));

  auto r1_ = co_await f.async_length(asio::use_awaitable);
  CHECK(r1_ == 6);
  auto r2_ = co_await f.async_has_id("given-id", asio::use_awaitable);
  CHECK(r2_);
  auto r3_ = co_await f.async_has_id("nope", asio::use_awaitable);
  CHECK(!r3_);
  auto r4_ = co_await f.async_get_item(ids[2], asio::use_awaitable);
  CHECK(r4_ == std::optional<std::string>("item-2"));
  auto r5_ = co_await f.async_get_item("nope", asio::use_awaitable);
  CHECK(!r5_);
  std::vector<std::string> some{ids[4], "nope", ids[0]};
  auto items = co_await f.async_get_items(some, asio::use_awaitable);
  CHECK(items == std::vector<std::optional<std::string>>{"item-4", std::nullopt, "item-0"});
  auto none = co_await f.async_get_items(std::vector<std::string>(), asio::use_awaitable);
  CHECK(none.empty());
  auto all = co_await f.async_get_all(asio::use_awaitable);
  REQUIRE(all.size() == 6);
  for (std::size_t i = 0; i < all.size(); ++i) {
    CHECK(all[i].id == got[i]);
    auto one = co_await f.async_get_item(got[i], asio::use_awaitable);
    CHECK(one == std::optional<std::string>(all[i].item));
  }
}

FEED_TEST_CASE("order-ms", feed_type::feed, thoonk::feed_config{},
               "feed: ids come out in publish order when publish times differ",
               "[feed][delete_feed][get_all][get_ids][publish]") {
  thoonk::feed f(c, name);
  std::vector<std::string> ids;
  for (int i = 0; i < 4; ++i) {
    // Ids chosen so that lexicographic order is the reverse of publish order.
    ids.push_back(std::string(1, static_cast<char>('z' - i)));
    co_await f.async_publish(thoonk::item_id(ids.back()), "v", asio::use_awaitable);
    co_await sleep_for(3ms);  // distinct millisecond scores
  }
  auto r6_ = co_await f.async_get_ids(asio::use_awaitable);
  CHECK(r6_ == ids);
  auto all = co_await f.async_get_all(asio::use_awaitable);
  std::vector<std::string> all_ids;
  for (auto& it : all) all_ids.push_back(it.id);
  CHECK(all_ids == ids);
}

FEED_TEST_CASE("wire", feed_type::feed, max_len(2),
               "feed: raw wire: keys, ms scores, counters and payloads byte for byte",
               "[feed][delete_feed][publish][retract]") {
  auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);
  thoonk::feed f(c, name);
  const std::string binary("a\0b\r\n\xff", 6);  // items are arbitrary bytes

  auto t0 = ms_now();
  auto r1 = co_await f.async_publish(thoonk::item_id("id1"), binary, asio::use_awaitable);
  auto t1 = ms_now();
  auto score = co_await cmd(c.conn(), "ZSCORE", key("ids", name), "id1");
  // RESP3 ZSCORE is a double; the stored value is an integer ms timestamp.
  double s = score.type == thoonk::resp3::type::double_number ? score.dbl : std::stod(score.str);
  CHECK(s == static_cast<double>(static_cast<std::int64_t>(s)));
  CHECK(static_cast<std::int64_t>(s) >= t0);
  CHECK(static_cast<std::int64_t>(s) <= t1);
  auto item = co_await cmd(c.conn(), "HGET", key("items", name), "id1");
  CHECK(item.str == binary);
  auto pubs = co_await cmd(c.conn(), "GET", key("publishes", name));
  CHECK(pubs.str == "1");

  // Distinct milliseconds, so the feed order is the publish order.
  co_await sleep_for(3ms);
  co_await f.async_publish(thoonk::item_id("id2"), "two", asio::use_awaitable);
  co_await sleep_for(3ms);
  auto e =
      co_await f.async_publish(thoonk::item_id("id1"), "one-edited", asio::use_awaitable);  // edit
  CHECK(e.edited);
  co_await sleep_for(3ms);
  auto r3 =
      co_await f.async_publish(thoonk::item_id("id3"), "three", asio::use_awaitable);  // evicts id2
  CHECK(r3.evicted == std::vector<std::string>{"id2"});
  auto gone = co_await f.async_retract("id1", asio::use_awaitable);
  CHECK(gone);

  auto ids = co_await cmd(c.conn(), "ZRANGE", key("ids", name), 0, -1);
  REQUIRE(ids.elements.size() == 1);
  CHECK(ids.elements[0].str == "id3");
  auto hkeys = co_await cmd(c.conn(), "HKEYS", key("items", name));
  REQUIRE(hkeys.elements.size() == 1);
  CHECK(hkeys.elements[0].str == "id3");
  pubs = co_await cmd(c.conn(), "GET", key("publishes", name));
  CHECK(pubs.str == "4");  // publishes and edits count; retracts do not

  auto r7_ = co_await wait_until([&] { return cap->msgs.size() >= 6; });
  CHECK(r7_);
  co_await settle();
  std::vector<msg> expected{
      {feed_channel("publish", name), nul_join("id1", binary)},
      {feed_channel("publish", name), nul_join("id2", "two")},
      {feed_channel("edit", name), nul_join("id1", "one-edited")},
      {feed_channel("retract", name), "id2"},  // eviction, announced before the publish
      {feed_channel("publish", name), nul_join("id3", "three")},
      {feed_channel("retract", name), "id1"},
  };
  CHECK(cap->msgs == expected);
}

FEED_TEST_CASE("edit", feed_type::feed, max_len(3),
               "feed: edit keeps the length and moves the item to the newest",
               "[feed][delete_feed][get_ids][get_item][length][publish]") {
  auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);
  thoonk::feed f(c, name);
  std::vector<std::string> abc{"a", "b", "c"};
  for (const auto& id : abc) {
    co_await f.async_publish(thoonk::item_id(id), "v-" + id, asio::use_awaitable);
    co_await sleep_for(3ms);
  }
  auto r = co_await f.async_publish(thoonk::item_id("a"), "v-a2", asio::use_awaitable);
  CHECK(r.edited);
  CHECK(r.evicted.empty());  // full feed, but an edit evicts nothing
  auto r8_ = co_await f.async_length(asio::use_awaitable);
  CHECK(r8_ == 3);
  {
    auto got_ = co_await f.async_get_ids(asio::use_awaitable);
    CHECK(got_ == std::vector<std::string>{"b", "c", "a"});
  }
  auto r9_ = co_await f.async_get_item("a", asio::use_awaitable);
  CHECK(r9_ == std::optional<std::string>("v-a2"));
  auto r10_ = co_await wait_until([&] { return cap->msgs.size() >= 4; });
  CHECK(r10_);
  co_await settle();
  REQUIRE(cap->msgs.size() == 4);
  CHECK(cap->msgs[3] == msg{feed_channel("edit", name), nul_join("a", "v-a2")});
}

FEED_TEST_CASE("max", feed_type::feed, max_len(5),
               "feed: max_length 5 with six publishes keeps the newest five, one retract",
               "[feed][delete_feed][get_ids][publish][set_config]") {
  auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);
  thoonk::feed f(c, name);
  std::vector<std::string> ids;
  std::vector<std::string> evicted;
  for (int i = 0; i < 6; ++i) {
    ids.push_back("id" + std::to_string(i));
    auto r = co_await f.async_publish(thoonk::item_id(ids.back()), "v" + std::to_string(i),
                                      asio::use_awaitable);
    evicted.insert(evicted.end(), r.evicted.begin(), r.evicted.end());
    co_await sleep_for(3ms);
  }
  CHECK(evicted == std::vector<std::string>{"id0"});
  auto kept = co_await f.async_get_ids(asio::use_awaitable);
  CHECK(kept == std::vector<std::string>(ids.begin() + 1, ids.end()));
  auto hlen = co_await cmd(c.conn(), "HLEN", key("items", name));
  CHECK(hlen.integer == 5);
  auto r11_ = co_await wait_until([&] { return cap->msgs.size() >= 7; });
  CHECK(r11_);
  co_await settle();
  auto retracts = cap->on(feed_channel("retract", name));
  CHECK(retracts == std::vector<msg>{{feed_channel("retract", name), "id0"}});
  CHECK(cap->on(feed_channel("publish", name)).size() == 6);

  // Lowering max_length trims on the next publish of a new id.
  co_await c.async_set_config(name, "max_length", "2", asio::use_awaitable);
  auto r = co_await f.async_publish(thoonk::item_id("id6"), "v6", asio::use_awaitable);
  CHECK(r.evicted == std::vector<std::string>{"id1", "id2", "id3", "id4"});
  {
    auto got_ = co_await f.async_get_ids(asio::use_awaitable);
    CHECK(got_ == std::vector<std::string>{"id5", "id6"});
  }
}

FEED_TEST_CASE("retract", feed_type::feed, thoonk::feed_config{},
               "feed: retract of a missing id is a no-op reported as such",
               "[feed][delete_feed][length][publish][retract]") {
  auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);
  thoonk::feed f(c, name);
  co_await f.async_publish(thoonk::item_id("x"), "1", asio::use_awaitable);
  auto r12_ = co_await f.async_retract("x", asio::use_awaitable);
  CHECK(r12_);
  auto r13_ = co_await f.async_retract("x", asio::use_awaitable);
  CHECK(!r13_);
  auto r14_ = co_await f.async_retract("never", asio::use_awaitable);
  CHECK(!r14_);
  auto r15_ = co_await f.async_length(asio::use_awaitable);
  CHECK(r15_ == 0);
  auto r16_ = co_await wait_until([&] { return cap->msgs.size() >= 2; });
  CHECK(r16_);
  co_await settle();
  CHECK(cap->msgs == std::vector<msg>{{feed_channel("publish", name), nul_join("x", "1")},
                                      {feed_channel("retract", name), "x"}});
}

TEST_CASE("feed: 100 coroutines publishing with max_length leave exactly max_length items",
          "[feed][concurrency][delete_feed][get_all][get_ids][publish]") {
  fixture fx;
  auto& c = fx.c;
  run_coro(
      fx.ioc,
      [&]() -> asio::awaitable<void> {
        co_await c.async_connect(asio::use_awaitable);
        constexpr int max_length = 25, writers = 100, per_writer = 10;
        auto name = co_await make_feed(c, "conc", feed_type::feed, max_len(max_length));
        auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);
        thoonk::feed f(c, name);
        int done = 0, failures = 0, evictions = 0;
        for (int w = 0; w < writers; ++w) {
          asio::co_spawn(
              fx.ioc,
              [&, w]() -> asio::awaitable<void> {
                for (int i = 0; i < per_writer; ++i) {
                  // Some writers reuse ids: edits interleave with new publishes.
                  std::string id = (w % 10 == 0 && i % 2 == 1)
                                       ? "w" + std::to_string(w)
                                       : "w" + std::to_string(w) + "-" + std::to_string(i);
                  auto [ec, r] =
                      co_await f.async_publish(thoonk::item_id(id), "item of " + id, nothrow);
                  if (ec) ++failures;
                  evictions += static_cast<int>(r.evicted.size());
                }
                ++done;
              },
              asio::detached);
        }
        auto r17_ = co_await wait_until([&] { return done == writers; }, 30s);
        CHECK(r17_);
        CHECK(failures == 0);
        auto ids = co_await f.async_get_ids(asio::use_awaitable);
        CHECK(ids.size() == max_length);
        auto hkeys = co_await cmd(c.conn(), "HKEYS", key("items", name));
        std::set<std::string> in_hash, in_zset(ids.begin(), ids.end());
        for (auto& e : hkeys.elements) in_hash.insert(e.str);
        CHECK(in_hash == in_zset);  // no orphaned item, no id without an item
        auto all = co_await f.async_get_all(asio::use_awaitable);
        CHECK(all.size() == max_length);
        for (auto& it : all) CHECK(it.item == "item of " + it.id);
        // Every eviction was announced once, and every announced id is gone.
        auto pubs = co_await cmd(c.conn(), "GET", key("publishes", name));
        CHECK(pubs.str == std::to_string(writers * per_writer));
        bool all_retracts = co_await wait_until([&] {
          return static_cast<int>(cap->on(feed_channel("retract", name)).size()) == evictions &&
                 cap->on(feed_channel("publish", name)).size() +
                         cap->on(feed_channel("edit", name)).size() ==
                     writers * per_writer;
        });
        CHECK(all_retracts);
        // Replaying the notifications in order rebuilds exactly the final feed:
        // every retract and edit names an id present at that point.
        std::set<std::string> present;
        int inconsistent = 0;
        for (auto& [ch, payload] : cap->msgs) {
          auto id = payload.substr(0, payload.find('\0'));
          if (ch == feed_channel("publish", name)) inconsistent += !present.insert(id).second;
          else if (ch == feed_channel("edit", name)) inconsistent += !present.contains(id);
          else if (ch == feed_channel("retract", name)) inconsistent += present.erase(id) != 1;
        }
        CHECK(inconsistent == 0);
        CHECK(present == in_zset);
        co_await c.async_delete_feed(name, asio::use_awaitable);
        fx.raw.stop();
        c.stop();
      },
      60s);
}

TEST_CASE("feed: bad ids and oversized items are refused before any I/O",
          "[feed][delete_feed][get_item][get_items][has_id][publish][retract]") {
  asio::io_context ioc;
  auto cfg = test_config();
  cfg.max_item_size = 16;
  cfg.max_id_length = 8;
  thoonk::client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    auto name = co_await make_feed(c, "bad", feed_type::feed);
    thoonk::feed f(c, name);
    auto before = c.conn().stats().requests;
    const std::string nul_id("a\0b", 3);
    std::vector<std::string> bad_ids{std::string(), nul_id, std::string(9, 'i')};
    for (const std::string& bad : bad_ids) {
      auto [e1, r1] = co_await f.async_publish(thoonk::item_id(bad), "x", nothrow);
      CHECK(e1 == thoonk::error::invalid_id);
      auto [e2, r2] = co_await f.async_retract(bad, nothrow);
      CHECK(e2 == thoonk::error::invalid_id);
      auto [e3, r3] = co_await f.async_get_item(bad, nothrow);
      CHECK(e3 == thoonk::error::invalid_id);
      std::vector<std::string> with_bad{"ok", bad};
      auto [e4, r4] = co_await f.async_get_items(with_bad, nothrow);
      CHECK(e4 == thoonk::error::invalid_id);
      auto [e5, r5] = co_await f.async_has_id(bad, nothrow);
      CHECK(e5 == thoonk::error::invalid_id);
    }
    auto [e6, r6] = co_await f.async_publish(std::string(17, 'x'), nothrow);
    CHECK(e6 == thoonk::error::item_too_large);
    auto [e7, r7] = co_await f.async_publish(thoonk::item_id("id"), std::string(17, 'x'), nothrow);
    CHECK(e7 == thoonk::error::item_too_large);
    CHECK(c.conn().stats().requests == before);
    // Exactly at the cap is fine, NUL bytes included.
    auto [e8, r8] = co_await f.async_publish(thoonk::item_id("id"), std::string(16, '\0'), nothrow);
    CHECK(!e8);
    auto r18_ = co_await f.async_get_item("id", asio::use_awaitable);
    CHECK(r18_ == std::optional<std::string>(std::string(16, '\0')));
    co_await c.async_delete_feed(name, asio::use_awaitable);
    c.stop();
  });
}
