// sync_point values for the catch-up unit tests (catch_up_ledger_test,
// catch_up_tracker_test): a sync at a sequence number, nothing else set.
#pragma once

#include "feeds/catch_up_ledger.hpp"

#include <cstdint>

namespace thoonk::test {

inline thoonk::detail::sync_point sync_at(std::uint64_t seq) {
  thoonk::detail::sync_point sp;
  sp.seq = seq;
  return sp;
}

}  // namespace thoonk::test
