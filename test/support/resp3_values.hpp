// Reply values built by hand, for the unit tests of the decisions made on
// replies (no parser, no server).
#pragma once

#include <thoonk/resp3/value.hpp>

#include <string>

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

}  // namespace thoonk::test
