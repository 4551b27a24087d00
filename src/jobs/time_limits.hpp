// The range of times the job engine sends to its scripts. A script holds
// every number as a Lua number, a double, which holds integers exactly only
// up to 2^53 - 1: a time beyond that would be stored rounded, and one near
// the std::int64_t limits would overflow on its way (now + delay) or come
// back as another value. Every time an operation takes (put's run_at and
// delay, fail's retry_at, a retry strategy's backoffs, the lease and
// result times of the settings, a worker's time to live, the maintenance
// lock's) is checked here before any I/O and refused with
// error::invalid_argument. No I/O; unit-tested (test/unit/values_test.cpp).
#pragma once

#include <thoonk/job_types.hpp>

#include <chrono>
#include <cstdint>
#include <optional>

namespace thoonk::detail::jobs {

/// The largest time (epoch ms) or duration (ms) the library sends to its
/// scripts, and the largest magnitude of a negative one: 2^53 - 1.
inline constexpr std::int64_t max_time_ms = 9007199254740991;

/// Whether `ms` (a time in epoch ms or a duration in ms) is within
/// -max_time_ms .. max_time_ms.
constexpr bool time_in_range(std::int64_t ms) noexcept {
  return ms >= -max_time_ms && ms <= max_time_ms;
}
constexpr bool time_in_range(std::chrono::milliseconds d) noexcept {
  return time_in_range(d.count());
}
constexpr bool time_in_range(const std::optional<std::int64_t>& ms) noexcept {
  return !ms || time_in_range(*ms);
}
constexpr bool time_in_range(const std::optional<std::chrono::milliseconds>& d) noexcept {
  return !d || time_in_range(d->count());
}

/// When a put's job runs (put_options): run_at when set, else now + delay,
/// else now. nullopt when now, run_at or delay (whichever are set, delay
/// even beside run_at) or the sum is outside the range. The sum is formed
/// only from values already in range, so it cannot overflow.
constexpr std::optional<epoch_ms> put_run_at(
    epoch_ms now, const std::optional<epoch_ms>& run_at,
    const std::optional<std::chrono::milliseconds>& delay) noexcept {
  if (!time_in_range(now) || !time_in_range(run_at) || !time_in_range(delay)) return std::nullopt;
  if (run_at) return *run_at;
  if (!delay) return now;
  const epoch_ms at = now + delay->count();
  if (!time_in_range(at)) return std::nullopt;
  return at;
}

/// 2 * d, kept within the range (saturated, never overflowing): the time
/// to live of a claim offer, made from the poll interval, a client-side
/// option with no bound of its own.
constexpr std::chrono::milliseconds twice_capped(std::chrono::milliseconds d) noexcept {
  constexpr std::int64_t half = max_time_ms / 2;
  const std::int64_t c = d.count();
  return std::chrono::milliseconds(2 * (c > half ? half : c < -half ? -half : c));
}

/// `d` as a steady timer can wait for it: a timer converts milliseconds to
/// its clock's nanoseconds, which hold about 292 years, so a longer wait
/// (a heartbeat of a worker_ttl near max_time_ms) is cut to that rather
/// than overflowing. A wait that long never ends in practice either way.
constexpr std::chrono::milliseconds timer_capped(std::chrono::milliseconds d) noexcept {
  constexpr auto most = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::duration::max());
  return d > most ? most : d;
}

}  // namespace thoonk::detail::jobs
