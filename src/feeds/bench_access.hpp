// For benchmarks/feed_bench.cpp only: the KEYS of the library's feed publish
// script (scripts::feeds_publish() in the generated thoonk_lua_scripts.hpp),
// so redis-benchmark can measure the server's EVALSHA ceiling for exactly
// the call the library makes. Not installed, not part of the API.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace thoonk::detail {

/// The KEYS the feed scripts take, for feed `name` under `cfg`-less default
/// naming (config, ids, items, publishes, changes, retracts, retracttrim, idincr).
std::vector<std::string> feed_script_keys(std::string_view name);

}  // namespace thoonk::detail
