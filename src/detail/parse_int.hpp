// The one rule by which the library reads an integer written as text:
// config fields, counters and numbers in replies, hand-off messages, URL
// parts. The scripts read config numbers by the same rule
// (src/lua/includes/numbers.lua, conf_int), so a value the C++ side reads as unset
// is one the scripts replace by the default, and the reverse.
#pragma once

#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>
#include <system_error>
#include <type_traits>

namespace thoonk::detail {

/// The integer that all of `s` spells, or nullopt. Accepted: an optional
/// '-' (for signed types only), then one or more ASCII digits, and nothing
/// else (the pattern ^-?[0-9]+$): no space, '+', point, exponent or "0x".
/// A value that does not fit in Int is nullopt, never wrapped or clamped.
template <class Int>
std::optional<Int> parse_int(std::string_view s) noexcept {
  static_assert(std::is_integral_v<Int> && !std::is_same_v<Int, bool>);
  Int v{};
  if (s.empty()) return std::nullopt;
  // std::from_chars in base 10 takes exactly that pattern (a leading '-'
  // only for signed types); it stops at the first other character, so the
  // whole text must have been used.
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

/// parse_int<std::int64_t>, and within [lo, hi]: how a config number is
/// read. Outside the range (or not an integer) it is nullopt, and the
/// caller uses the field's default.
inline std::optional<std::int64_t> parse_int_in(std::string_view s, std::int64_t lo,
                                                std::int64_t hi) noexcept {
  auto v = parse_int<std::int64_t>(s);
  if (!v || *v < lo || *v > hi) return std::nullopt;
  return v;
}

/// A double (a RESP3 double reply, a JSON number) as an integer: truncated
/// toward zero when the result fits in std::int64_t; nullopt when it does
/// not, or is NaN or infinite (a cast would be undefined behaviour there).
inline std::optional<std::int64_t> int_of_double(double d) noexcept {
  // -2^63 and 2^63 are exact doubles; NaN fails both comparisons.
  if (!(d >= -9223372036854775808.0 && d < 9223372036854775808.0)) return std::nullopt;
  return static_cast<std::int64_t>(d);
}

}  // namespace thoonk::detail
