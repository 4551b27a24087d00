#include "feeds/common.hpp"

#include "detail/parse_int.hpp"

#include <boost/asio/use_awaitable.hpp>

#include <chrono>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Lua numbers are doubles: integers above 2^53 - 1 are not exact there.
constexpr std::int64_t max_exact = (std::int64_t{1} << 53) - 1;

// What a write must be: plain decimal digits (no sign) within [lo, hi].
bool decimal_in(std::string_view v, std::int64_t lo, std::int64_t hi) {
  return !v.empty() && v.front() != '-' && parse_int_in(v, lo, hi).has_value();
}

struct int_field {
  std::string_view name;
  std::int64_t min;
  std::string_view meaning;
  std::int64_t max = max_exact;
};

// Every config field the scripts read as a number (src/lua/**), with the range the scripts use
// (their conf_int calls name the same bounds). docs/feeds.md §2 and docs/jobs.md §1 list the same.
constexpr int_field int_fields[] = {
    {"max_length", 0, "the most items a feed keeps, 0 = unlimited"},
    {"retraction_log", 0, "retractions kept for catch-up, 0 = none"},
    {"claim_timeout_ms", 1, "milliseconds after which a claim lapses"},
    {"max_retries", 1, "failures after which a job is a dead letter"},
    {"max_stalls", 1, "lapsed leases after which a job is a dead letter"},
    {"min_backoff_ms", 0, "milliseconds before the first retry"},
    {"max_backoff_ms", 0, "longest wait in milliseconds between retries"},
    {"result_ttl_ms", 1, "milliseconds a job result is kept"},
    {"rate_limit", 0, "jobs claimed per second at most, 0 = no limit", 1000000},
};

}  // namespace

std::optional<std::int64_t> read_config_int(std::string_view field, std::string_view value) {
  for (const auto& f : int_fields)
    if (field == f.name) return parse_int_in(value, f.min, f.max);
  return std::nullopt;
}

config_check validate_config_field(std::string_view field, std::string_view value) {
  const error_code bad = error::invalid_argument;
  if (field.empty()) return {bad, "config field names must not be empty"};
  if (field == "type")
    return {bad, "config field 'type' is set by create_feed only and cannot be changed"};
  for (const auto& f : int_fields) {
    if (field != f.name) continue;
    if (decimal_in(value, f.min, f.max)) return {};
    return {bad, "config field '" + std::string(f.name) + "' (" + std::string(f.meaning) +
                     ") must be an integer from " + std::to_string(f.min) + " to " +
                     std::to_string(f.max) + " in plain decimal digits, not '" +
                     std::string(value.substr(0, 64)) + "'"};
  }
  for (std::string_view flag : {"published", "events", "paused"}) {
    if (field != flag) continue;
    if (value == "0" || value == "1") return {};
    return {bad, "config field '" + std::string(flag) + "' must be '0' or '1', not '" +
                     std::string(value.substr(0, 64)) + "'"};
  }
  if (field == "dead_letter_queue" && value.find('\0') != std::string_view::npos)
    return {bad, "config field 'dead_letter_queue' names a job queue: no NUL bytes"};
  return {};
}

error_code check_type_reply(const resp3::value& v, feed_type want) {
  if (v.is_error()) return reply_error(v);
  if (v.is_null()) return error::feed_not_found;
  if (!v.is_string()) return error::unexpected_type;
  if (v.str != to_string(want)) return error::wrong_feed_type;
  return {};
}

void push_type_check(request& req, const feed_names& names) {
  req.push("HGET", names.key("config"), "type");
}

asio::awaitable<std::tuple<op_status, response>> exec_checked(detail::client_core& c,
                                                              const feed_names& n,
                                                              const request& req, feed_type want) {
  auto [ec, resp] = co_await exec_co(c, req, n.key("config"));
  op_status st(ec);
  if (!st && resp.empty()) st = error::unexpected_type;
  if (!st) st = check_type_reply(resp[0], want);
  for (std::size_t i = 1; !st && i < resp.size(); ++i) st = reply_status(resp[i]);
  co_return std::tuple{std::move(st), std::move(resp)};
}

std::vector<std::string> data_keys(const feed_names& n) {
  return {n.key("config"),  n.key("ids"),      n.key("items"),       n.key("publishes"),
          n.key("changes"), n.key("retracts"), n.key("retracttrim"), n.key("idincr")};
}

std::vector<std::string> admin_keys(const feed_names& n, bool every_key) {
  std::vector<std::string> keys;
  keys.emplace_back(feeds_key);
  if (every_key) {
    for (auto& k : all_keys(n)) keys.push_back(std::move(k));  // config first
  } else {
    keys.push_back(n.key("config"));
  }
  return keys;
}

std::vector<std::string> feed_admin_keys(const feed_names& n, bool every_key) {
  if (every_key) return all_keys(n);  // config first
  return {n.key("config")};
}

std::optional<std::string> as_opt_string(const resp3::value& v) {
  if (v.is_null() || !v.is_string()) return std::nullopt;
  return v.str;
}

std::uint64_t as_u64(const resp3::value& v, error_code& ec) {
  if (v.type == resp3::type::number) {
    if (v.integer < 0) ec = error::unexpected_type;
    return static_cast<std::uint64_t>(v.integer);
  }
  if (v.is_string()) {
    auto out = parse_int<std::uint64_t>(v.str);
    if (!out) ec = error::unexpected_type;
    return out.value_or(0);
  }
  if (v.is_null()) return 0;
  ec = error::unexpected_type;
  return 0;
}

error_code validate_name_and_id(const config& cfg, std::string_view name, std::string_view id) {
  if (auto ec = validate_name(cfg, name)) return ec;
  return validate_id(cfg, id);
}

error_code validate_ids(const config& cfg, const std::vector<std::string>& ids) {
  for (const auto& id : ids)
    if (auto ec = validate_id(cfg, id)) return ec;
  return {};
}

}  // namespace thoonk::detail
