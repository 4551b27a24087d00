#include "connection/failover.hpp"

#include <algorithm>
#include <string_view>

namespace thoonk::detail {

failover::failover(const config& cfg)
    : max_retries_(cfg.unavailable_retries),
      min_delay_(std::max(cfg.reconnect_min_delay, std::chrono::milliseconds(1))),
      max_delay_(std::max(cfg.reconnect_max_delay, min_delay_)) {
  for (const auto& a : cfg.endpoints)
    if (!a.host.empty()) addresses_.push_back(a);
  if (addresses_.empty()) addresses_.push_back({cfg.host, cfg.port});
  check_role_ = addresses_.size() > 1 && !cfg.cluster;
}

config failover::attempt_config(const config& cfg) const {
  config out = cfg;
  out.host = current().host;
  out.port = current().port;
  return out;
}

bool failover::on_attempt_failed() noexcept {
  current_ = (current_ + 1) % addresses_.size();
  if (++failed_in_round_ < addresses_.size()) return false;
  failed_in_round_ = 0;
  return true;
}

bool failover::is_primary(const resp3::value& v) noexcept {
  return v.type == resp3::type::array && !v.elements.empty() && v.elements[0].is_string() &&
         v.elements[0].str == "master";
}

std::string failover::role_name(const resp3::value& v) {
  if (v.is_error()) return v.str;
  if (v.type == resp3::type::array && !v.elements.empty() && v.elements[0].is_string())
    return v.elements[0].str;
  return "an unexpected ROLE reply";
}

unavailable failover::classify(const resp3::value& v) noexcept {
  if (!v.is_error()) return unavailable::none;
  std::string_view s = v.str;
  auto code = s.substr(0, s.find(' '));
  if (code == "READONLY") return unavailable::readonly;
  if (code == "LOADING") return unavailable::loading;
  if (code == "MASTERDOWN") return unavailable::masterdown;
  // A script that hit the refusal reports it inside its own error text
  // ("ERR Error running script ...: READONLY You can't write ...").
  if (s.find("-READONLY ") != std::string_view::npos ||
      s.find(": READONLY You can't write") != std::string_view::npos)
    return unavailable::readonly;
  return unavailable::none;
}

unavailable failover::classify(const response& replies) noexcept {
  for (const auto& r : replies)
    if (auto u = classify(r); u != unavailable::none) return u;
  return unavailable::none;
}

std::chrono::milliseconds failover::retry_delay(unsigned attempt) const noexcept {
  auto d = min_delay_;
  for (unsigned i = 0; i < attempt && d < max_delay_; ++i) d *= 2;
  return std::min(d, max_delay_);
}

}  // namespace thoonk::detail
