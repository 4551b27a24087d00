// For benchmarks/feed_bench.cpp only: the library's feed publish script, so
// redis-benchmark can measure the server's EVALSHA ceiling for exactly the
// script the library runs. Not installed, not part of the API.
#pragma once

#include <thoonk/script.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace thoonk::detail {

const script& feed_publish_script();

/// The KEYS the feed scripts take, for feed `name` under `cfg`-less default
/// naming (config, ids, items, publishes, changes, retracts, retracttrim, idincr).
std::vector<std::string> feed_script_keys(std::string_view name);

}  // namespace thoonk::detail
