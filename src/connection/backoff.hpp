// Reconnect delays: exponential growth with jitter. No I/O.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

namespace thoonk::detail {

/// Delay n (0-based) is drawn uniformly from [cap/2, cap] where
/// cap = min(max, min * 2^n): "equal jitter". Full jitter can draw ~0 and
/// hammer a recovering server; equal jitter keeps a floor while still
/// spreading many clients that lost the same server at the same moment.
class backoff {
 public:
  backoff(std::chrono::milliseconds min, std::chrono::milliseconds max,
          std::uint64_t seed = std::random_device{}())
      : min_(std::max<std::chrono::milliseconds>(min, std::chrono::milliseconds(1))),
        max_(std::max(max, min_)),
        rng_(seed) {}

  std::chrono::milliseconds next() {
    auto cap = min_.count();
    for (unsigned i = 0; i < attempt_ && cap < max_.count(); ++i) cap *= 2;
    cap = std::min(cap, max_.count());
    ++attempt_;
    std::uniform_int_distribution<std::int64_t> dist(cap / 2, cap);
    return std::chrono::milliseconds(dist(rng_));
  }
  void reset() noexcept { attempt_ = 0; }
  unsigned attempts() const noexcept { return attempt_; }

 private:
  std::chrono::milliseconds min_, max_;
  unsigned attempt_ = 0;
  std::mt19937_64 rng_;
};

}  // namespace thoonk::detail
