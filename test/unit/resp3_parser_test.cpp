// Unit tests of the incremental RESP3/RESP2 parser (src/resp3/parser.cpp).
//
// Every vector is checked three ways that must agree: parse_all() on the
// whole buffer, the buffer split in two at every byte offset, and the buffer
// fed one byte at a time. The split feeds simulate the connection: received
// bytes are appended to a buffer, consume() is called on the whole buffer and
// the consumed prefix is erased, so an incomplete token is re-presented with
// the next bytes appended.

#include <thoonk/error.hpp>
#include <thoonk/resp3/parser.hpp>
#include <thoonk/resp3/value.hpp>

#include <catch2/catch.hpp>

#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <vector>

namespace {

namespace r = thoonk::resp3;
using thoonk::error;
using error_code = boost::system::error_code;
using namespace std::string_literals;

// ---- value builders ----------------------------------------------------------

r::value make(r::type t) {
  r::value v;
  v.type = t;
  return v;
}
r::value text(r::type t, std::string s) {
  r::value v = make(t);
  v.str = std::move(s);
  return v;
}
r::value simple(std::string s) { return text(r::type::simple_string, std::move(s)); }
r::value serr(std::string s) { return text(r::type::simple_error, std::move(s)); }
r::value bulk(std::string s) { return text(r::type::blob_string, std::move(s)); }
r::value berr(std::string s) { return text(r::type::blob_error, std::move(s)); }
r::value verbatim(std::string s) { return text(r::type::verbatim_string, std::move(s)); }
r::value bignum(std::string s) { return text(r::type::big_number, std::move(s)); }
r::value integer(std::int64_t i) {
  r::value v = make(r::type::number);
  v.integer = i;
  return v;
}
r::value dbl(double d) {
  r::value v = make(r::type::double_number);
  v.dbl = d;
  return v;
}
r::value boolean(bool b) {
  r::value v = make(r::type::boolean);
  v.integer = b ? 1 : 0;
  return v;
}
r::value null() { return make(r::type::null); }
r::value agg(r::type t, std::vector<r::value> elements) {
  r::value v = make(t);
  v.elements = std::move(elements);
  return v;
}
r::value arr(std::vector<r::value> e) { return agg(r::type::array, std::move(e)); }
r::value map(std::vector<r::value> e) { return agg(r::type::map, std::move(e)); }
r::value set(std::vector<r::value> e) { return agg(r::type::set, std::move(e)); }
r::value push(std::vector<r::value> e) { return agg(r::type::push, std::move(e)); }
r::value with_attrs(r::value v, std::vector<r::value> attrs) {
  v.attributes = std::move(attrs);
  return v;
}

// debug_string is unambiguous, and unlike operator== it treats NaN as equal
// to itself, so comparisons go through it (it also makes failures readable).
std::string render(const std::vector<r::value>& values) {
  std::string s;
  for (const auto& v : values) {
    if (!s.empty()) s += " | ";
    s += r::debug_string(v);
  }
  return s;
}

std::string printable(std::string_view wire) {
  r::value v = make(r::type::simple_string);
  v.str.assign(wire);
  return r::debug_string(v);
}

// ---- feeding -------------------------------------------------------------------

struct outcome {
  std::vector<r::value> values;
  error_code ec;              // the parse error, or missing_crlf if the input ended mid-reply
  std::size_t consumed = 0;   // sum of everything consume() reported
  std::size_t presented = 0;  // sum of the buffer sizes presented to consume()

  std::string describe() const {
    return "values: " + render(values) + "; ec: " + (ec ? ec.message() : "none") +
           "; consumed: " + std::to_string(consumed);
  }
};

// Feeds `input` in the chunks delimited by the ascending offsets `cuts`,
// exactly like a connection's read loop would.
outcome feed(std::string_view input, const std::vector<std::size_t>& cuts,
             r::parser_limits limits = {}) {
  r::parser p(limits);
  outcome o;
  std::string buf;
  bool mid_reply = false;
  std::size_t fed = 0;
  auto deliver = [&](std::size_t upto) {
    buf.append(input.substr(fed, upto - fed));
    fed = upto;
    for (;;) {
      o.presented += buf.size();
      const std::size_t n = p.consume(buf, o.ec);
      o.consumed += n;
      buf.erase(0, n);
      if (o.ec) return false;
      if (n > 0) mid_reply = true;
      if (!p.ready()) return true;
      o.values.push_back(p.take());
      mid_reply = false;
    }
  };
  for (std::size_t c : cuts) {
    if (!deliver(c)) return o;
  }
  if (!deliver(input.size())) return o;
  if (mid_reply || !buf.empty()) o.ec = error::missing_crlf;
  return o;
}

outcome feed_whole(std::string_view input, r::parser_limits limits = {}) {
  return feed(input, {}, limits);
}

// Checks that parse_all, every two-way split and byte-at-a-time feeding all
// give the same outcome, and returns it.
outcome parse_every_way(std::string_view input, r::parser_limits limits = {}) {
  INFO("input: " << printable(input));
  const outcome whole = feed_whole(input, limits);
  const std::string expected = whole.describe();

  error_code ec;
  auto all = r::parse_all(input, ec, limits);
  CHECK(render(all) == render(whole.values));
  CHECK(ec == whole.ec);

  bool splits_ok = true;
  for (std::size_t k = 1; k < input.size(); ++k) {
    const outcome split = feed(input, {k}, limits);
    if (split.describe() != expected) {
      splits_ok = false;
      INFO("split at " << k);
      CHECK(split.describe() == expected);
    }
  }
  CHECK(splits_ok);

  std::vector<std::size_t> bytes;
  for (std::size_t k = 1; k < input.size(); ++k) bytes.push_back(k);
  CHECK(feed(input, bytes, limits).describe() == expected);
  return whole;
}

void check_valid(std::string_view wire, const r::value& expected, r::parser_limits limits = {}) {
  INFO("input: " << printable(wire));
  const outcome o = parse_every_way(wire, limits);
  CHECK_FALSE(o.ec);
  REQUIRE(o.values.size() == 1);
  CHECK(r::debug_string(o.values[0]) == r::debug_string(expected));
  CHECK(o.consumed == wire.size());
}

void check_error(std::string_view wire, error expected, r::parser_limits limits = {}) {
  INFO("input: " << printable(wire));
  const outcome o = parse_every_way(wire, limits);
  CHECK(o.ec == make_error_code(expected));
}

struct valid_vector {
  std::string wire;
  r::value expected;
};

struct error_vector {
  std::string wire;
  error expected;
};

std::string nested_arrays(std::size_t depth, std::string_view innermost) {
  std::string s;
  for (std::size_t i = 0; i < depth; ++i) s += "*1\r\n";
  s += innermost;
  return s;
}

r::value nested_value(std::size_t depth, r::value innermost) {
  r::value v = std::move(innermost);
  for (std::size_t i = 0; i < depth; ++i) v = arr({std::move(v)});
  return v;
}

std::vector<valid_vector> resp3_vectors() {
  return {
      {"+OK\r\n", simple("OK")},
      {"+\r\n", simple("")},
      {"+hello world\r\n", simple("hello world")},
      {"-ERR unknown command 'foo'\r\n", serr("ERR unknown command 'foo'")},
      {"-WRONGTYPE Operation against a key\r\n", serr("WRONGTYPE Operation against a key")},
      {":0\r\n", integer(0)},
      {":42\r\n", integer(42)},
      {":-1\r\n", integer(-1)},
      {":-0\r\n", integer(0)},
      {":9223372036854775807\r\n", integer(std::numeric_limits<std::int64_t>::max())},
      {":-9223372036854775808\r\n", integer(std::numeric_limits<std::int64_t>::min())},
      {"$5\r\nhello\r\n", bulk("hello")},
      {"$0\r\n\r\n", bulk("")},
      {"$-1\r\n", null()},
      {"$3\r\na\0b\r\n"s, bulk("a\0b"s)},
      {"$4\r\na\r\nb\r\n", bulk("a\r\nb")},  // CRLF inside a payload is data
      {"$2\r\n\r\n\r\n", bulk("\r\n")},
      {"$1\r\n\xff\r\n", bulk("\xff")},
      {"$03\r\nabc\r\n", bulk("abc")},  // leading zeros are still digits
      {"_\r\n", null()},
      {",3.14\r\n", dbl(3.14)},
      {",-1.5e10\r\n", dbl(-1.5e10)},
      {",0\r\n", dbl(0.0)},
      {",1e-7\r\n", dbl(1e-7)},
      {",10\r\n", dbl(10.0)},
      {",inf\r\n", dbl(std::numeric_limits<double>::infinity())},
      {",-inf\r\n", dbl(-std::numeric_limits<double>::infinity())},
      {",nan\r\n", dbl(std::numeric_limits<double>::quiet_NaN())},
      {"#t\r\n", boolean(true)},
      {"#f\r\n", boolean(false)},
      {"(3492890328409238509324850943850943825024385\r\n",
       bignum("3492890328409238509324850943850943825024385")},
      {"(-3492890328409238509324850943850943825024385\r\n",
       bignum("-3492890328409238509324850943850943825024385")},
      {"(0\r\n", bignum("0")},
      {"=15\r\ntxt:Some string\r\n", verbatim("Some string")},
      {"=4\r\nmkd:\r\n", verbatim("")},
      {"=8\r\ntxt:a\r\nb\r\n", verbatim("a\r\nb")},
      {"!21\r\nSYNTAX invalid syntax\r\n", berr("SYNTAX invalid syntax")},
      {"!0\r\n\r\n", berr("")},
      {"!-1\r\n", null()},
      {"=-1\r\n", null()},
      {"*0\r\n", arr({})},
      {"*-1\r\n", null()},
      {"*3\r\n:1\r\n:2\r\n:3\r\n", arr({integer(1), integer(2), integer(3)})},
      {"*5\r\n:1\r\n$3\r\nfoo\r\n_\r\n#t\r\n,1.5\r\n",
       arr({integer(1), bulk("foo"), null(), boolean(true), dbl(1.5)})},
      {"*2\r\n*3\r\n:1\r\n:2\r\n:3\r\n*2\r\n+Hello\r\n-World\r\n",
       arr({arr({integer(1), integer(2), integer(3)}), arr({simple("Hello"), serr("World")})})},
      {"*2\r\n*0\r\n*1\r\n*0\r\n", arr({arr({}), arr({arr({})})})},
      {"%0\r\n", map({})},
      {"%-1\r\n", null()},
      {"%2\r\n+first\r\n:1\r\n+second\r\n:2\r\n",
       map({simple("first"), integer(1), simple("second"), integer(2)})},
      {"%1\r\n*2\r\n:1\r\n:2\r\n%1\r\n$1\r\nk\r\n~1\r\n#f\r\n",
       map({arr({integer(1), integer(2)}), map({bulk("k"), set({boolean(false)})})})},
      {"~0\r\n", set({})},
      {"~-1\r\n", null()},
      {"~3\r\n+orange\r\n+apple\r\n#t\r\n",
       set({simple("orange"), simple("apple"), boolean(true)})},
      {">0\r\n", push({})},
      {">3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$5\r\nhello\r\n",
       push({bulk("message"), bulk("chan"), bulk("hello")})},
      {">4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$0\r\n\r\n",
       push({bulk("pmessage"), bulk("c*"), bulk("ch"), bulk("")})},
      // The attribute examples of the RESP3 specification.
      {"|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n$1\r\nb\r\n,0.0012\r\n*2\r\n:"
       "2039123\r\n:"
       "9543892\r\n",
       with_attrs(
           arr({integer(2039123), integer(9543892)}),
           {simple("key-popularity"), map({bulk("a"), dbl(0.1923), bulk("b"), dbl(0.0012)})})},
      {"*3\r\n:1\r\n:2\r\n|1\r\n+ttl\r\n:3600\r\n:3\r\n",
       arr({integer(1), integer(2), with_attrs(integer(3), {simple("ttl"), integer(3600)})})},
  };
}

std::vector<valid_vector> resp2_vectors() {
  return {
      {"+OK\r\n", simple("OK")},
      {"+PONG\r\n", simple("PONG")},
      {"-ERR wrong number of arguments\r\n", serr("ERR wrong number of arguments")},
      {":1000\r\n", integer(1000)},
      {"$6\r\nfoobar\r\n", bulk("foobar")},
      {"$-1\r\n", null()},
      {"*-1\r\n", null()},
      {"*0\r\n", arr({})},
      {"*2\r\n$3\r\nfoo\r\n$3\r\nbar\r\n", arr({bulk("foo"), bulk("bar")})},
      {"*3\r\n$3\r\nfoo\r\n$-1\r\n$3\r\nbar\r\n", arr({bulk("foo"), null(), bulk("bar")})},
      {"*2\r\n*1\r\n$1\r\na\r\n*-1\r\n", arr({arr({bulk("a")}), null()})},
      // A pub/sub message in RESP2 is a plain array.
      {"*3\r\n$7\r\nmessage\r\n$4\r\nchan\r\n$5\r\nhello\r\n",
       arr({bulk("message"), bulk("chan"), bulk("hello")})},
      {"*3\r\n$9\r\nsubscribe\r\n$4\r\nchan\r\n:1\r\n",
       arr({bulk("subscribe"), bulk("chan"), integer(1)})},
      // HGETALL in RESP2 is a flat array, EXEC returns nested replies incl. errors.
      {"*4\r\n$1\r\nf\r\n$1\r\nv\r\n$1\r\ng\r\n$0\r\n\r\n",
       arr({bulk("f"), bulk("v"), bulk("g"), bulk("")})},
      {"*3\r\n+OK\r\n-ERR boom\r\n:2\r\n", arr({simple("OK"), serr("ERR boom"), integer(2)})},
  };
}

std::vector<error_vector> error_vectors() {
  return {
      // Unknown type bytes.
      {"x\r\n", error::invalid_type_byte},
      {"\r\n", error::invalid_type_byte},
      {" +OK\r\n", error::invalid_type_byte},
      {"\0\r\n"s, error::invalid_type_byte},
      {"OK\r\n", error::invalid_type_byte},
      // Streamed strings and aggregates.
      {"$?\r\n;4\r\nHell\r\n;0\r\n", error::unsupported_streamed},
      {"*?\r\n:1\r\n.\r\n", error::unsupported_streamed},
      {"%?\r\n", error::unsupported_streamed},
      {"~?\r\n", error::unsupported_streamed},
      {">?\r\n", error::unsupported_streamed},
      {"!?\r\n", error::unsupported_streamed},
      {"=?\r\n", error::unsupported_streamed},
      {";4\r\nHell\r\n", error::unsupported_streamed},
      {".\r\n", error::unsupported_streamed},
      // Lengths.
      {"$\r\n", error::invalid_length},
      {"$-2\r\n", error::invalid_length},
      {"$-0\r\n", error::invalid_length},
      {"$-\r\n", error::invalid_length},
      {"$-1x\r\n", error::invalid_length},
      {"$--1\r\n", error::invalid_length},
      {"$+3\r\nabc\r\n", error::invalid_length},
      {"$ 3\r\nabc\r\n", error::invalid_length},
      {"$3 \r\nabc\r\n", error::invalid_length},
      {"$3abc\r\n", error::invalid_length},
      {"$1.5\r\n", error::invalid_length},
      {"$0x3\r\nabc\r\n", error::invalid_length},
      {"$18446744073709551615\r\n", error::invalid_length},
      {"$9223372036854775808\r\n", error::invalid_length},
      {"$99999999999999999999999\r\n", error::invalid_length},
      {"!-2\r\n", error::invalid_length},
      {"=-2\r\n", error::invalid_length},
      {"*\r\n", error::invalid_length},
      {"*-2\r\n", error::invalid_length},
      {"*1x\r\n", error::invalid_length},
      {"*+1\r\n:1\r\n", error::invalid_length},
      {"*18446744073709551615\r\n", error::invalid_length},
      {"%18446744073709551615\r\n", error::invalid_length},
      {"%-2\r\n", error::invalid_length},
      {"~x\r\n", error::invalid_length},
      {">-1\r\n", error::invalid_length},
      {"|-1\r\n", error::invalid_length},
      {"|\r\n", error::invalid_length},
      // Verbatim strings need a "fmt:" prefix.
      {"=3\r\ntxt\r\n", error::invalid_length},
      {"=0\r\n\r\n", error::invalid_length},
      {"=5\r\ntxt-x\r\n", error::invalid_length},
      {"=5\r\ntx:ab\r\n", error::invalid_length},
      // CRLF framing.
      {"$3\r\nabcd\r\n", error::missing_crlf},
      {"$3\r\nab\r\n", error::missing_crlf},
      {"$3\r\nabc\n\r", error::missing_crlf},
      {"$3\r\nabc\rX", error::missing_crlf},
      {"$3\r\nabc\r\r", error::missing_crlf},
      {"$0\r\nx\r\n", error::missing_crlf},
      {"+OK\rX\r\n", error::missing_crlf},
      {"+OK\r\r\n", error::missing_crlf},
      {"+OK\n\r\n", error::missing_crlf},
      {"-ERR\nx\r\n", error::missing_crlf},
      {":1\rx", error::missing_crlf},
      {"$3\rx", error::missing_crlf},
      {"*1\r:1\r\n", error::missing_crlf},
      {"_x\r\n", error::missing_crlf},
      {"_ \r\n", error::missing_crlf},
      {"_\rx", error::missing_crlf},
      // Integers.
      {":\r\n", error::invalid_number},
      {":abc\r\n", error::invalid_number},
      {":+1\r\n", error::invalid_number},
      {": 1\r\n", error::invalid_number},
      {":1 \r\n", error::invalid_number},
      {":1.0\r\n", error::invalid_number},
      {":-\r\n", error::invalid_number},
      {":--1\r\n", error::invalid_number},
      {":1\n\r\n", error::invalid_number},
      {":9223372036854775808\r\n", error::invalid_number},
      {":-9223372036854775809\r\n", error::invalid_number},
      {":18446744073709551616\r\n", error::invalid_number},
      // Big numbers.
      {"(\r\n", error::invalid_number},
      {"(-\r\n", error::invalid_number},
      {"(+1\r\n", error::invalid_number},
      {"(12a\r\n", error::invalid_number},
      {"(1.5\r\n", error::invalid_number},
      {"( 1\r\n", error::invalid_number},
      // Doubles.
      {",\r\n", error::invalid_double},
      {",abc\r\n", error::invalid_double},
      {",1.5x\r\n", error::invalid_double},
      {", 1\r\n", error::invalid_double},
      {",1 \r\n", error::invalid_double},
      {",+1\r\n", error::invalid_double},
      {",+inf\r\n", error::invalid_double},
      {",infinity\r\n", error::invalid_double},
      {",Inf\r\n", error::invalid_double},
      {",NaN\r\n", error::invalid_double},
      {",-nan\r\n", error::invalid_double},
      {",1e999\r\n", error::invalid_double},
      {",1,5\r\n", error::invalid_double},
      // Booleans.
      {"#\r\n", error::invalid_boolean},
      {"#x\r\n", error::invalid_boolean},
      {"#tt\r\n", error::invalid_boolean},
      {"#T\r\n", error::invalid_boolean},
      {"#1\r\n", error::invalid_boolean},
      {"#true\r\n", error::invalid_boolean},
      // Errors inside aggregates and after good replies.
      {"*2\r\n:1\r\n:x\r\n", error::invalid_number},
      {"*2\r\n:1\r\n@\r\n", error::invalid_type_byte},
      {"%1\r\n+k\r\n#?\r\n", error::invalid_boolean},
      {"|1\r\n+a\r\n$-5\r\n", error::invalid_length},
      {"+OK\r\n:x\r\n", error::invalid_number},
  };
}

}  // namespace

// ---- valid vectors ----------------------------------------------------------

TEST_CASE("resp3 parser: every RESP3 type, whole and split at every offset", "[resp3][parser]") {
  for (const auto& vec : resp3_vectors()) check_valid(vec.wire, vec.expected);
}

TEST_CASE("resp3 parser: RESP2 replies, whole and split at every offset", "[resp3][parser]") {
  for (const auto& vec : resp2_vectors()) check_valid(vec.wire, vec.expected);
}

TEST_CASE("resp3 parser: scalar fields are decoded", "[resp3][parser]") {
  error_code ec;
  auto v = r::parse_all("#t\r\n#f\r\n:-17\r\n,2.5\r\n,nan\r\n,-inf\r\n=7\r\nmkd:# a\r\n", ec);
  REQUIRE_FALSE(ec);
  REQUIRE(v.size() == 7);
  CHECK(v[0].type == r::type::boolean);
  CHECK(v[0].integer == 1);
  CHECK(v[1].integer == 0);
  CHECK(v[2].integer == -17);
  CHECK(v[3].dbl == 2.5);
  CHECK(std::isnan(v[4].dbl));
  CHECK(std::isinf(v[5].dbl));
  CHECK(v[5].dbl < 0);
  CHECK(v[6].type == r::type::verbatim_string);
  CHECK(v[6].str == "# a");
  CHECK(v[6].is_string());
}

TEST_CASE("resp3 parser: all vectors concatenated into one stream, split every way",
          "[resp3][parser]") {
  std::string stream;
  std::vector<r::value> expected;
  for (const auto& list : {resp3_vectors(), resp2_vectors()}) {
    for (const auto& vec : list) {
      stream += vec.wire;
      expected.push_back(vec.expected);
    }
  }
  const outcome o = parse_every_way(stream);
  CHECK_FALSE(o.ec);
  CHECK(render(o.values) == render(expected));
  CHECK(o.consumed == stream.size());

  // Random chunk sizes, as a socket would deliver them.
  std::mt19937 rng(12345);
  for (int round = 0; round < 200; ++round) {
    std::vector<std::size_t> cuts;
    std::size_t pos = 0;
    for (;;) {
      pos += std::uniform_int_distribution<std::size_t>(1, 64)(rng);
      if (pos >= stream.size()) break;
      cuts.push_back(pos);
    }
    const outcome chunked = feed(stream, cuts);
    CHECK_FALSE(chunked.ec);
    CHECK(chunked.consumed == stream.size());
    CHECK(render(chunked.values) == render(expected));
  }
}

// ---- malformed vectors ---------------------------------------------------------

TEST_CASE("resp3 parser: malformed input gives its specific error, split every way",
          "[resp3][parser]") {
  for (const auto& vec : error_vectors()) check_error(vec.wire, vec.expected);
}

TEST_CASE("resp3 parser: values before a malformed reply are delivered", "[resp3][parser]") {
  const outcome o = parse_every_way("+OK\r\n:1\r\n*1\r\n:x\r\n");
  CHECK(o.ec == make_error_code(error::invalid_number));
  CHECK(render(o.values) == render({simple("OK"), integer(1)}));
}

TEST_CASE("resp3 parser: truncated input", "[resp3][parser]") {
  for (std::string_view wire :
       {"+OK", "+OK\r", ":1", "$5\r\nhel", "$5\r\nhello", "$5\r\nhello\r", "$5", "*2\r\n:1\r\n",
        "*2\r\n", "%1\r\n+k\r\n", "|1\r\n+a\r\n+b\r\n", "|0\r\n", ">2\r\n+message\r\n"}) {
    INFO("input: " << printable(wire));
    error_code ec;
    auto values = r::parse_all(wire, ec);
    CHECK(values.empty());
    CHECK(ec == make_error_code(error::missing_crlf));

    // A parser fed the same bytes is not in error: it waits for more.
    r::parser p;
    error_code ec2;
    std::size_t n = p.consume(wire, ec2);
    CHECK_FALSE(ec2);
    CHECK_FALSE(p.ready());
    CHECK(n <= wire.size());
  }
  error_code ec;
  CHECK(r::parse_all("", ec).empty());
  CHECK_FALSE(ec);
  CHECK(r::parse_all("+OK\r\n", ec).size() == 1);
  CHECK_FALSE(ec);
  CHECK(r::parse_all("+OK\r\n$3\r\nab", ec).size() == 1);
  CHECK(ec == make_error_code(error::missing_crlf));
}

// ---- parser state ----------------------------------------------------------------

TEST_CASE("resp3 parser: consume stops after each top-level value", "[resp3][parser]") {
  r::parser p;
  error_code ec;
  const std::string_view input = ":1\r\n:2\r\n";
  std::size_t n = p.consume(input, ec);
  CHECK_FALSE(ec);
  CHECK(n == 4);
  REQUIRE(p.ready());

  // While a value waits to be taken nothing more is consumed.
  CHECK(p.consume(input.substr(n), ec) == 0);
  CHECK_FALSE(ec);
  CHECK(p.ready());

  r::value v = p.take();
  CHECK(v == integer(1));
  CHECK_FALSE(p.ready());

  CHECK(p.consume(input.substr(n), ec) == 4);
  REQUIRE(p.ready());
  CHECK(p.take() == integer(2));
  CHECK_FALSE(p.ready());

  // Nothing left: nothing consumed, no error, not ready.
  CHECK(p.consume("", ec) == 0);
  CHECK_FALSE(ec);
  CHECK_FALSE(p.ready());
}

TEST_CASE("resp3 parser: incomplete tokens are left unconsumed", "[resp3][parser]") {
  r::parser p;
  error_code ec;
  // The header and first element are complete, the second element is not.
  CHECK(p.consume("*2\r\n$3\r\nfoo\r\n$3\r\nba", ec) == 13);
  CHECK_FALSE(ec);
  CHECK_FALSE(p.ready());
  // Only the unconsumed part is re-presented.
  CHECK(p.consume("$3\r\nbar\r\n", ec) == 9);
  REQUIRE(p.ready());
  CHECK(p.take() == arr({bulk("foo"), bulk("bar")}));
}

TEST_CASE("resp3 parser: errors are sticky until reset", "[resp3][parser]") {
  r::parser p;
  error_code ec;
  p.consume("*2\r\n:1\r\n", ec);
  CHECK_FALSE(ec);
  p.consume("#x\r\n", ec);
  CHECK(ec == make_error_code(error::invalid_boolean));

  // Even valid input keeps failing with the same error.
  error_code again;
  CHECK(p.consume(":1\r\n", again) == 0);
  CHECK(again == make_error_code(error::invalid_boolean));
  CHECK_FALSE(p.ready());

  p.reset();
  error_code after;
  CHECK(p.consume(":5\r\n", after) == 4);
  CHECK_FALSE(after);
  REQUIRE(p.ready());
  CHECK(p.take() == integer(5));
}

TEST_CASE("resp3 parser: reset forgets partial state", "[resp3][parser]") {
  r::parser p;
  error_code ec;
  p.consume("*3\r\n:1\r\n|1\r\n+a\r\n+b\r\n", ec);
  CHECK_FALSE(ec);
  p.reset();
  CHECK(p.consume("+OK\r\n", ec) == 5);
  REQUIRE(p.ready());
  CHECK(r::debug_string(p.take()) == "\"OK\"");  // no leftover attributes, not inside the array
}

TEST_CASE("resp3 parser: a consume error is reported with ec cleared first", "[resp3][parser]") {
  r::parser p;
  error_code ec = make_error_code(error::server_error);  // stale value from the caller
  p.consume("+OK\r\n", ec);
  CHECK_FALSE(ec);
}

// ---- pushes and attributes -----------------------------------------------------

TEST_CASE("resp3 parser: pushes interleaved with replies come out in order", "[resp3][parser]") {
  const std::string wire =
      ">3\r\n$9\r\nsubscribe\r\n$2\r\nch\r\n:1\r\n"
      "+OK\r\n"
      ">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\nx\r\n"
      ":7\r\n"
      ">4\r\n$8\r\npmessage\r\n$1\r\n*\r\n$2\r\nch\r\n$1\r\ny\r\n"
      "*2\r\n$1\r\na\r\n$1\r\nb\r\n";
  const outcome o = parse_every_way(wire);
  CHECK_FALSE(o.ec);
  CHECK(render(o.values) == render({push({bulk("subscribe"), bulk("ch"), integer(1)}), simple("OK"),
                                    push({bulk("message"), bulk("ch"), bulk("x")}), integer(7),
                                    push({bulk("pmessage"), bulk("*"), bulk("ch"), bulk("y")}),
                                    arr({bulk("a"), bulk("b")})}));
}

TEST_CASE("resp3 parser: attributes attach to the following value", "[resp3][parser]") {
  SECTION("before a scalar") {
    check_valid("|1\r\n+key\r\n+val\r\n:1\r\n",
                with_attrs(integer(1), {simple("key"), simple("val")}));
  }
  SECTION("before an aggregate") {
    check_valid("|1\r\n+a\r\n:1\r\n*2\r\n:2\r\n:3\r\n",
                with_attrs(arr({integer(2), integer(3)}), {simple("a"), integer(1)}));
  }
  SECTION("before a nested element, only that element gets them") {
    check_valid("*2\r\n:1\r\n|2\r\n+a\r\n+b\r\n+c\r\n+d\r\n$1\r\nx\r\n",
                arr({integer(1),
                     with_attrs(bulk("x"), {simple("a"), simple("b"), simple("c"), simple("d")})}));
  }
  SECTION("before a null") {
    check_valid("|1\r\n+a\r\n+b\r\n$-1\r\n", with_attrs(null(), {simple("a"), simple("b")}));
    check_valid("|1\r\n+a\r\n+b\r\n*-1\r\n", with_attrs(null(), {simple("a"), simple("b")}));
  }
  SECTION("before a map value and a map key") {
    check_valid("%1\r\n|1\r\n+k\r\n+v\r\n+key\r\n|1\r\n+x\r\n+y\r\n:1\r\n",
                map({with_attrs(simple("key"), {simple("k"), simple("v")}),
                     with_attrs(integer(1), {simple("x"), simple("y")})}));
  }
  SECTION("consecutive attribute maps are merged") {
    check_valid("|1\r\n+a\r\n+b\r\n|0\r\n|1\r\n+c\r\n+d\r\n#t\r\n",
                with_attrs(boolean(true), {simple("a"), simple("b"), simple("c"), simple("d")}));
  }
  SECTION("an attribute of an attribute's key") {
    check_valid(
        "|1\r\n|1\r\n+m\r\n+n\r\n+k\r\n+v\r\n:1\r\n",
        with_attrs(integer(1), {with_attrs(simple("k"), {simple("m"), simple("n")}), simple("v")}));
  }
  SECTION("an empty attribute map attaches nothing") { check_valid("|0\r\n:1\r\n", integer(1)); }
  SECTION("only the next value gets them") {
    const outcome o =
        parse_every_way("|1\r\n+a\r\n+b\r\n:1\r\n:2\r\n*1\r\n|1\r\n+c\r\n+d\r\n:3\r\n:4\r\n");
    CHECK_FALSE(o.ec);
    CHECK(render(o.values) ==
          render({with_attrs(integer(1), {simple("a"), simple("b")}), integer(2),
                  arr({with_attrs(integer(3), {simple("c"), simple("d")})}), integer(4)}));
  }
  SECTION("the aggregate that holds an attributed element completes normally") {
    check_valid("*1\r\n|1\r\n+a\r\n+b\r\n*1\r\n:1\r\n",
                arr({with_attrs(arr({integer(1)}), {simple("a"), simple("b")})}));
  }
}

// ---- limits ------------------------------------------------------------------------

TEST_CASE("resp3 parser: max_depth", "[resp3][parser][limits]") {
  SECTION("default limit of 32") {
    check_valid(nested_arrays(32, ":1\r\n"), nested_value(32, integer(1)));
    check_error(nested_arrays(33, ":1\r\n"), error::nesting_too_deep);
  }
  SECTION("custom limit") {
    r::parser_limits lim;
    lim.max_depth = 3;
    check_valid(nested_arrays(3, ":1\r\n"), nested_value(3, integer(1)), lim);
    check_valid(nested_arrays(3, "$-1\r\n"), nested_value(3, null()), lim);  // null is no aggregate
    check_valid(nested_arrays(2, "*0\r\n"), nested_value(2, arr({})), lim);  // empty one at depth 3
    check_error(nested_arrays(3, "*0\r\n"), error::nesting_too_deep, lim);   // even empty
    check_error(nested_arrays(4, ":1\r\n"), error::nesting_too_deep, lim);
    check_error(nested_arrays(3, "%1\r\n+k\r\n+v\r\n"), error::nesting_too_deep, lim);
    check_error("%1\r\n+k\r\n*1\r\n~1\r\n>0\r\n", error::nesting_too_deep, lim);
    // Siblings do not add up: depth is about nesting only.
    check_valid("*3\r\n*1\r\n*0\r\n*1\r\n*0\r\n*1\r\n*0\r\n",
                arr({arr({arr({})}), arr({arr({})}), arr({arr({})})}), lim);
  }
  SECTION("max_depth 0 allows only scalars") {
    r::parser_limits lim;
    lim.max_depth = 0;
    check_valid(":1\r\n", integer(1), lim);
    check_valid("*-1\r\n", null(), lim);
    check_error("*0\r\n", error::nesting_too_deep, lim);
  }
}

TEST_CASE("resp3 parser: max_bulk_length", "[resp3][parser][limits]") {
  r::parser_limits lim;
  lim.max_bulk_length = 8;
  check_valid("$8\r\n12345678\r\n", bulk("12345678"), lim);
  check_valid("!8\r\n12345678\r\n", berr("12345678"), lim);
  check_valid("=8\r\ntxt:1234\r\n", verbatim("1234"), lim);
  check_error("$9\r\n123456789\r\n", error::bulk_too_large, lim);
  check_error("!9\r\n123456789\r\n", error::bulk_too_large, lim);
  check_error("=9\r\ntxt:12345\r\n", error::bulk_too_large, lim);
  check_error("*2\r\n$1\r\na\r\n$9\r\n123456789\r\n", error::bulk_too_large, lim);

  // Rejected from the header alone, before the caller buffers the payload.
  r::parser p(lim);
  error_code ec;
  p.consume("$9\r\n", ec);
  CHECK(ec == make_error_code(error::bulk_too_large));

  // The default (512 MiB) rejects a huge announced length without allocating.
  check_error("$9223372036854775807\r\n", error::bulk_too_large);
}

TEST_CASE("resp3 parser: max_aggregate_elements", "[resp3][parser][limits]") {
  r::parser_limits lim;
  lim.max_aggregate_elements = 2;
  check_valid("*2\r\n:1\r\n:2\r\n", arr({integer(1), integer(2)}), lim);
  check_valid("~2\r\n:1\r\n:2\r\n", set({integer(1), integer(2)}), lim);
  check_valid(">2\r\n:1\r\n:2\r\n", push({integer(1), integer(2)}), lim);
  // For maps the limit counts pairs.
  check_valid("%2\r\n:1\r\n:2\r\n:3\r\n:4\r\n",
              map({integer(1), integer(2), integer(3), integer(4)}), lim);
  check_valid("|2\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n",
              with_attrs(integer(5), {integer(1), integer(2), integer(3), integer(4)}), lim);
  check_error("*3\r\n:1\r\n:2\r\n:3\r\n", error::too_many_elements, lim);
  check_error("~3\r\n", error::too_many_elements, lim);
  check_error(">3\r\n", error::too_many_elements, lim);
  check_error("%3\r\n", error::too_many_elements, lim);
  check_error("|3\r\n", error::too_many_elements, lim);
  check_error("*1\r\n*3\r\n", error::too_many_elements, lim);

  // A huge count is rejected from the header alone, without reserving anything.
  check_error("*9223372036854775807\r\n", error::too_many_elements);
  check_error("%4611686018427387904\r\n", error::too_many_elements);
}

TEST_CASE("resp3 parser: max_reply_bytes", "[resp3][parser][limits]") {
  r::parser_limits lim;
  lim.max_reply_bytes = 12;
  const std::string twelve = "*2\r\n:1\r\n:2\r\n";  // 12 wire bytes
  REQUIRE(twelve.size() == 12);
  check_valid(twelve, arr({integer(1), integer(2)}), lim);

  // The count starts again with every top-level reply.
  const outcome o = parse_every_way(twelve + twelve + "+012345678\r\n", lim);
  CHECK_FALSE(o.ec);
  CHECK(o.values.size() == 3);

  lim.max_reply_bytes = 11;
  check_error(twelve, error::reply_too_large, lim);
  check_error("+0123456789\r\n", error::reply_too_large, lim);
  check_error("$6\r\nhello!\r\n", error::reply_too_large, lim);
  check_error("|1\r\n:1\r\n:2\r\n+OK\r\n", error::reply_too_large, lim);  // attributes count
  check_error(":1\r\n:2\r\n" + twelve, error::reply_too_large, lim);

  SECTION("a pending bulk that would exceed fails from its header") {
    r::parser_limits small;
    small.max_reply_bytes = 16;
    r::parser p(small);
    error_code ec;
    p.consume("$10\r\n", ec);  // 5 + 10 + 2 = 17 bytes announced
    CHECK(ec == make_error_code(error::reply_too_large));

    r::parser q(small);
    q.consume("$9\r\n", ec);  // 4 + 9 + 2 = 15 bytes: fine, waits for the payload
    CHECK_FALSE(ec);
  }
  SECTION("a pending line that would exceed fails before its CRLF") {
    r::parser_limits small;
    small.max_reply_bytes = 5;
    r::parser p(small);
    error_code ec;
    CHECK(p.consume("+OKAY", ec) == 0);  // 5 bytes and still no CRLF: needs at least 7
    CHECK(ec == make_error_code(error::reply_too_large));

    r::parser q(small);
    q.consume("+OK", ec);
    CHECK_FALSE(ec);
    q.consume("+OK\r\n", ec);
    CHECK_FALSE(ec);
    CHECK(q.ready());
  }
  SECTION("inside an aggregate the pending element counts too") {
    r::parser_limits small;
    small.max_reply_bytes = 20;
    r::parser p(small);
    error_code ec;
    p.consume("*2\r\n:1\r\n", ec);  // 8 bytes consumed
    CHECK_FALSE(ec);
    p.consume("+0123456789", ec);  // 11 pending, plus CRLF = 21
    CHECK(ec == make_error_code(error::reply_too_large));
  }
}

TEST_CASE("resp3 parser: max_line_length", "[resp3][parser][limits]") {
  // The limit counts the type byte and the text, not the CRLF.
  r::parser_limits lim;
  lim.max_line_length = 4;
  check_valid("+abc\r\n", simple("abc"), lim);
  check_valid("-err\r\n", serr("err"), lim);
  check_valid(":123\r\n", integer(123), lim);
  check_error("+abcd\r\n", error::line_too_long, lim);
  check_error(":1234\r\n", error::line_too_long, lim);
  check_error("*2\r\n+abcd\r\n", error::line_too_long, lim);

  // Headers are lines too; bulk payloads are not.
  check_valid("$10\r\n0123456789\r\n", bulk("0123456789"), lim);
  check_valid("*10\r\n:0\r\n:1\r\n:2\r\n:3\r\n:4\r\n:5\r\n:6\r\n:7\r\n:8\r\n:9\r\n",
              arr({integer(0), integer(1), integer(2), integer(3), integer(4), integer(5),
                   integer(6), integer(7), integer(8), integer(9)}),
              lim);
  check_error("$1000\r\n", error::line_too_long, lim);
  check_error("*1000\r\n", error::line_too_long, lim);

  // An endless line fails once it is known to be too long, without a CRLF.
  r::parser p(lim);
  error_code ec;
  CHECK(p.consume("+abc", ec) == 0);
  CHECK_FALSE(ec);
  p.consume("+abcd", ec);
  CHECK(ec == make_error_code(error::line_too_long));

  // The default (64 KiB).
  const std::string ok = "+" + std::string(64 * 1024 - 1, 'x') + "\r\n";
  const std::string too_long = "+" + std::string(64 * 1024, 'x') + "\r\n";
  error_code ec2;
  CHECK(r::parse_all(ok, ec2).size() == 1);
  CHECK_FALSE(ec2);
  r::parse_all(too_long, ec2);
  CHECK(ec2 == make_error_code(error::line_too_long));
  r::parser q;
  q.consume(std::string(1024 * 1024, 'x').insert(0, "+"), ec2);
  CHECK(ec2 == make_error_code(error::line_too_long));
}

// ---- large replies arriving in many reads --------------------------------------

namespace {

// Feeds `wire` in `chunk`-byte reads like the connection does and checks that
// each byte is consumed exactly once and that after each read only an
// incomplete token (shorter than `max_token`) stays in the buffer.
std::vector<r::value> feed_in_chunks(const std::string& wire, std::size_t chunk,
                                     std::size_t max_token) {
  r::parser p;
  std::vector<r::value> out;
  std::string buf;
  std::size_t consumed = 0;
  std::size_t presented = 0;
  std::size_t calls = 0;
  bool leftover_ok = true;
  for (std::size_t pos = 0; pos < wire.size(); pos += chunk) {
    buf.append(wire, pos, chunk);
    for (;;) {
      error_code ec;
      const std::size_t n = p.consume(buf, ec);
      ++calls;
      REQUIRE_FALSE(ec);
      consumed += n;
      presented += buf.size();
      buf.erase(0, n);
      if (!p.ready()) break;
      out.push_back(p.take());
    }
    if (buf.size() >= max_token) leftover_ok = false;
  }
  CHECK(leftover_ok);
  CHECK(buf.empty());
  CHECK(consumed == wire.size());
  // Every byte is presented at most twice (once when it arrives, once more
  // if it belonged to a token that was incomplete at the end of a read).
  CHECK(presented <= wire.size() + calls * max_token);
  return out;
}

}  // namespace

TEST_CASE("resp3 parser: a 100k-element array in 4 KiB reads", "[resp3][parser]") {
  constexpr std::size_t n = 100'000;
  std::string wire = "*" + std::to_string(n) + "\r\n";
  for (std::size_t i = 0; i < n; ++i) wire += ":" + std::to_string(i) + "\r\n";

  auto values = feed_in_chunks(wire, 4096, 9);  // the longest token is ":99999\r\n" (8 bytes)
  REQUIRE(values.size() == 1);
  REQUIRE(values[0].type == r::type::array);
  REQUIRE(values[0].elements.size() == n);
  bool all_match = true;
  for (std::size_t i = 0; i < n; ++i) {
    const auto& e = values[0].elements[i];
    if (e.type != r::type::number || e.integer != static_cast<std::int64_t>(i)) all_match = false;
  }
  CHECK(all_match);
}

TEST_CASE("resp3 parser: a large map of bulk strings in 4 KiB reads", "[resp3][parser]") {
  constexpr std::size_t pairs = 20'000;
  std::string wire = "%" + std::to_string(pairs) + "\r\n";
  for (std::size_t i = 0; i < pairs; ++i) {
    const std::string k = "field:" + std::to_string(i);
    const std::string v(i % 100, static_cast<char>('a' + i % 26));
    wire += "$" + std::to_string(k.size()) + "\r\n" + k + "\r\n";
    wire += "$" + std::to_string(v.size()) + "\r\n" + v + "\r\n";
  }
  wire += "+after\r\n";

  auto values = feed_in_chunks(wire, 4096, 110);
  REQUIRE(values.size() == 2);
  REQUIRE(values[0].elements.size() == 2 * pairs);
  CHECK(values[0].elements[2 * 1234].str == "field:1234");
  CHECK(values[0].elements[2 * 1234 + 1].str ==
        std::string(34, static_cast<char>('a' + 1234 % 26)));
  CHECK(values[1] == simple("after"));
}

TEST_CASE("resp3 parser: a 1 MiB bulk string arriving in 4 KiB reads", "[resp3][parser]") {
  std::string payload(1024 * 1024, '\0');
  for (std::size_t i = 0; i < payload.size(); ++i) payload[i] = static_cast<char>(i * 7);
  const std::string wire = "$" + std::to_string(payload.size()) + "\r\n" + payload + "\r\n";

  r::parser p;
  std::string buf;
  std::size_t consumed = 0;
  for (std::size_t pos = 0; pos < wire.size(); pos += 4096) {
    buf.append(wire, pos, 4096);
    error_code ec;
    const std::size_t n = p.consume(buf, ec);
    REQUIRE_FALSE(ec);
    consumed += n;
    buf.erase(0, n);
  }
  CHECK(consumed == wire.size());
  REQUIRE(p.ready());
  CHECK(p.take().str == payload);
}

// ---- rendering -------------------------------------------------------------------

TEST_CASE("resp3 value: to_string names every type", "[resp3][value]") {
  CHECK(r::to_string(r::type::simple_string) == "simple_string");
  CHECK(r::to_string(r::type::simple_error) == "simple_error");
  CHECK(r::to_string(r::type::blob_string) == "blob_string");
  CHECK(r::to_string(r::type::blob_error) == "blob_error");
  CHECK(r::to_string(r::type::verbatim_string) == "verbatim_string");
  CHECK(r::to_string(r::type::number) == "number");
  CHECK(r::to_string(r::type::double_number) == "double_number");
  CHECK(r::to_string(r::type::boolean) == "boolean");
  CHECK(r::to_string(r::type::big_number) == "big_number");
  CHECK(r::to_string(r::type::null) == "null");
  CHECK(r::to_string(r::type::array) == "array");
  CHECK(r::to_string(r::type::map) == "map");
  CHECK(r::to_string(r::type::set) == "set");
  CHECK(r::to_string(r::type::push) == "push");
}

TEST_CASE("resp3 value: debug_string", "[resp3][value]") {
  CHECK(
      r::debug_string(arr({bulk("a\0b"s), integer(1), null(), map({simple("k"), simple("v")})})) ==
      R"([bulk "a\x00b", int 1, null, map{"k": "v"}])");
  CHECK(r::debug_string(simple("q\"\\\r\n\x7f\xff")) == R"("q\"\\\x0d\x0a\x7f\xff")");
  CHECK(r::debug_string(serr("ERR x")) == R"(error "ERR x")");
  CHECK(r::debug_string(berr("E")) == R"(blob_error "E")");
  CHECK(r::debug_string(verbatim("t")) == R"(verbatim "t")");
  CHECK(r::debug_string(integer(-5)) == "int -5");
  CHECK(r::debug_string(dbl(2.5)) == "double 2.5");
  CHECK(r::debug_string(dbl(std::numeric_limits<double>::infinity())) == "double inf");
  CHECK(r::debug_string(dbl(-std::numeric_limits<double>::infinity())) == "double -inf");
  CHECK(r::debug_string(dbl(std::numeric_limits<double>::quiet_NaN())) == "double nan");
  CHECK(r::debug_string(boolean(true)) == "true");
  CHECK(r::debug_string(boolean(false)) == "false");
  CHECK(r::debug_string(bignum("-123")) == "bignum -123");
  CHECK(r::debug_string(set({integer(1), integer(2)})) == "set{int 1, int 2}");
  CHECK(r::debug_string(push({bulk("message")})) == R"(push[bulk "message"])");
  CHECK(r::debug_string(arr({})) == "[]");
  CHECK(r::debug_string(with_attrs(integer(1), {simple("ttl"), integer(3600)})) ==
        R"(attr{"ttl": int 3600} int 1)");
  // A string that looks like a type tag stays distinguishable from that type.
  CHECK(r::debug_string(simple("int 1")) != r::debug_string(integer(1)));
  CHECK(r::debug_string(bulk("x")) != r::debug_string(simple("x")));
}

// ---- memory per reply ------------------------------------------------------------

namespace {

// Feeds `wire` in `chunk`-byte reads (like the connection) until an error,
// returning it and how many bytes were consumed.
std::pair<error_code, std::size_t> feed_until_error(std::string_view wire, std::size_t chunk,
                                                    r::parser_limits limits = {}) {
  r::parser p(limits);
  std::string buf;
  std::size_t consumed = 0;
  error_code ec;
  for (std::size_t pos = 0; pos < wire.size() && !ec; pos += chunk) {
    buf.append(wire.substr(pos, chunk));
    for (;;) {
      const std::size_t n = p.consume(buf, ec);
      consumed += n;
      buf.erase(0, n);
      if (ec || !p.ready()) break;
      (void)p.take();
    }
  }
  return {ec, consumed};
}

std::string array_of(std::size_t n, std::string_view element) {
  std::string wire = "*" + std::to_string(n) + "\r\n";
  wire.reserve(wire.size() + n * element.size());
  for (std::size_t i = 0; i < n; ++i) wire += element;
  return wire;
}

}  // namespace

TEST_CASE("resp3 parser: max_reply_values", "[resp3][parser][limits]") {
  r::parser_limits lim;
  lim.max_reply_values = 3;
  // The reply itself counts: an array of two is three values.
  check_valid("*2\r\n:1\r\n:2\r\n", arr({integer(1), integer(2)}), lim);
  check_error("*3\r\n:1\r\n:2\r\n:3\r\n", error::reply_too_many_values, lim);
  // Nulls, nested aggregates and map keys all count.
  check_valid("*2\r\n_\r\n$-1\r\n", arr({null(), null()}), lim);
  check_valid("*1\r\n*1\r\n:1\r\n", arr({arr({integer(1)})}), lim);
  check_error("*1\r\n*1\r\n*1\r\n*0\r\n", error::reply_too_many_values, lim);
  check_valid("%1\r\n+k\r\n+v\r\n", map({simple("k"), simple("v")}), lim);
  check_error("%2\r\n+k\r\n+v\r\n+k\r\n+v\r\n", error::reply_too_many_values, lim);
  // Attribute entries count with the value they describe.
  check_valid("|1\r\n:1\r\n:2\r\n+OK\r\n", with_attrs(simple("OK"), {integer(1), integer(2)}), lim);
  check_error("|1\r\n:1\r\n:2\r\n*1\r\n:3\r\n", error::reply_too_many_values, lim);
  // The count starts again with every top-level reply.
  const outcome o = parse_every_way("*2\r\n:1\r\n:2\r\n*2\r\n:1\r\n:2\r\n:5\r\n", lim);
  CHECK_FALSE(o.ec);
  CHECK(o.values.size() == 3);

  SECTION("an aggregate is counted when its header is read") {
    r::parser_limits one;
    one.max_reply_values = 1;
    check_valid(":1\r\n", integer(1), one);
    check_valid("*0\r\n", arr({}), one);
    r::parser p(one);
    error_code ec;
    CHECK(p.consume("*1\r\n", ec) == 4);
    CHECK_FALSE(ec);
    CHECK(p.consume(":1\r\n", ec) == 0);
    CHECK(ec == make_error_code(error::reply_too_many_values));
  }
  SECTION("a limit of 0 refuses every reply") {
    r::parser_limits none;
    none.max_reply_values = 0;
    check_error(":1\r\n", error::reply_too_many_values, none);
    check_error("$-1\r\n", error::reply_too_many_values, none);
  }
}

TEST_CASE("resp3 parser: max_reply_memory", "[resp3][parser][limits]") {
  const auto list = [](std::size_t n) { return r::value_list::storage_bytes(n); };
  const std::size_t inline_chars = std::string().capacity();

  SECTION("element storage is counted when it is reserved") {
    r::parser_limits lim;
    lim.max_reply_memory = 2 * list(2);
    check_valid("*4\r\n:1\r\n:2\r\n:3\r\n:4\r\n",
                arr({integer(1), integer(2), integer(3), integer(4)}), lim);
    check_valid("*2\r\n*2\r\n:1\r\n:2\r\n:3\r\n", arr({arr({integer(1), integer(2)}), integer(3)}),
                lim);
    check_error("*5\r\n", error::reply_memory_exceeded, lim);
    check_error("*2\r\n*3\r\n", error::reply_memory_exceeded, lim);
    check_error("%3\r\n", error::reply_memory_exceeded, lim);  // three pairs: six slots
    check_error("|3\r\n", error::reply_memory_exceeded, lim);
    // Refused from the header alone, before the elements arrive.
    r::parser p(lim);
    error_code ec;
    p.consume("*5\r\n", ec);
    CHECK(ec == make_error_code(error::reply_memory_exceeded));
  }
  SECTION("strings count when they outgrow the small-string buffer") {
    const std::string small(inline_chars, 'x');
    const std::string large(100, 'y');
    r::parser_limits lim;
    lim.max_reply_memory = 0;
    check_valid("$" + std::to_string(small.size()) + "\r\n" + small + "\r\n", bulk(small), lim);
    check_valid("+" + small + "\r\n", simple(small), lim);
    check_error("$100\r\n" + large + "\r\n", error::reply_memory_exceeded, lim);
    check_error("+" + large + "\r\n", error::reply_memory_exceeded, lim);
    check_error("-" + large + "\r\n", error::reply_memory_exceeded, lim);
    check_error("=104\r\ntxt:" + large + "\r\n", error::reply_memory_exceeded, lim);
    lim.max_reply_memory = large.size();  // one byte short: the terminator is heap too
    check_error("$100\r\n" + large + "\r\n", error::reply_memory_exceeded, lim);
    lim.max_reply_memory = large.size() + 1;
    check_valid("$100\r\n" + large + "\r\n", bulk(large), lim);
    check_valid("=104\r\ntxt:" + large + "\r\n", verbatim(large), lim);
    // Element storage and strings add up.
    lim.max_reply_memory = list(1) + large.size();
    check_error("*1\r\n$100\r\n" + large + "\r\n", error::reply_memory_exceeded, lim);
    lim.max_reply_memory = list(1) + large.size() + 1;
    check_valid("*1\r\n$100\r\n" + large + "\r\n", arr({bulk(large)}), lim);
  }
  SECTION("regrowing an array beyond its first reservation is refused before it happens") {
    // An announced count is only reserved up to 1024 elements; the 1025th
    // regrows the storage, to the announced count at most.
    const std::string wire = array_of(1025, ":1\r\n");
    r::parser_limits lim;
    lim.max_reply_memory = list(1025) - 1;
    auto [ec, consumed] = feed_until_error(wire, 4096, lim);
    CHECK(ec == make_error_code(error::reply_memory_exceeded));
    // Everything up to the 1025th element was accepted.
    CHECK(consumed == std::string("*1025\r\n").size() + 1024 * 4);
    lim.max_reply_memory = list(1025);
    std::tie(ec, consumed) = feed_until_error(wire, 4096, lim);
    CHECK_FALSE(ec);
    CHECK(consumed == wire.size());
  }
  SECTION("the count starts again with every top-level reply") {
    r::parser_limits lim;
    lim.max_reply_memory = list(2);
    const outcome o = parse_every_way("*2\r\n:1\r\n:2\r\n*2\r\n:1\r\n:2\r\n", lim);
    CHECK_FALSE(o.ec);
    CHECK(o.values.size() == 2);
  }
}

TEST_CASE("resp3 parser: ready_memory is the estimate of the value to take",
          "[resp3][parser][limits]") {
  const auto list = [](std::size_t n) { return r::value_list::storage_bytes(n); };
  const std::string large(100, 'y');
  const std::pair<std::string, std::size_t> vectors[] = {
      {":1\r\n", 0},
      {"_\r\n", 0},
      {"+OK\r\n", 0},
      {"*0\r\n", 0},
      {"*2\r\n:1\r\n:2\r\n", list(2)},
      {"%1\r\n+k\r\n+v\r\n", list(2)},
      {"$100\r\n" + large + "\r\n", large.size() + 1},
      {"*2\r\n$100\r\n" + large + "\r\n*1\r\n_\r\n", list(2) + large.size() + 1 + list(1)},
      // The attribute map's storage goes with the value it describes.
      {"|1\r\n+ttl\r\n:3600\r\n+OK\r\n", list(2)},
  };
  for (const auto& [wire, expected] : vectors) {
    INFO("input: " << printable(wire));
    // Every split of the input gives the same estimate.
    for (std::size_t k = 0; k <= wire.size(); ++k) {
      r::parser p;
      error_code ec;
      std::string buf = wire.substr(0, k);
      buf.erase(0, p.consume(buf, ec));
      buf += wire.substr(k);
      buf.erase(0, p.consume(buf, ec));
      REQUIRE_FALSE(ec);
      REQUIRE(p.ready());
      CHECK(p.ready_memory() == expected);
      (void)p.take();
      CHECK(buf.empty());
    }
  }
}

namespace {

// Feeds `input` in the chunks delimited by `cuts` as a connection does for
// one request whose replies are all of `input`: the memory of each reply
// taken is held (set_held_memory) while the next ones are parsed, on top of
// `held` at the start. Returns the outcome and the held memory at the end.
std::pair<outcome, std::size_t> feed_one_request(std::string_view input,
                                                 const std::vector<std::size_t>& cuts,
                                                 r::parser_limits limits, std::size_t held) {
  r::parser p(limits);
  outcome o;
  std::string buf;
  std::size_t fed = 0;
  auto deliver = [&](std::size_t upto) {
    buf.append(input.substr(fed, upto - fed));
    fed = upto;
    for (;;) {
      p.set_held_memory(held);
      const std::size_t n = p.consume(buf, o.ec);
      o.consumed += n;
      buf.erase(0, n);
      if (o.ec || !p.ready()) return !o.ec;
      held += p.ready_memory();
      o.values.push_back(p.take());
    }
  };
  for (std::size_t c : cuts)
    if (!deliver(c)) return {o, held};
  deliver(input.size());
  return {o, held};
}

// feed_one_request whole, split in two at every offset and a byte at a
// time: all must agree. Returns the outcome of the whole input.
std::pair<outcome, std::size_t> one_request_every_way(std::string_view input,
                                                      r::parser_limits limits,
                                                      std::size_t held = 0) {
  INFO("input: " << printable(input));
  const auto whole = feed_one_request(input, {}, limits, held);
  const std::string expected = whole.first.describe();
  for (std::size_t k = 1; k < input.size(); ++k) {
    const auto split = feed_one_request(input, {k}, limits, held);
    if (split.first.describe() != expected || split.second != whole.second) {
      INFO("split at " << k);
      CHECK(split.first.describe() == expected);
      CHECK(split.second == whole.second);
      break;
    }
  }
  std::vector<std::size_t> bytes;
  for (std::size_t k = 1; k < input.size(); ++k) bytes.push_back(k);
  const auto bytewise = feed_one_request(input, bytes, limits, held);
  CHECK(bytewise.first.describe() == expected);
  CHECK(bytewise.second == whole.second);
  return whole;
}

}  // namespace

TEST_CASE("resp3 parser: held memory counts against max_reply_memory", "[resp3][parser][limits]") {
  const auto list = [](std::size_t n) { return r::value_list::storage_bytes(n); };
  const std::string reply = "*3\r\n:1\r\n_\r\n+OK\r\n";  // list(3) each
  r::parser_limits lim;
  lim.max_reply_memory = 2 * list(3) + list(3) / 2;

  SECTION("replies held for one request add up; each alone is under the limit") {
    check_valid(reply, arr({integer(1), null(), simple("OK")}), lim);
    auto [two, held] = one_request_every_way(reply + reply, lim);
    CHECK_FALSE(two.ec);
    CHECK(two.values.size() == 2);
    CHECK(held == 2 * list(3));
    // The third reply is refused at its header, before its elements: it
    // would hold storage for three more values.
    auto [three, held3] = one_request_every_way(reply + reply + reply, lim);
    CHECK(three.ec == make_error_code(error::reply_memory_exceeded));
    CHECK(three.values.size() == 2);
    CHECK(three.consumed == 2 * reply.size());
    CHECK(held3 == 2 * list(3));
  }
  SECTION("replies that take no memory still pass when the limit is reached") {
    auto [o, held] = one_request_every_way(reply + reply + ":7\r\n_\r\n+OK\r\n", lim);
    CHECK_FALSE(o.ec);
    CHECK(o.values.size() == 5);
    CHECK(held == 2 * list(3));
  }
  SECTION("the held memory the owner reports leaves the rest for the next reply") {
    const std::size_t left = list(3);
    auto [fits, h1] = one_request_every_way(reply, lim, lim.max_reply_memory - left);
    CHECK_FALSE(fits.ec);
    auto [over, h2] = one_request_every_way(reply, lim, lim.max_reply_memory - left + 1);
    CHECK(over.ec == make_error_code(error::reply_memory_exceeded));
    // More held than the limit (the owner's figure is not trusted to be
    // smaller): nothing that needs memory passes, and nothing wraps around.
    auto [none, h3] = one_request_every_way(reply, lim, std::size_t(-1));
    CHECK(none.ec == make_error_code(error::reply_memory_exceeded));
    auto [scalars, h4] = one_request_every_way(":1\r\n_\r\n", lim, std::size_t(-1));
    CHECK_FALSE(scalars.ec);
    CHECK(scalars.values.size() == 2);
  }
  SECTION("a held reply's strings and nested lists count too") {
    const std::string large(200, 'z');
    const std::string big = "*1\r\n*1\r\n$200\r\n" + large + "\r\n";
    const std::size_t one = 2 * list(1) + large.size() + 1;
    r::parser_limits exact;
    exact.max_reply_memory = 3 * one;
    auto [o, held] = one_request_every_way(big + big + big, exact);
    CHECK_FALSE(o.ec);
    CHECK(held == 3 * one);
    exact.max_reply_memory = 3 * one - 1;
    auto [o2, held2] = one_request_every_way(big + big + big, exact);
    CHECK(o2.ec == make_error_code(error::reply_memory_exceeded));
    CHECK(o2.values.size() == 2);
  }
  SECTION("reset() forgets the held memory") {
    r::parser p(lim);
    p.set_held_memory(lim.max_reply_memory);
    error_code ec;
    p.reset();
    CHECK(p.held_memory() == 0);
    CHECK(p.consume(reply, ec) == reply.size());
    CHECK_FALSE(ec);
    CHECK(p.ready());
  }
}

TEST_CASE("resp3 value: a node is small and a parsed aggregate has no spare capacity",
          "[resp3][value][limits]") {
  // A std::string (so long text moves out without a copy), one 8-byte slot
  // shared by the number and the double, two one-pointer element lists and
  // the type.
  CHECK(sizeof(r::value) <= sizeof(std::string) + 32);
  // Grown in steps from 1024, but never past the announced count.
  for (std::size_t n : {1u, 1024u, 1025u, 100'000u}) {
    INFO("elements: " << n);
    r::parser p;
    error_code ec;
    const std::string wire = array_of(n, "_\r\n");
    CHECK(p.consume(wire, ec) == wire.size());
    REQUIRE(p.ready());
    CHECK(p.ready_memory() == r::value_list::storage_bytes(n));
    const r::value v = p.take();
    CHECK(v.elements.size() == n);
    CHECK(v.elements.capacity() == n);
  }
}

TEST_CASE("resp3 parser: the defaults refuse a reply of four million nulls early",
          "[resp3][parser][limits]") {
  // 12 MB on the wire; parsed whole it would take 256 MB (a 64-byte node
  // per null). The default max_reply_values stops it after a million values.
  constexpr std::size_t n = 4'000'000;
  const std::string wire = array_of(n, "_\r\n");
  const r::parser_limits defaults;
  REQUIRE(wire.size() < defaults.max_reply_bytes);
  REQUIRE(n <= defaults.max_aggregate_elements);

  auto [ec, consumed] = feed_until_error(wire, 64 * 1024);
  CHECK(ec == make_error_code(error::reply_too_many_values));
  // Refused at the first value past the limit (the array is value 1).
  CHECK(consumed == std::string("*4000000\r\n").size() + (defaults.max_reply_values - 1) * 3);

  // Memory, measured in a child process so that nothing else this test
  // binary allocated counts: the growth of its peak resident size while it
  // parses the reply.
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(fds[0]);
    rusage before{}, after{};
    ::getrusage(RUSAGE_SELF, &before);
    r::parser p;
    const std::size_t chunk = 64 * 1024;
    error_code cec;
    std::string buf;
    for (std::size_t pos = 0; pos < wire.size() && !cec; pos += chunk) {
      buf.append(wire, pos, chunk);
      buf.erase(0, p.consume(buf, cec));
    }
    ::getrusage(RUSAGE_SELF, &after);
    const long grown_kb = after.ru_maxrss - before.ru_maxrss;
    [[maybe_unused]] auto w = ::write(fds[1], &grown_kb, sizeof grown_kb);
    ::_exit(cec == make_error_code(error::reply_too_many_values) ? 0 : 1);
  }
  ::close(fds[1]);
  long grown_kb = -1;
  const auto got = ::read(fds[0], &grown_kb, sizeof grown_kb);
  ::close(fds[0]);
  int status = 0;
  ::waitpid(child, &status, 0);
  CHECK(got == static_cast<ssize_t>(sizeof grown_kb));
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);
  WARN("peak resident growth while refusing 4,000,000 nulls: " << grown_kb / 1024 << " MiB");
  // A million 64-byte nodes (64 MiB), and for a moment the 32 MiB they
  // were regrown from: about 100 MiB, somewhat more under ASan. Nodes of
  // 104 bytes took about 220 MiB here under ASan.
  CHECK(grown_kb > 0);
  CHECK(grown_kb < 192 * 1024);
}
