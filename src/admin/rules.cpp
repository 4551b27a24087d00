#include "admin/rules.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>

#include <algorithm>
#include <charconv>

namespace thoonk::admin::detail {

namespace {

int hex_value(char c) noexcept {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

std::vector<std::string_view> split(std::string_view s, char sep) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  for (;;) {
    auto at = s.find(sep, start);
    out.push_back(
        s.substr(start, at == std::string_view::npos ? std::string_view::npos : at - start));
    if (at == std::string_view::npos) return out;
    start = at + 1;
  }
}

bool iequals(std::string_view a, std::string_view b) noexcept {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? char(c - 'A' + 'a') : c; };
           return lower(x) == lower(y);
         });
}

}  // namespace

std::string target::param(const std::string& name, std::string fallback) const {
  auto it = query.find(name);
  return it == query.end() ? std::move(fallback) : it->second;
}

std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space) {
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c == '%') {
      if (i + 2 >= s.size()) return std::nullopt;
      int hi = hex_value(s[i + 1]);
      int lo = hex_value(s[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_is_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

target parse_target(std::string_view raw) {
  target t;
  if (raw.empty() || raw.front() != '/') return t;
  auto q = raw.find('?');
  std::string_view path = raw.substr(0, q);
  std::string_view query = q == std::string_view::npos ? std::string_view{} : raw.substr(q + 1);
  auto parts = split(path.substr(1), '/');
  for (auto part : parts) {
    auto seg = percent_decode(part, false);
    if (!seg || seg->find('\0') != std::string::npos) return t;
    t.segments.push_back(std::move(*seg));
  }
  // "/" and a trailing slash leave an empty last segment: drop it, so
  // "/api/queues/" is "/api/queues".
  if (!t.segments.empty() && t.segments.back().empty()) t.segments.pop_back();
  if (!query.empty()) {
    for (auto pair : split(query, '&')) {
      if (pair.empty()) continue;
      auto eq = pair.find('=');
      auto k = percent_decode(pair.substr(0, eq), true);
      auto v = percent_decode(
          eq == std::string_view::npos ? std::string_view{} : pair.substr(eq + 1), true);
      if (!k || !v || v->find('\0') != std::string::npos) return t;
      t.query.emplace(std::move(*k), std::move(*v));
    }
  }
  t.ok = true;
  return t;
}

void router::add(std::string method, std::string_view pattern, route_id id, bool write) {
  route r;
  r.method = std::move(method);
  auto parts = split(pattern.substr(1), '/');
  for (auto p : parts)
    if (!p.empty()) r.pattern.emplace_back(p);
  r.id = id;
  r.write = write;
  routes_.push_back(std::move(r));
}

route_match router::match(std::string_view method, const std::vector<std::string>& segments) const {
  route_match m;
  for (const auto& r : routes_) {
    if (r.pattern.size() != segments.size()) continue;
    std::vector<std::string> params;
    bool same = true;
    for (std::size_t i = 0; i < segments.size() && same; ++i) {
      const auto& p = r.pattern[i];
      if (p.size() >= 2 && p.front() == '{' && p.back() == '}') {
        if (segments[i].empty()) same = false;
        else params.push_back(segments[i]);
      } else {
        same = p == segments[i];
      }
    }
    if (!same) continue;
    if (r.method == method) {
      m.result = route_match::outcome::found;
      m.r = &r;
      m.params = std::move(params);
      m.allow.clear();
      return m;
    }
    m.result = route_match::outcome::method_not_allowed;
    if (m.allow.find(r.method) == std::string::npos) {
      if (!m.allow.empty()) m.allow += ", ";
      m.allow += r.method;
    }
  }
  return m;
}

router make_router() {
  router r;
  r.add("GET", "/", route_id::page, false);
  r.add("GET", "/api/queues", route_id::queues, false);
  r.add("GET", "/api/queues/{q}", route_id::queue, false);
  r.add("GET", "/api/queues/{q}/jobs", route_id::jobs, false);
  r.add("GET", "/api/queues/{q}/jobs/{id}", route_id::job, false);
  r.add("GET", "/api/queues/{q}/workers", route_id::workers, false);
  r.add("GET", "/api/feeds", route_id::feeds, false);
  r.add("GET", "/api/feeds/{f}/items", route_id::feed_items, false);
  r.add("POST", "/api/queues/{q}/jobs/{id}/retry", route_id::job_retry, true);
  r.add("POST", "/api/queues/{q}/jobs/{id}/retract", route_id::job_retract, true);
  r.add("POST", "/api/queues/{q}/jobs/{id}/abort", route_id::job_abort, true);
  r.add("POST", "/api/queues/{q}/jobs/{id}/promote", route_id::job_promote, true);
  r.add("POST", "/api/queues/{q}/pause", route_id::pause, true);
  r.add("POST", "/api/queues/{q}/resume", route_id::resume, true);
  r.add("POST", "/api/queues/{q}/rate_limit", route_id::rate_limit, true);
  r.add("POST", "/api/queues/{q}/retry_dead", route_id::retry_dead, true);
  r.add("POST", "/api/queues/{q}/delete", route_id::delete_queue, true);
  r.add("GET", "/api/queues/{q}/events", route_id::events, false);
  return r;
}

bool constant_time_equal(std::string_view a, std::string_view b) noexcept {
  // Every byte of the longer string is looked at whatever matches, so the
  // time tells the lengths only (the length of a token is no secret worth
  // the complexity of hiding).
  std::size_t n = std::max(a.size(), b.size());
  unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (std::size_t i = 0; i < n; ++i) {
    unsigned char x = i < a.size() ? static_cast<unsigned char>(a[i]) : 0;
    unsigned char y = i < b.size() ? static_cast<unsigned char>(b[i]) : 0;
    diff = static_cast<unsigned char>(diff | (x ^ y));
  }
  return diff == 0;
}

access_policy::access_policy(std::string token, bool read_only, bool loopback, unsigned short port)
    : token_(std::move(token)), read_only_(read_only), loopback_(loopback), port_(port) {}

bool access_policy::host_allowed(std::string_view host) const {
  const std::string p = std::to_string(port_);
  for (std::string_view name : {"127.0.0.1", "localhost", "[::1]"}) {
    if (iequals(host, name)) return true;
    if (host.size() == name.size() + 1 + p.size() && iequals(host.substr(0, name.size()), name) &&
        host[name.size()] == ':' && host.substr(name.size() + 1) == p)
      return true;
  }
  return false;
}

std::optional<refusal> access_policy::check(const request_facts& r) const {
  if (loopback_ && token_.empty() && !host_allowed(r.host))
    return refusal{421, "wrong_host",
                   "this admin server answers only requests for 127.0.0.1, localhost or [::1] "
                   "(Host header); give it an access token to serve other names"};
  if (r.api && !token_.empty()) {
    constexpr std::string_view scheme = "Bearer ";
    std::string_view given;
    if (r.authorization.size() > scheme.size() &&
        iequals(r.authorization.substr(0, scheme.size()), scheme))
      given = r.authorization.substr(scheme.size());
    if (given.empty() || !constant_time_equal(given, token_))
      return refusal{401, "unauthorized",
                     "send the admin token as 'Authorization: Bearer <token>'"};
  }
  if (r.write && read_only_)
    return refusal{405, "read_only", "this admin server is read-only: it makes no changes"};
  if (r.write && !r.has_csrf_header)
    return refusal{403, "csrf_header_missing",
                   "a write needs the header 'X-Thoonk-Admin: 1' (it keeps other web sites from "
                   "sending writes through a browser)"};
  return std::nullopt;
}

std::optional<std::size_t> parse_count(std::string_view text, std::size_t fallback,
                                       std::size_t max) {
  if (text.empty()) return fallback;
  std::size_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v < 1 || v > max) return std::nullopt;
  return v;
}

std::optional<std::int64_t> parse_offset(std::string_view text) {
  if (text.empty()) return 0;
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size() || v < 0) return std::nullopt;
  return v;
}

bool valid_state(std::string_view s) {
  return s == "waiting" || s == "claimed" || s == "scheduled" || s == "dead" || s == "stalled" ||
         s == "held";
}

unsigned status_for(const boost::system::error_code& ec) {
  using thoonk::error;
  if (ec == error::feed_not_found || ec == error::job_not_found || ec == error::id_not_found ||
      ec == error::worker_not_found)
    return 404;
  if (ec == error::job_not_claimed || ec == error::job_not_stalled ||
      ec == error::wrong_feed_type || ec == error::lost_claim || ec == error::feed_exists)
    return 409;
  if (ec == error::invalid_name || ec == error::invalid_id || ec == error::item_too_large ||
      ec == error::invalid_argument)
    return 400;
  if (ec == error::no_permission || ec == error::no_script_permission ||
      ec == error::no_channel_permission || ec == error::no_key_permission)
    return 403;
  if (ec == error::not_connected || ec == error::connect_timeout || ec == error::request_timeout ||
      ec == error::client_stopped || ec == error::unknown_outcome || ec == error::auth_failed ||
      ec == boost::asio::error::connection_refused)
    return 503;
  return 502;
}

std::string code_for(const boost::system::error_code& ec) {
  using thoonk::error;
  struct entry {
    error e;
    const char* name;
  };
  static constexpr entry names[] = {
      {error::feed_not_found, "feed_not_found"},
      {error::job_not_found, "job_not_found"},
      {error::id_not_found, "id_not_found"},
      {error::worker_not_found, "worker_not_found"},
      {error::job_not_claimed, "job_not_claimed"},
      {error::job_not_stalled, "job_not_stalled"},
      {error::wrong_feed_type, "wrong_feed_type"},
      {error::lost_claim, "lost_claim"},
      {error::feed_exists, "feed_exists"},
      {error::invalid_name, "invalid_name"},
      {error::invalid_id, "invalid_id"},
      {error::item_too_large, "item_too_large"},
      {error::invalid_argument, "invalid_argument"},
      {error::no_permission, "no_permission"},
      {error::no_script_permission, "no_script_permission"},
      {error::no_channel_permission, "no_channel_permission"},
      {error::no_key_permission, "no_key_permission"},
      {error::not_connected, "not_connected"},
      {error::connect_timeout, "connect_timeout"},
      {error::request_timeout, "request_timeout"},
      {error::client_stopped, "client_stopped"},
      {error::unknown_outcome, "unknown_outcome"},
      {error::server_error, "server_error"},
      {error::script_error, "script_error"},
      {error::unexpected_type, "unexpected_type"},
  };
  for (const auto& n : names)
    if (ec == n.e) return n.name;
  return "error";
}

std::string sse_frame(std::string_view name, std::string_view data) {
  std::string out = "event: ";
  out += name;
  out += '\n';
  std::size_t start = 0;
  for (;;) {
    auto nl = data.find('\n', start);
    out += "data: ";
    out += data.substr(start, nl == std::string_view::npos ? std::string_view::npos : nl - start);
    out += '\n';
    if (nl == std::string_view::npos) break;
    start = nl + 1;
  }
  out += '\n';
  return out;
}

void event_buffer::push(std::string frame) {
  if (frames_.size() >= capacity_) {
    frames_.erase(frames_.begin());
    ++dropped_;
  }
  frames_.push_back(std::move(frame));
}

std::string event_buffer::take() {
  std::string out;
  if (dropped_ > 0) out = sse_frame("overflow", "{\"dropped\":" + std::to_string(dropped_) + "}");
  for (auto& f : frames_) out += f;
  frames_.clear();
  dropped_ = 0;
  return out;
}

}  // namespace thoonk::admin::detail
