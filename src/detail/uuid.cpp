#include "detail/uuid.hpp"

#include <cstdint>
#include <random>

namespace thoonk::detail {

std::string make_uuid() {
  // One generator per thread, seeded from the OS: no locking on the hot path
  // and no two threads or processes drawing the same sequence.
  thread_local std::mt19937_64 rng = [] {
    std::random_device rd;
    std::seed_seq seq{rd(), rd(), rd(), rd(), rd(), rd(), rd(), rd()};
    return std::mt19937_64(seq);
  }();
  std::uint64_t hi = rng(), lo = rng();
  hi = (hi & 0xffffffffffff0fffULL) | 0x0000000000004000ULL;  // version 4
  lo = (lo & 0x3fffffffffffffffULL) | 0x8000000000000000ULL;  // variant 10
  static constexpr char hex[] = "0123456789abcdef";
  std::string out(36, '-');
  int pos = 0;
  auto put = [&](std::uint64_t v, int bytes) {
    for (int i = bytes * 2 - 1; i >= 0; --i) {
      if (pos == 8 || pos == 13 || pos == 18 || pos == 23) ++pos;
      out[static_cast<std::size_t>(pos++)] = hex[(v >> (i * 4)) & 0xf];
    }
  };
  put(hi, 8);
  put(lo, 8);
  return out;
}

}  // namespace thoonk::detail
