// Feed order against a real redis-server: items published within one
// millisecond keep their publish order, whatever their ids, for get_ids,
// get_all and max_length eviction; an edit moves the item to the newest
// position; the score stays the publish time in milliseconds.
#include "support/helpers.hpp"

#include <cmath>

using namespace thoonk::test;
using thoonk::feed_type;

namespace {

// Ids whose byte order disagrees with their publish order: "999", "998",
// ..., "100", "99", ..., "10", "9", ..., "0" ("100" sorts before "99").
std::vector<std::string> ids_against_byte_order(int n) {
  std::vector<std::string> ids;
  for (int i = n - 1; i >= 0; --i) ids.push_back(std::to_string(i));
  return ids;
}

// Publishes every id without awaiting in between: one pipeline on the
// client's connection, so most land within the same millisecond.
asio::awaitable<boost::system::error_code> publish_pipelined(thoonk::feed& f,
                                                             const std::vector<std::string>& ids) {
  std::size_t done = 0;
  boost::system::error_code first;
  for (const auto& id : ids)
    f.async_publish(thoonk::item_id(id), "item-" + id,
                    [&](boost::system::error_code ec, thoonk::publish_result) {
                      ++done;
                      if (ec && !first) first = ec;
                    });
  bool all = co_await wait_until([&] { return done == ids.size(); }, 60s);
  CHECK(all);
  co_return first;
}

}  // namespace

TEST_CASE(
    "feed order: 1,000 pipelined publishes with ids sorting against their order keep "
    "exactly the newest max_length, in publish order (20 rounds)",
    "[feed][feed_order][publish][get_ids][get_all][delete_feed][length]") {
  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), test_config());
  thoonk::connection raw(ioc.get_executor(), test_config());
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(c, raw);
        const auto ids = ids_against_byte_order(1000);
        const std::vector<std::string> newest(ids.end() - 20, ids.end());
        {
          // Load the script first, so no NOSCRIPT retry reorders the pipeline.
          auto warm = co_await make_feed(c, "order-warm", feed_type::feed);
          co_await thoonk::feed(c, warm).async_publish(thoonk::item_id("x"), "x",
                                                       asio::use_awaitable);
          co_await c.async_delete_feed(warm, asio::use_awaitable);
        }
        for (int round = 0; round < 20; ++round) {
          INFO("round " << round);
          auto name = co_await make_feed(c, "order", feed_type::feed, max_len(20));
          thoonk::feed f(c, name);
          const auto before_ms = ms_now();
          auto ec = co_await publish_pipelined(f, ids);
          const auto after_ms = ms_now();
          REQUIRE(!ec);

          auto got = co_await f.async_get_ids(asio::use_awaitable);
          CHECK(got == newest);
          auto all = co_await f.async_get_all(asio::use_awaitable);
          REQUIRE(all.size() == newest.size());
          for (std::size_t i = 0; i < all.size(); ++i) {
            CHECK(all[i].id == newest[i]);
            CHECK(all[i].item == "item-" + newest[i]);
          }
          // Other contract clients read the same order with ZRANGE, and the
          // score's integer part is the publish millisecond.
          auto z = co_await cmd(raw, "ZRANGE", key("ids", name), "0", "-1", "WITHSCORES");
          // RESP3 gives [member, score] pairs, RESP2 a flat list.
          std::vector<std::pair<std::string, double>> scored;
          auto as_double = [](const thoonk::resp3::value& v) {
            return v.type == thoonk::resp3::type::double_number ? v.dbl : std::stod(v.str);
          };
          for (std::size_t i = 0; i < z.elements.size(); ++i) {
            const auto& e = z.elements[i];
            if (e.elements.size() == 2) {
              scored.emplace_back(e.elements[0].str, as_double(e.elements[1]));
            } else if (i + 1 < z.elements.size()) {
              scored.emplace_back(e.str, as_double(z.elements[i + 1]));
              ++i;
            }
          }
          std::vector<std::string> zids;
          for (const auto& [id, score] : scored) {
            zids.push_back(id);
            CHECK(std::floor(score) >= static_cast<double>(before_ms));
            CHECK(std::floor(score) <= static_cast<double>(after_ms + 1));
          }
          CHECK(zids == newest);
          auto len = co_await f.async_length(asio::use_awaitable);
          CHECK(len == 20);

          // Publishing an id again is an edit: nothing evicted, moved to
          // the newest position, still 20 items.
          auto edit =
              co_await f.async_publish(thoonk::item_id(newest[0]), "edited", asio::use_awaitable);
          CHECK(edit.edited);
          CHECK(edit.evicted.empty());
          std::vector<std::string> moved(newest.begin() + 1, newest.end());
          moved.push_back(newest[0]);
          got = co_await f.async_get_ids(asio::use_awaitable);
          CHECK(got == moved);
          // A new id evicts exactly the oldest one.
          auto fresh =
              co_await f.async_publish(thoonk::item_id("fresh"), "new", asio::use_awaitable);
          CHECK(!fresh.edited);
          CHECK(fresh.evicted == std::vector<std::string>{newest[1]});
          co_await c.async_delete_feed(name, asio::use_awaitable);
        }
        c.stop();
        raw.stop();
      },
      std::chrono::seconds(120));
}

CLIENT_TEST_CASE(
    "order-clock",
    "feed order: a publisher whose clock is behind still publishes after the newest item",
    "[feed][feed_order][publish][delete_feed][get_ids]") {
  auto name = co_await make_feed(c, "order-clock", feed_type::feed, max_len(2));
  thoonk::feed f(c, name);
  // Another contract client, its clock 10 s ahead, published "z" (its
  // plain commands).
  co_await cmd(c.conn(), "ZADD", key("ids", name), std::to_string(ms_now() + 10000), "z");
  co_await cmd(c.conn(), "HSET", key("items", name), "z", "Z");
  co_await f.async_publish(thoonk::item_id("a"), "A", asio::use_awaitable);
  auto r = co_await f.async_publish(thoonk::item_id("b"), "B",
                                    asio::use_awaitable);  // evicts z, the oldest
  CHECK(r.evicted == std::vector<std::string>{"z"});
  auto ids = co_await f.async_get_ids(asio::use_awaitable);
  CHECK(ids == std::vector<std::string>{"a", "b"});
  co_await c.async_delete_feed(name, asio::use_awaitable);
}
