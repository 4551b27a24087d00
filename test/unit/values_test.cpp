// No-I/O checks of how the library reads and sends numbers: the one integer
// rule (detail::parse_int, ^-?[0-9]+$), config numbers as the scripts read
// them (detail::read_config_int, the same rule as includes/numbers.lua's conf_int),
// doubles made integers without undefined behaviour (int_of_double,
// jobs::as_int), and the range of times sent to the scripts
// (jobs/time_limits.hpp: at most 2^53 - 1 ms either way, no overflow).
#include "detail/parse_int.hpp"
#include "feeds/common.hpp"
#include "jobs/reply_parse.hpp"
#include "jobs/time_limits.hpp"

#include <thoonk/resp3/value.hpp>

#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

using thoonk::detail::int_of_double;
using thoonk::detail::parse_int;
using thoonk::detail::parse_int_in;
using thoonk::detail::read_config_int;
namespace tj = thoonk::detail::jobs;
using std::chrono::milliseconds;

namespace {

constexpr std::int64_t values_limit = 9007199254740991;  // 2^53 - 1
constexpr std::int64_t values_i64_max = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t values_i64_min = std::numeric_limits<std::int64_t>::min();

// Texts no integer reader of the library takes: each is something
// tonumber() in Lua or strtoll() would read as a number.
const std::vector<std::string>& values_not_plain() {
  static const std::vector<std::string> v{"",    "-",   "+5",  " 5",  "5 ",   "5\n",  "5.0",
                                          "5.",  ".5",  "1e3", "1E3", "0x10", "0X10", "010x",
                                          "inf", "nan", "--5", "5-",  "5a",   "\t5",  "٥"};
  return v;
}

}  // namespace

TEST_CASE("parse_int: only ^-?[0-9]+$ within the type's range", "[unit][values][parse]") {
  CHECK(parse_int<std::int64_t>("0") == 0);
  CHECK(parse_int<std::int64_t>("-0") == 0);
  CHECK(parse_int<std::int64_t>("000123") == 123);
  CHECK(parse_int<std::int64_t>("-42") == -42);
  CHECK(parse_int<std::int64_t>("9223372036854775807") == values_i64_max);
  CHECK(parse_int<std::int64_t>("-9223372036854775808") == values_i64_min);
  // One past each end: refused, not wrapped or clamped.
  CHECK(!parse_int<std::int64_t>("9223372036854775808"));
  CHECK(!parse_int<std::int64_t>("-9223372036854775809"));
  CHECK(!parse_int<std::int64_t>("99999999999999999999"));
  // Unsigned types take no sign at all.
  CHECK(parse_int<std::uint64_t>("18446744073709551615") ==
        std::numeric_limits<std::uint64_t>::max());
  CHECK(!parse_int<std::uint64_t>("-0"));
  CHECK(!parse_int<std::uint64_t>("-1"));
  CHECK(!parse_int<unsigned>("4294967296"));
  for (const auto& s : values_not_plain()) {
    INFO("'" << s << "'");
    CHECK(!parse_int<std::int64_t>(s));
    CHECK(!parse_int<std::uint64_t>(s));
  }
  // A NUL inside the text is not the end of it.
  CHECK(
      !parse_int<std::int64_t>(std::string_view("5\0"
                                                "5",
                                                3)));
}

TEST_CASE(
    "parse_int_in and read_config_int: a config number the scripts would replace by the "
    "default is unset",
    "[unit][values][config]") {
  CHECK(parse_int_in("5", 1, 10) == 5);
  CHECK(!parse_int_in("0", 1, 10));
  CHECK(!parse_int_in("11", 1, 10));
  CHECK(parse_int_in("-3", -5, 0) == -3);

  // The ranges are validate_config_field's, so the two agree on plain digits.
  CHECK(read_config_int("claim_timeout_ms", "1000") == 1000);
  CHECK(read_config_int("claim_timeout_ms", "9007199254740991") == values_limit);
  CHECK(!read_config_int("claim_timeout_ms", "9007199254740992"));
  CHECK(!read_config_int("claim_timeout_ms", "0"));   // below 1
  CHECK(!read_config_int("claim_timeout_ms", "-5"));  // below 1
  CHECK(!read_config_int("claim_timeout_ms", "-0"));  // 0, below 1
  CHECK(read_config_int("min_backoff_ms", "0") == 0);
  CHECK(read_config_int("min_backoff_ms", "-0") == 0);  // the scripts read 0 too
  CHECK(read_config_int("rate_limit", "1000000") == 1000000);
  CHECK(!read_config_int("rate_limit", "1000001"));
  CHECK(read_config_int("max_length", "0") == 0);
  CHECK(read_config_int("retraction_log", "0") == 0);
  // What tonumber() in a script would take but the rule does not.
  for (const auto& s : values_not_plain()) {
    INFO("'" << s << "'");
    CHECK(!read_config_int("claim_timeout_ms", s));
    CHECK(!read_config_int("max_length", s));
  }
  CHECK(!read_config_int("claim_timeout_ms", "99999999999999999999"));
  // Fields that are not numbers, and unknown fields, have no number.
  CHECK(!read_config_int("events", "1"));
  CHECK(!read_config_int("dead_letter_queue", "5"));
  CHECK(!read_config_int("an_application_field", "5"));
  // A value a write accepts reads back as itself.
  for (const std::string v : {"1", "60000", "9007199254740991"}) {
    CHECK(!thoonk::detail::validate_config_field("claim_timeout_ms", v).ec);
    CHECK(read_config_int("claim_timeout_ms", v) == std::stoll(v));
  }
}

TEST_CASE("int_of_double and jobs::as_int: no cast of a double outside std::int64_t",
          "[unit][values][as_int]") {
  CHECK(int_of_double(0.0) == 0);
  CHECK(int_of_double(-1.9) == -1);  // truncated toward zero
  CHECK(int_of_double(1.9) == 1);
  CHECK(int_of_double(9007199254740991.0) == values_limit);
  CHECK(int_of_double(-9223372036854775808.0) == values_i64_min);      // -2^63 fits
  CHECK(int_of_double(9223372036854774784.0) == 9223372036854774784);  // the largest below 2^63
  CHECK(!int_of_double(9223372036854775808.0));                        // 2^63 does not
  CHECK(!int_of_double(1e300));
  CHECK(!int_of_double(-1e300));
  CHECK(!int_of_double(std::numeric_limits<double>::infinity()));
  CHECK(!int_of_double(-std::numeric_limits<double>::infinity()));
  CHECK(!int_of_double(std::nan("")));

  thoonk::resp3::value d;
  d.type = thoonk::resp3::type::double_number;
  d.dbl = 1e19;
  CHECK(tj::as_int(d, -7) == -7);  // the fallback, never INT64_MIN
  d.dbl = std::nan("");
  CHECK(tj::as_int(d, -7) == -7);
  d.dbl = 12.75;
  CHECK(tj::as_int(d, -7) == 12);
  thoonk::resp3::value s;
  s.type = thoonk::resp3::type::blob_string;
  s.str = "1e3";
  CHECK(tj::as_int(s, -7) == -7);
  s.str = "-9223372036854775808";
  CHECK(tj::as_int(s, -7) == values_i64_min);
}

TEST_CASE("time limits: times and durations beyond 2^53 - 1 ms are refused, sums never overflow",
          "[unit][values][time]") {
  CHECK(tj::max_time_ms == values_limit);
  CHECK(tj::time_in_range(values_limit));
  CHECK(tj::time_in_range(-values_limit));
  CHECK(tj::time_in_range(std::int64_t{0}));
  CHECK(!tj::time_in_range(values_limit + 1));
  CHECK(!tj::time_in_range(-values_limit - 1));
  CHECK(!tj::time_in_range(values_i64_max));
  CHECK(!tj::time_in_range(values_i64_min));
  CHECK(!tj::time_in_range(milliseconds::max()));
  CHECK(!tj::time_in_range(milliseconds::min()));
  CHECK(tj::time_in_range(std::optional<std::int64_t>{}));
  CHECK(tj::time_in_range(std::optional<milliseconds>{}));
  CHECK(!tj::time_in_range(std::optional<milliseconds>(milliseconds::max())));

  const thoonk::epoch_ms now = 1'700'000'000'000;
  using opt_at = std::optional<thoonk::epoch_ms>;
  using opt_delay = std::optional<milliseconds>;
  CHECK(tj::put_run_at(now, {}, {}) == now);
  CHECK(tj::put_run_at(now, {}, milliseconds(5000)) == now + 5000);
  CHECK(tj::put_run_at(now, {}, milliseconds(-5000)) == now - 5000);
  CHECK(tj::put_run_at(now, opt_at(42), {}) == 42);
  CHECK(tj::put_run_at(now, opt_at(values_limit), {}) == values_limit);
  CHECK(tj::put_run_at(now, opt_at(-values_limit), {}) == -values_limit);
  CHECK(tj::put_run_at(now, {}, milliseconds(values_limit - now)) == values_limit);
  // Refused: the value itself, or the sum, past the limit.
  CHECK(!tj::put_run_at(now, opt_at(values_limit + 1), {}));
  CHECK(!tj::put_run_at(now, opt_at(values_i64_max), {}));
  CHECK(!tj::put_run_at(now, opt_at(values_i64_min), {}));
  CHECK(!tj::put_run_at(now, {}, milliseconds::max()));  // now + max would wrap negative
  CHECK(!tj::put_run_at(now, {}, milliseconds::min()));
  CHECK(!tj::put_run_at(now, {}, milliseconds(values_limit)));  // in range alone, not the sum
  CHECK(!tj::put_run_at(now, {}, milliseconds(values_limit - now + 1)));
  CHECK(!tj::put_run_at(-now, {}, milliseconds(-values_limit)));
  // A delay beside run_at is ignored, but still checked.
  CHECK(!tj::put_run_at(now, opt_at(42), opt_delay(milliseconds::max())));
  CHECK(tj::put_run_at(now, opt_at(42), opt_delay(milliseconds(7))) == 42);
  CHECK(!tj::put_run_at(values_i64_max, {}, {}));

  CHECK(tj::twice_capped(milliseconds(1000)) == milliseconds(2000));
  CHECK(tj::twice_capped(milliseconds(0)) == milliseconds(0));
  CHECK(tj::twice_capped(milliseconds::max()) <= milliseconds(values_limit));
  CHECK(tj::twice_capped(milliseconds::max()) > milliseconds(values_limit - 2));
  CHECK(tj::twice_capped(milliseconds::min()) >= milliseconds(-values_limit));

  // A timer's wait: at most what steady_clock's nanoseconds hold.
  CHECK(tj::timer_capped(milliseconds(1500)) == milliseconds(1500));
  const auto most = tj::timer_capped(milliseconds(values_limit));
  CHECK(most < milliseconds(values_limit));
  CHECK(std::chrono::duration_cast<std::chrono::steady_clock::duration>(most).count() > 0);
  CHECK(tj::timer_capped(milliseconds::max()) == most);
}
