#include "jobs/hand_off.hpp"

#include "detail/parse_int.hpp"

namespace thoonk::detail::jobs {

namespace {

constexpr std::string_view fence_prefix{"\0fence:", 7};

/// The field before the next NUL of `in` (consumed with its NUL), or
/// nullopt when there is no NUL.
std::optional<std::string_view> field(std::string_view& in) {
  const auto nul = in.find('\0');
  if (nul == std::string_view::npos) return std::nullopt;
  auto f = in.substr(0, nul);
  in.remove_prefix(nul + 1);
  return f;
}

}  // namespace

std::optional<std::vector<claimed_job>> parse_hand_off(std::string_view message) {
  std::vector<claimed_job> out;
  while (!message.empty()) {
    auto id = field(message);
    if (!id || id->empty()) return std::nullopt;
    auto token = field(message);
    auto failures = field(message);
    auto length = field(message);
    if (!token || !failures || !length) return std::nullopt;
    auto t = parse_int<std::int64_t>(*token);
    auto f = parse_int<std::int64_t>(*failures);
    auto n = parse_int<std::size_t>(*length);
    if (!t || *t < 1 || !f || *f < 0 || !n || *n > message.size()) return std::nullopt;
    claimed_job j;
    j.id.assign(*id);
    j.token = *t;
    j.failures = *f;
    j.item.assign(message.substr(0, *n));
    message.remove_prefix(*n);
    out.push_back(std::move(j));
  }
  if (out.empty()) return std::nullopt;
  return out;
}

std::string fence_message(std::uint64_t n) {
  std::string s(fence_prefix);
  s += std::to_string(n);
  return s;
}

std::optional<std::uint64_t> parse_fence(std::string_view message) {
  if (!message.starts_with(fence_prefix)) return std::nullopt;
  return parse_int<std::uint64_t>(message.substr(fence_prefix.size()));
}

}  // namespace thoonk::detail::jobs
