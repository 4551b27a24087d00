// The hand-off messages (src/jobs/hand_off.*): what a put sends on a
// runner's channel (includes/hand_off.lua take_message) and the fence,
// byte by byte.
#include "jobs/hand_off.hpp"

#include <catch2/catch.hpp>

#include <string>

using namespace thoonk::detail::jobs;
using namespace std::string_literals;

TEST_CASE("hand_off: one job, as a put sends it", "[hand_off]") {
  const auto m =
      "a1\0"
      "3\0"
      "0\0"
      "5\0"
      "hello"s;
  auto js = parse_hand_off(m);
  REQUIRE(js);
  REQUIRE(js->size() == 1);
  CHECK((*js)[0].id == "a1");
  CHECK((*js)[0].token == 3);
  CHECK((*js)[0].failures == 0);
  CHECK((*js)[0].item == "hello");
}

TEST_CASE("hand_off: several jobs; items may hold NULs and be empty", "[hand_off]") {
  const auto m =
      "x\0"
      "1\0"
      "2\0"
      "3\0"
      "a\0b"
      "y\0"
      "7\0"
      "0\0"
      "0\0"s
      "z\0"
      "1048577\0"
      "9\0"
      "1\0"
      "\0"s;
  auto js = parse_hand_off(m);
  REQUIRE(js);
  REQUIRE(js->size() == 3);
  CHECK((*js)[0].id == "x");
  CHECK((*js)[0].failures == 2);
  CHECK((*js)[0].item == "a\0b"s);
  CHECK((*js)[1].id == "y");
  CHECK((*js)[1].token == 7);
  CHECK((*js)[1].item.empty());
  CHECK((*js)[2].token == 1048577);
  CHECK((*js)[2].failures == 9);
  CHECK((*js)[2].item == "\0"s);
}

TEST_CASE("hand_off: malformed messages are refused whole", "[hand_off]") {
  // Each is refused: a runner that cannot read a hand-off checks its
  // claims against the server instead of starting part of it.
  const std::string bad[] = {
      ""s,  // no job
      "a\0"
      "1\0"
      "0\0"
      "5\0"
      "four"s,  // item shorter than its length
      "a\0"
      "1\0"
      "0\0"
      "4"s,  // no NUL after the length
      "a\0"
      "1\0"
      "0"s,  // cut after the failures
      "\0"
      "1\0"
      "0\0"
      "1\0"
      "x"s,  // empty id
      "a\0"
      "0\0"
      "0\0"
      "1\0"
      "x"s,  // token 0 (tokens start at 1)
      "a\0"
      "-2\0"
      "0\0"
      "1\0"
      "x"s,  // negative token
      "a\0"
      "1\0"
      "-1\0"
      "1\0"
      "x"s,  // negative failures
      "a\0"
      "1x\0"
      "0\0"
      "1\0"
      "x"s,  // token not a number
      "a\0"
      "1\0"
      "0\0"
      "+1\0"
      "x"s,  // length with a sign
      "a\0"
      "1\0"
      "0\0"
      "99999999999999999999\0"
      "x"s,  // length overflows
      "a\0"
      "1\0"
      "0\0"
      "1\0"
      "xb\0"
      "1\0"
      "0\0"
      "1\0"s,  // second job cut
  };
  for (const auto& m : bad) {
    INFO("message of " << m.size() << " bytes");
    CHECK_FALSE(parse_hand_off(m));
  }
}

TEST_CASE("hand_off: fences are told from hand-offs", "[hand_off]") {
  const auto f = fence_message(42);
  CHECK(f == "\0fence:42"s);
  CHECK(parse_fence(f) == std::optional<std::uint64_t>(42));
  CHECK_FALSE(parse_hand_off(f));
  CHECK_FALSE(
      parse_fence("a\0"
                  "1\0"
                  "0\0"
                  "1\0"
                  "x"s));
  CHECK_FALSE(parse_fence("\0fence:"s));
  CHECK_FALSE(parse_fence("\0fence:4x"s));
  CHECK_FALSE(parse_fence("fence:4"s));
}
