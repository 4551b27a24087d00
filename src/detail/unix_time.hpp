// The wall clock the scripts are given: milliseconds since the Unix epoch
// (std::chrono::system_clock). Feed publish timestamps, job claim times,
// schedules and leases all use it, so every script on every client compares
// times of one kind. Intervals measured inside this process use
// steady_clock instead.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace thoonk::detail {

inline std::int64_t unix_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// unix_ms() in decimal: the form a script argument takes.
inline std::string unix_ms_string() { return std::to_string(unix_ms()); }

}  // namespace thoonk::detail
