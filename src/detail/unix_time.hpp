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

/// How long until `due` (epoch ms), as a wait for a steady-clock timer: at
/// least 0, and at most a year. Times may be set up to 2^53 - 1 ms ahead,
/// and steady_clock counts nanoseconds in 64 bits (about 292 years from
/// now), so an unbounded wait would overflow; a caller waiting that long
/// is woken (or polls) long before the year is up.
inline std::chrono::milliseconds wait_until_epoch_ms(std::int64_t due) {
  constexpr std::int64_t year_ms = 365LL * 24 * 3600 * 1000;
  const std::int64_t now = unix_ms();
  if (due <= now) return std::chrono::milliseconds(0);
  return std::chrono::milliseconds(due - now < year_ms ? due - now : year_ms);
}

}  // namespace thoonk::detail
