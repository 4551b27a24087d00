// Unit tests of the request serializer (include/thoonk/request.hpp,
// src/resp3/request.cpp): exact wire bytes and reply counting.

#include <thoonk/request.hpp>
#include <thoonk/resp3/parser.hpp>

#include <catch2/catch.hpp>

#include <array>
#include <cstdint>
#include <limits>
#include <list>
#include <string>
#include <string_view>
#include <vector>

namespace {

using namespace std::string_literals;
using namespace std::string_view_literals;

// The payload parsed back as RESP: one array of bulk strings per command.
std::vector<std::vector<std::string>> decode(const std::string& payload) {
  boost::system::error_code ec;
  auto values = thoonk::resp3::parse_all(payload, ec);
  REQUIRE_FALSE(ec);
  std::vector<std::vector<std::string>> out;
  for (const auto& v : values) {
    REQUIRE(v.type == thoonk::resp3::type::array);
    auto& cmd = out.emplace_back();
    for (const auto& e : v.elements) {
      REQUIRE(e.type == thoonk::resp3::type::blob_string);
      cmd.push_back(e.str);
    }
  }
  return out;
}

}  // namespace

TEST_CASE("request: push serializes an array of bulk strings", "[request]") {
  thoonk::request req;
  CHECK(req.empty());
  req.push("SET", "key", "value");
  CHECK(req.payload() == "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$5\r\nvalue\r\n");
  CHECK(req.commands() == 1);
  CHECK(req.expected_replies() == 1);
  CHECK_FALSE(req.empty());
}

TEST_CASE("request: a command without arguments", "[request]") {
  thoonk::request req;
  req.push("PING");
  CHECK(req.payload() == "*1\r\n$4\r\nPING\r\n");
}

TEST_CASE("request: string argument types", "[request]") {
  thoonk::request req;
  const std::string s = "str";
  const std::string_view sv = "view";
  const char* cp = "ptr";
  char mutable_buf[] = "arr";
  req.push("X", s, sv, cp, mutable_buf, std::string("tmp"), ""sv);
  CHECK(req.payload() ==
        "*7\r\n$1\r\nX\r\n$3\r\nstr\r\n$4\r\nview\r\n$3\r\nptr\r\n$3\r\narr\r\n$3\r\ntmp\r\n$"
        "0\r\n\r\n");
}

TEST_CASE("request: binary data is length-prefixed, NUL and CRLF included", "[request]") {
  thoonk::request req;
  const std::string binary = "a\0b\r\n\xff"s;
  REQUIRE(binary.size() == 6);
  req.push("SET", "k\0ey"sv, binary);
  CHECK(req.payload() == "*3\r\n$3\r\nSET\r\n$4\r\nk\0ey\r\n$6\r\na\0b\r\n\xff\r\n"s);
  CHECK(decode(req.payload()) == std::vector<std::vector<std::string>>{{"SET", "k\0ey"s, binary}});
}

TEST_CASE("request: integer arguments", "[request]") {
  thoonk::request req;
  req.push("INCRBY", "counter", 5);
  CHECK(req.payload() == "*3\r\n$6\r\nINCRBY\r\n$7\r\ncounter\r\n$1\r\n5\r\n");

  req.clear();
  req.push("X", 0, -5, std::numeric_limits<std::int64_t>::min(),
           std::numeric_limits<std::int64_t>::max());
  CHECK(req.payload() ==
        "*5\r\n$1\r\nX\r\n$1\r\n0\r\n$2\r\n-5\r\n"
        "$20\r\n-9223372036854775808\r\n$19\r\n9223372036854775807\r\n");

  req.clear();
  req.push("X", std::numeric_limits<std::uint64_t>::max(), static_cast<short>(-7), 42u,
           std::size_t{1234567}, static_cast<std::int8_t>(-128));
  CHECK(req.payload() ==
        "*6\r\n$1\r\nX\r\n$20\r\n18446744073709551615\r\n$2\r\n-7\r\n$2\r\n42\r\n$7\r\n1234567\r\n"
        "$4\r\n-128\r\n");
}

TEST_CASE("request: several commands form a pipeline", "[request]") {
  thoonk::request req;
  req.push("MULTI");
  req.push("INCR", "a");
  req.push("EXEC");
  CHECK(req.commands() == 3);
  CHECK(req.expected_replies() == 3);
  CHECK(req.payload() ==
        "*1\r\n$5\r\nMULTI\r\n*2\r\n$4\r\nINCR\r\n$1\r\na\r\n*1\r\n$4\r\nEXEC\r\n");
  CHECK(decode(req.payload()) ==
        std::vector<std::vector<std::string>>{{"MULTI"}, {"INCR", "a"}, {"EXEC"}});
}

TEST_CASE("request: push_range", "[request]") {
  thoonk::request req;
  SECTION("head and tail") {
    const std::array<std::string_view, 2> head{"script-sha", "2"};
    const std::vector<std::string> tail{"key1", "key2", "arg\0"s};
    req.push_range("EVALSHA", head, tail);
    CHECK(req.payload() ==
          "*6\r\n$7\r\nEVALSHA\r\n$10\r\nscript-sha\r\n$1\r\n2\r\n$4\r\nkey1\r\n$4\r\nkey2\r\n"
          "$4\r\narg\0\r\n"s);
    CHECK(req.commands() == 1);
    CHECK(req.expected_replies() == 1);
  }
  SECTION("empty head") {
    const std::vector<std::string_view> tail{"a", "b"};
    req.push_range("DEL", {}, tail);
    CHECK(req.payload() == "*3\r\n$3\r\nDEL\r\n$1\r\na\r\n$1\r\nb\r\n");
  }
  SECTION("empty tail") {
    const std::vector<std::string_view> head{"k"};
    req.push_range("GET", head, std::vector<std::string>{});
    CHECK(req.payload() == "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n");
  }
  SECTION("both empty") {
    req.push_range("PING", {}, std::vector<std::string>{});
    CHECK(req.payload() == "*1\r\n$4\r\nPING\r\n");
  }
  SECTION("integer tail from a non-contiguous range") {
    const std::list<long long> tail{-1, 0, 10};
    req.push_range("X", {}, tail);
    CHECK(req.payload() == "*4\r\n$1\r\nX\r\n$2\r\n-1\r\n$1\r\n0\r\n$2\r\n10\r\n");
  }
}

TEST_CASE("request: the SUBSCRIBE family expects no replies", "[request]") {
  thoonk::request req;
  req.push("SUBSCRIBE", "a", "b");
  req.push("psubscribe", "p*");
  req.push("UnSubscribe", "a");
  req.push("PUNSUBSCRIBE");
  CHECK(req.commands() == 4);
  CHECK(req.expected_replies() == 0);
  CHECK(req.payload().substr(0, 26) == "*3\r\n$9\r\nSUBSCRIBE\r\n$1\r\na\r\n");

  // Sharded pub/sub (Redis 7) behaves the same way.
  req.push("ssubscribe", "s");
  req.push("SUNSUBSCRIBE");
  CHECK(req.commands() == 6);
  CHECK(req.expected_replies() == 0);

  // Anything else counts, including look-alikes and PUBLISH.
  req.push("PUBLISH", "a", "msg");
  req.push("SUBSCRIBEX");
  req.push("SUBSCRIB");
  req.push("PING");
  req.push_range("subscribe", {}, std::vector<std::string>{"c"});
  CHECK(req.commands() == 11);
  CHECK(req.expected_replies() == 4);
}

TEST_CASE("request: clear empties the request for reuse", "[request]") {
  thoonk::request req;
  req.push("SET", "a", 1);
  req.push("SUBSCRIBE", "x");
  req.clear();
  CHECK(req.empty());
  CHECK(req.payload().empty());
  CHECK(req.commands() == 0);
  CHECK(req.expected_replies() == 0);

  req.push("GET", "a");
  CHECK(req.payload() == "*2\r\n$3\r\nGET\r\n$1\r\na\r\n");
  CHECK(req.commands() == 1);
  CHECK(req.expected_replies() == 1);
}

TEST_CASE("request: low-level building blocks", "[request]") {
  thoonk::request req;
  req.reserve(1024);
  req.begin_command(3, "HSET");
  req.append_arg("HSET");
  req.append_arg(std::string("h"));
  req.append_arg(-1);
  CHECK(req.payload() == "*3\r\n$4\r\nHSET\r\n$1\r\nh\r\n$2\r\n-1\r\n");
  CHECK(req.commands() == 1);
  CHECK(req.expected_replies() == 1);
}

TEST_CASE("request: a large argument", "[request]") {
  thoonk::request req;
  const std::string big(1024 * 1024 + 3, 'z');
  req.push("SET", "k", big);
  const std::string header = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1048579\r\n";
  CHECK(req.payload().size() == header.size() + big.size() + 2);
  CHECK(req.payload().compare(0, header.size(), header) == 0);
  CHECK(decode(req.payload()) == std::vector<std::vector<std::string>>{{"SET", "k", big}});
}
