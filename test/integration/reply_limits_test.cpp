// The memory replies may take, against a real redis-server: a script that
// returns a long array of nulls (Lua false is a null reply) is small on the
// wire but would be large in memory; the parser refuses it by its count of
// values or its memory estimate, the request gets that error, the
// connection is replaced and the next request works. The memory estimate
// covers every reply a connection holds for a request of several commands.
#include "support/helpers.hpp"

#include <thoonk/resp3/parser.hpp>

#include <array>
#include <string>
#include <string_view>
#include <vector>

using namespace thoonk::test;

namespace {

// EVAL of a script returning `n` nulls.
thoonk::request nulls(std::size_t n) {
  thoonk::request r;
  r.push("EVAL", "local t = {} for i = 1, tonumber(ARGV[1]) do t[i] = false end return t", "0",
         std::to_string(n));
  return r;
}

}  // namespace

TEST_CASE("reply limits: a reply of too many values fails its request, the connection recovers",
          "[connection][protocol][limits]") {
  struct limit_case {
    const char* what;
    std::size_t count;
    thoonk::resp3::parser_limits limits;
    thoonk::error expected;
  };
  thoonk::resp3::parser_limits few_values;
  few_values.max_reply_values = 10'000;
  thoonk::resp3::parser_limits little_memory;
  little_memory.max_reply_memory = 64 * 1024;
  // The defaults refuse just past a million values: 3 MB on the wire.
  const auto c = GENERATE_COPY(
      limit_case{"max_reply_values", 20'000, few_values, thoonk::error::reply_too_many_values},
      limit_case{"max_reply_memory", 20'000, little_memory, thoonk::error::reply_memory_exceeded},
      limit_case{"defaults",
                 thoonk::resp3::parser_limits{}.max_reply_values,
                 {},
                 thoonk::error::reply_too_many_values});
  INFO(c.what);
  asio::io_context ioc;
  auto cfg = test_config();
  cfg.limits = c.limits;
  thoonk::connection conn(ioc.get_executor(), cfg);
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await conn.async_connect(asio::use_awaitable);
        // Under the limit: fine.
        auto [ok_ec, ok] = co_await conn.async_exec(nulls(100), nothrow);
        CHECK(!ok_ec);
        REQUIRE(ok.size() == 1);
        CHECK(ok[0].elements.size() == 100);
        // Over it: the request gets the parser's error, not unknown_outcome.
        auto [ec, resp] = co_await conn.async_exec(nulls(c.count), nothrow);
        CHECK(ec == c.expected);
        INFO(ec.message());
        CHECK(resp.empty());
        // The stream could not be trusted any more: the connection was replaced.
        auto v = co_await cmd(conn, "PING");
        CHECK(v.str == "PONG");
        CHECK(conn.stats().reconnects >= 1);
        conn.stop();
      },
      60s);
}

TEST_CASE(
    "reply limits: max_reply_memory bounds the replies held for one request, not each reply alone",
    "[connection][protocol][limits]") {
  // A list of short elements: one LRANGE reply is one element list of
  // `n` nodes (the strings fit the small-string buffer). A request of
  // several LRANGEs holds every reply until its last one arrives.
  constexpr std::size_t n = 5000;
  const std::size_t one_reply = thoonk::resp3::value_list::storage_bytes(n);
  asio::io_context ioc;
  auto cfg = test_config();
  // Two replies fit; a third held with them does not.
  cfg.limits.max_reply_memory = 2 * one_reply + one_reply / 2;
  thoonk::connection conn(ioc.get_executor(), cfg);
  const std::string key = unique_name("replymem");
  auto lranges = [&](int count) {
    thoonk::request r;
    for (int i = 0; i < count; ++i) r.push("LRANGE", key, 0, -1);
    return r;
  };
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await conn.async_connect(asio::use_awaitable);
        std::vector<std::string> items(n, "x");
        thoonk::request fill;
        fill.push_range("RPUSH", std::array<std::string_view, 1>{key}, items);
        auto [fill_ec, filled] = co_await conn.async_exec(fill, nothrow);
        REQUIRE(!fill_ec);
        REQUIRE(filled.at(0).integer == static_cast<std::int64_t>(n));

        // Each reply alone, and two held together, are under the limit.
        auto [ec2, two] = co_await conn.async_exec(lranges(2), nothrow);
        CHECK(!ec2);
        REQUIRE(two.size() == 2);
        CHECK(two[1].elements.size() == n);
        CHECK(conn.stats().reconnects == 0);

        // Four: the third reply would be held with two others. The request
        // fails with the limit's error (not unknown_outcome) and gets no
        // partial replies.
        auto [ec4, four] = co_await conn.async_exec(lranges(4), nothrow);
        CHECK(ec4 == thoonk::error::reply_memory_exceeded);
        INFO(ec4.message());
        CHECK(ec4.message().find("max_reply_memory") != std::string::npos);
        CHECK(four.empty());

        // The stream was abandoned mid-reply: the connection was replaced,
        // and the requests after it work, the same four replies one per
        // request included (each request's replies are released with it).
        auto v = co_await cmd(conn, "PING");
        CHECK(v.str == "PONG");
        CHECK(conn.stats().reconnects >= 1);
        for (int i = 0; i < 4; ++i) {
          auto [ec1, one] = co_await conn.async_exec(lranges(1), nothrow);
          CHECK(!ec1);
          REQUIRE(one.size() == 1);
          CHECK(one[0].elements.size() == n);
        }
        co_await cmd(conn, "DEL", key);
        conn.stop();
      },
      60s);
}
