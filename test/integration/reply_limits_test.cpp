// The memory a reply may take, against a real redis-server: a script that
// returns a long array of nulls (Lua false is a null reply) is small on the
// wire but would be large in memory; the parser refuses it by its count of
// values or its memory estimate, the request gets that error, the
// connection is replaced and the next request works.
#include "support/helpers.hpp"

#include <thoonk/resp3/parser.hpp>

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
