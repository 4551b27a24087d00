// Reply values built by hand, for the unit tests of the decisions made on
// replies (no parser, no server).
#pragma once

#include <thoonk/resp3/value.hpp>

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace thoonk::test {

/// A simple error reply with `text` (e.g. "NOPERM ...").
inline resp3::value error_reply(std::string text) {
  resp3::value v;
  v.type = resp3::type::simple_error;
  v.str = std::move(text);
  return v;
}

/// A blob string reply.
inline resp3::value string_reply(std::string text) {
  resp3::value v;
  v.type = resp3::type::blob_string;
  v.str = std::move(text);
  return v;
}

/// A simple string reply (e.g. "OK").
inline resp3::value simple_reply(std::string text) {
  auto v = string_reply(std::move(text));
  v.type = resp3::type::simple_string;
  return v;
}

/// A number reply.
inline resp3::value number_reply(std::int64_t n) {
  resp3::value v;
  v.type = resp3::type::number;
  v.integer = n;
  return v;
}

/// An aggregate reply of type `t` (array, map, set ...) holding `elements`
/// (a map's keys and values alternate).
inline resp3::value aggregate_reply(resp3::type t, std::vector<resp3::value> elements = {}) {
  resp3::value v;
  v.type = t;
  v.elements = std::move(elements);
  return v;
}

/// An array reply.
inline resp3::value array_reply(std::vector<resp3::value> elements) {
  return aggregate_reply(resp3::type::array, std::move(elements));
}

}  // namespace thoonk::test
