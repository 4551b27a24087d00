// Sorted feed (list of auto-increment ids + items hash) against a real
// redis-server: exact id order and position payloads for every kind of
// insert and move, edits, retracts, missing ids, raw keys.
#include "support/helpers.hpp"

using namespace thoonk::test;
using thoonk::feed_position;
using thoonk::feed_type;

namespace {

asio::awaitable<std::vector<std::string>> raw_ids(thoonk::client& c, const std::string& name) {
  auto v = co_await cmd(c.conn(), "LRANGE", key("ids", name), 0, -1);
  std::vector<std::string> out;
  for (auto& e : v.elements) out.push_back(e.str);
  co_return out;
}

asio::awaitable<std::map<std::string, std::string>> raw_items(thoonk::client& c,
                                                              const std::string& name) {
  return hash_of(c.conn(), key("items", name));
}

using ids_t = std::vector<std::string>;

}  // namespace

FEED_TEST_CASE(
    "sorted", feed_type::sorted_feed, thoonk::feed_config{},
    "sorted feed: append, prepend, publish before/after, move: exact order and payloads",
    "[feed][sorted_feed][append][delete_feed][get_all][get_ids][insert][length][move_after]"
    "[move_before][move_to_begin][move_to_end][open][prepend][publish_after][publish_before]") {
  auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);
  auto s = co_await thoonk::sorted_feed::async_open(c, name, asio::use_awaitable);
  const std::string P = feed_channel("publish", name), Q = feed_channel("position", name);
  std::vector<msg> expected;
  ids_t order;

  auto id1 = co_await s.async_append("a", asio::use_awaitable);
  auto id2 = co_await s.async_append("b", asio::use_awaitable);
  auto id3 = co_await s.async_prepend("c", asio::use_awaitable);
  CHECK(id1 == "1");
  CHECK(id2 == "2");
  CHECK(id3 == "3");
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"3", "1", "2"});
  auto id4 = co_await s.async_publish_before(thoonk::item_id("1"), "d", asio::use_awaitable);
  CHECK(id4 == "4");
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"3", "4", "1", "2"});
  auto id5 = co_await s.async_publish_after(thoonk::item_id("2"), "e", asio::use_awaitable);
  CHECK(id5 == "5");
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"3", "4", "1", "2", "5"});
  expected.insert(expected.end(), {{P, nul_join("1", "a")},
                                   {Q, nul_join("1", ":end")},
                                   {P, nul_join("2", "b")},
                                   {Q, nul_join("2", ":end")},
                                   {P, nul_join("3", "c")},
                                   {Q, nul_join("3", "begin:")},
                                   {P, nul_join("4", "d")},
                                   {Q, nul_join("4", ":1")},
                                   {P, nul_join("5", "e")},
                                   {Q, nul_join("5", "2:")}});

  co_await s.async_move_to_begin("5", asio::use_awaitable);
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"5", "3", "4", "1", "2"});
  co_await s.async_move_to_end("3", asio::use_awaitable);
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"5", "4", "1", "2", "3"});
  co_await s.async_move_before("1", "5", asio::use_awaitable);
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"1", "5", "4", "2", "3"});
  co_await s.async_move_after("4", "3", asio::use_awaitable);
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"1", "5", "2", "3", "4"});
  expected.insert(expected.end(), {{Q, nul_join("5", "begin:")},
                                   {Q, nul_join("3", ":end")},
                                   {Q, nul_join("1", ":5")},
                                   {Q, nul_join("4", "3:")}});

  // The generic insert() takes any position.
  auto id6 = co_await s.async_insert(feed_position::after_id("1"), "f", asio::use_awaitable);
  CHECK(id6 == "6");
  expected.insert(expected.end(), {{P, nul_join("6", "f")}, {Q, nul_join("6", "1:")}});

  auto ids = co_await s.async_get_ids(asio::use_awaitable);
  CHECK(ids == ids_t{"1", "6", "5", "2", "3", "4"});
  auto all = co_await s.async_get_all(asio::use_awaitable);
  std::vector<thoonk::feed_item> want{{"1", "a"}, {"6", "f"}, {"5", "e"},
                                      {"2", "b"}, {"3", "c"}, {"4", "d"}};
  CHECK(all == want);
  auto len = co_await s.async_length(asio::use_awaitable);
  CHECK(len == 6);
  auto idincr = co_await cmd(c.conn(), "GET", key("idincr", name));
  CHECK(idincr.str == "6");
  auto pubs = co_await cmd(c.conn(), "GET", key("publishes", name));
  CHECK(pubs.str == "6");

  bool arrived = co_await wait_until([&] { return cap->msgs.size() >= expected.size(); });
  CHECK(arrived);
  co_await settle();
  CHECK(cap->msgs == expected);
}

FEED_TEST_CASE(
    "sorted-edit", feed_type::sorted_feed, thoonk::feed_config{},
    "sorted feed: edit, retract, reads",
    "[feed][sorted_feed][append][delete_feed][edit][get_item][get_items][has_id][retract]") {
  thoonk::sorted_feed s(c, name);
  co_await s.async_append("one", asio::use_awaitable);
  co_await s.async_append("two", asio::use_awaitable);
  co_await s.async_append("three", asio::use_awaitable);
  auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);

  const std::string binary("x\0y", 3);
  co_await s.async_edit(thoonk::item_id("2"), binary, asio::use_awaitable);
  auto items = co_await raw_items(c, name);
  CHECK(items["2"] == binary);
  auto order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"1", "2", "3"});  // position unchanged
  auto pubs = co_await cmd(c.conn(), "GET", key("publishes", name));
  CHECK(pubs.str == "4");

  bool r1 = co_await s.async_retract("1", asio::use_awaitable);
  CHECK(r1);
  bool r2 = co_await s.async_retract("1", asio::use_awaitable);
  CHECK(!r2);
  order = co_await raw_ids(c, name);
  CHECK(order == ids_t{"2", "3"});
  items = co_await raw_items(c, name);
  CHECK(items.size() == 2);

  bool has2 = co_await s.async_has_id("2", asio::use_awaitable);
  bool has1 = co_await s.async_has_id("1", asio::use_awaitable);
  CHECK(has2);
  CHECK(!has1);
  auto one = co_await s.async_get_item("2", asio::use_awaitable);
  CHECK(one == std::optional<std::string>(binary));
  std::vector<std::string> ask{"3", "1", "2"};
  auto several = co_await s.async_get_items(ask, asio::use_awaitable);
  CHECK(several == std::vector<std::optional<std::string>>{"three", std::nullopt, binary});

  bool arrived = co_await wait_until([&] { return cap->msgs.size() >= 2; });
  CHECK(arrived);
  co_await settle();
  // The contract: edit is feed.publish only (no position); retract is the id.
  CHECK(cap->msgs == std::vector<msg>{{feed_channel("publish", name), nul_join("2", binary)},
                                      {feed_channel("retract", name), "1"}});
}

FEED_TEST_CASE("sorted-missing", feed_type::sorted_feed, thoonk::feed_config{},
               "sorted feed: operations on missing ids fail and change nothing",
               "[feed][sorted_feed][append][delete_feed][edit][move][move_after][move_before]"
               "[move_to_begin][move_to_end][publish_after][publish_before][retract]") {
  thoonk::sorted_feed s(c, name);
  co_await s.async_append("one", asio::use_awaitable);
  co_await s.async_append("two", asio::use_awaitable);
  auto cap = co_await capture_patterns(fx.raw, "feed.*:" + name);
  auto ids_before = co_await raw_ids(c, name);
  auto items_before = co_await raw_items(c, name);
  auto dump = [&]() -> asio::awaitable<std::vector<std::string>> {
    std::vector<std::string> out;
    std::vector<std::string> counters{"idincr", "publishes"};
    for (const auto& k : counters) {
      auto v = co_await cmd(c.conn(), "GET", key(k, name));
      out.push_back(v.str);
    }
    co_return out;
  };
  auto counters_before = co_await dump();

  auto [e1] = co_await s.async_edit(thoonk::item_id("9"), "x", nothrow);
  CHECK(e1 == thoonk::error::id_not_found);
  auto [e2, i2] = co_await s.async_publish_before(thoonk::item_id("9"), "x", nothrow);
  CHECK(e2 == thoonk::error::id_not_found);
  auto [e3, i3] = co_await s.async_publish_after(thoonk::item_id("9"), "x", nothrow);
  CHECK(e3 == thoonk::error::id_not_found);
  auto [e4] = co_await s.async_move_to_begin("9", nothrow);
  CHECK(e4 == thoonk::error::id_not_found);
  auto [e4b] = co_await s.async_move_to_end("9", nothrow);
  CHECK(e4b == thoonk::error::id_not_found);
  auto [e5] = co_await s.async_move_before("1", "9", nothrow);
  CHECK(e5 == thoonk::error::id_not_found);
  auto [e5b] = co_await s.async_move_before("9", "1", nothrow);
  CHECK(e5b == thoonk::error::id_not_found);
  auto [e6] = co_await s.async_move_after("1", "9", nothrow);
  CHECK(e6 == thoonk::error::id_not_found);
  auto [e6b] = co_await s.async_move("9", feed_position::after_id("2"), nothrow);
  CHECK(e6b == thoonk::error::id_not_found);
  // Relative to itself: refused before any I/O.
  auto requests = c.conn().stats().requests;
  auto [e7] = co_await s.async_move_after("1", "1", nothrow);
  CHECK(e7 == thoonk::error::invalid_argument);
  auto [e7b] = co_await s.async_move_before("2", "2", nothrow);
  CHECK(e7b == thoonk::error::invalid_argument);
  CHECK(c.conn().stats().requests == requests);
  auto [e8, r8] = co_await s.async_retract("9", nothrow);
  CHECK(!e8);
  CHECK(!r8);
  auto [e9] = co_await s.async_move_to_end("", nothrow);
  CHECK(e9 == thoonk::error::invalid_id);

  auto ids_after = co_await raw_ids(c, name);
  auto items_after = co_await raw_items(c, name);
  auto counters_after = co_await dump();
  CHECK(ids_after == ids_before);
  CHECK(items_after == items_before);
  CHECK(counters_after == counters_before);
  co_await settle();
  CHECK(cap->msgs.empty());
}

TEST_CASE("sorted feed: positions parse and print in the contract's syntax",
          "[feed][sorted_feed]") {
  CHECK(feed_position::at_end().to_string() == ":end");
  CHECK(feed_position::at_begin().to_string() == "begin:");
  CHECK(feed_position::before_id("12").to_string() == ":12");
  CHECK(feed_position::after_id("12").to_string() == "12:");
  for (auto p : {feed_position::at_end(), feed_position::at_begin(), feed_position::before_id("7"),
                 feed_position::after_id("42")})
    CHECK(feed_position::parse(p.to_string()) == std::optional<feed_position>(p));
  CHECK(!feed_position::parse(""));
  CHECK(!feed_position::parse(":"));
  CHECK(!feed_position::parse("12"));
}
