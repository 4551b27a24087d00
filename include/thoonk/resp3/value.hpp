// A parsed RESP3 (or RESP2) reply as a tree of values.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::resp3 {

/// The wire type of a value. RESP2 replies map onto the same types
/// (`$-1` and `*-1` become `null`).
enum class type : std::uint8_t {
  simple_string,    ///< `+OK`
  simple_error,     ///< `-ERR ...`
  blob_string,      ///< `$3\r\nabc`
  blob_error,       ///< `!21\r\nSYNTAX invalid syntax`
  verbatim_string,  ///< `=15\r\ntxt:Some string` (str holds the text after "fmt:")
  number,           ///< `:42`
  double_number,    ///< `,3.14` (also inf, -inf, nan)
  boolean,          ///< `#t` / `#f`
  big_number,       ///< `(3492890328409238509324850943850943825024385` (digits kept in str)
  null,             ///< `_`, `$-1`, `*-1`
  array,            ///< `*N`
  map,              ///< `%N`: elements hold key0, value0, key1, value1, ...
  set,              ///< `~N`
  push,             ///< `>N`: out-of-band data (pub/sub messages, invalidations)
};

/// Human-readable name of a type ("blob_string", ...), for messages and tests.
std::string_view to_string(type t) noexcept;

/// One node of a reply. Plain data: copyable, movable, comparable.
struct value {
  resp3::type type = resp3::type::null;
  std::string str;              ///< strings, errors, verbatim text, big number digits
  std::int64_t integer = 0;     ///< number; boolean as 0/1
  double dbl = 0.0;             ///< double_number
  std::vector<value> elements;  ///< array, set, push; map as k0,v0,k1,v1,...
  std::vector<value>
      attributes;  ///< an attribute map (`|N`) that preceded this value, flattened k,v

  bool is_null() const noexcept { return type == resp3::type::null; }
  bool is_error() const noexcept {
    return type == resp3::type::simple_error || type == resp3::type::blob_error;
  }
  bool is_string() const noexcept {
    return type == resp3::type::simple_string || type == resp3::type::blob_string ||
           type == resp3::type::verbatim_string;
  }
  bool is_aggregate() const noexcept {
    return type == resp3::type::array || type == resp3::type::map || type == resp3::type::set ||
           type == resp3::type::push;
  }

  friend bool operator==(const value&, const value&) = default;
};

/// A compact, unambiguous rendering for diagnostics and test failure messages,
/// e.g. `[bulk "a", int 1, null]`.
std::string debug_string(const value& v);

}  // namespace thoonk::resp3
