// The runner's side of the hand-off (docs/jobs.md "Hand-off"), without I/O:
// the messages a put sends on a runner's channel (includes/hand_off.lua
// take_message) and the fence jobs/take_fence.lua sends after them.
// test/unit/hand_off_test.cpp checks them byte by byte.
#pragma once

#include <thoonk/job_types.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::detail::jobs {

/// The jobs of one hand-off message: per job `id\0token\0failures\0<item
/// length>\0item`, at least one job. nullopt when the message is not one
/// (a fence, or malformed: then its jobs are not known to the runner, and
/// its next reconciliation gives them back).
std::optional<std::vector<claimed_job>> parse_hand_off(std::string_view message);

/// The fence message number `n`: a NUL, then "fence:" and n in decimal. A
/// hand-off message never starts with a NUL (ids are never empty and
/// hold none).
std::string fence_message(std::uint64_t n);

/// The number of a fence message, or nullopt when `message` is no fence.
std::optional<std::uint64_t> parse_fence(std::string_view message);

}  // namespace thoonk::detail::jobs
