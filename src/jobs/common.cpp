#include "jobs/common.hpp"

#include "feeds/common.hpp"  // permission_error

#include <charconv>
#include <string_view>

namespace thoonk::detail::jobs {

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

std::string now_ms_string() { return std::to_string(now_ms()); }

error_code script_reply_error(const resp3::value& v) {
  if (!v.is_error()) return {};
  std::string_view msg = v.str;
  constexpr std::string_view tag = "THOONK ";
  if (auto pos = msg.find(tag); pos != std::string_view::npos) {
    auto code = msg.substr(pos + tag.size());
    if (auto sp = code.find_first_of(" \r\n"); sp != std::string_view::npos)
      code = code.substr(0, sp);
    if (code == "feed_not_found") return error::feed_not_found;
    if (code == "wrong_feed_type") return error::wrong_feed_type;
    if (code == "job_not_found") return error::job_not_found;
    if (code == "job_not_claimed") return error::job_not_claimed;
    if (code == "job_not_stalled") return error::job_not_stalled;
    if (code == "lost_claim") return error::lost_claim;
    if (code == "queue_empty") return error::queue_empty;
    if (code == "invalid_argument") return error::invalid_argument;
  }
  // ACL refusals (NOPERM, in or out of a script; NOCHANNELPERM from
  // check_publish): the same mapping as the feeds'.
  if (auto pe = permission_error(msg)) return pe;
  if (msg.find("user_script") != std::string_view::npos ||
      msg.find("Error running script") != std::string_view::npos ||
      msg.find("Lua") != std::string_view::npos)
    return error::script_error;
  return error::server_error;
}

asio::awaitable<std::tuple<error_code, resp3::value>> run(client& c, const script& s,
                                                          std::vector<std::string> keys,
                                                          std::vector<std::string> args) {
  std::vector<std::string_view> k(keys.begin(), keys.end());
  std::vector<std::string_view> a(args.begin(), args.end());
  auto [ec, v] = co_await eval_script(c.conn(), s, k, a);
  if (ec) co_return std::tuple{ec, resp3::value{}};
  if (auto e = script_reply_error(v)) co_return std::tuple{e, std::move(v)};
  co_return std::tuple{error_code{}, std::move(v)};
}

std::int64_t as_int(const resp3::value& v, std::int64_t fallback) {
  if (v.type == resp3::type::number) return v.integer;
  if (v.type == resp3::type::double_number) return static_cast<std::int64_t>(v.dbl);
  if (v.is_string()) {
    std::int64_t out = 0;
    auto r = std::from_chars(v.str.data(), v.str.data() + v.str.size(), out);
    if (r.ec == std::errc{} && r.ptr == v.str.data() + v.str.size()) return out;
  }
  return fallback;
}

std::vector<std::string> as_strings(resp3::value&& v) {
  std::vector<std::string> out;
  out.reserve(v.elements.size());
  for (auto& e : v.elements) out.push_back(std::move(e.str));
  return out;
}

}  // namespace thoonk::detail::jobs
