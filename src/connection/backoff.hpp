// Reconnect delays (exponential growth with jitter) and the reconnect
// policy built on them. No I/O, no clock.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <random>

#include <boost/system/error_code.hpp>

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
  /// Moves to the top tier: this and every later delay until reset() is
  /// drawn from [max/2, max]. For failures that retrying soon cannot fix.
  void saturate() noexcept {
    unsigned n = 0;
    for (auto cap = min_.count(); cap < max_.count(); cap *= 2) ++n;
    attempt_ = std::max(attempt_, n);
  }
  void reset() noexcept { attempt_ = 0; }
  unsigned attempts() const noexcept { return attempt_; }

 private:
  std::chrono::milliseconds min_, max_;
  unsigned attempt_ = 0;
  std::mt19937_64 rng_;
};

/// What the reconnect loop does between attempts, without I/O or clock:
/// the delay before the next attempt and what requests issued while
/// disconnected do meanwhile.
///
/// A *transient* failure (refused TCP connect, timeout, a server still
/// loading) is retried with the growing backoff, and requests wait for the
/// connection. A *refused* setup (wrong password, SELECT refused, NOPERM)
/// will not go away by itself: requests fail with its error instead of
/// waiting forever, and attempts are spaced by the maximum delay rather than
/// hammering the server with doomed AUTHs. Only a successful setup clears
/// the refusal (a transient failure in between leaves it: nothing proved
/// the credentials right).
class reconnect_policy {
 public:
  reconnect_policy(std::chrono::milliseconds min, std::chrono::milliseconds max,
                   std::uint64_t seed = std::random_device{}())
      : backoff_(min, max, seed) {}

  /// A setup succeeded: the next failure starts from the minimum delay again.
  void on_connected() noexcept {
    backoff_.reset();
    refusal_ = {};
  }
  /// An attempt failed with `ec`; `refused`: the server refused the setup
  /// (see handshake::refused()). Returns the delay before the next attempt.
  std::chrono::milliseconds on_failed(boost::system::error_code ec, bool refused) {
    if (refused) {
      refusal_ = ec;
      backoff_.saturate();
    }
    return backoff_.next();
  }
  /// A connection that was up has been lost: the delay before reconnecting.
  std::chrono::milliseconds on_lost() { return backoff_.next(); }

  /// The error requests fail with while no connection is up because the
  /// last setup was refused; empty when requests may wait.
  boost::system::error_code refusal() const noexcept { return refusal_; }

  const backoff& delays() const noexcept { return backoff_; }

 private:
  backoff backoff_;
  boost::system::error_code refusal_;
};

}  // namespace thoonk::detail
