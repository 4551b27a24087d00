#include "jobs/reply_parse.hpp"

#include "detail/parse_int.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>

#include <string_view>

namespace thoonk::detail::jobs {

std::int64_t as_int(const resp3::value& v, std::int64_t fallback) {
  if (v.type == resp3::type::number) return v.integer;
  if (v.type == resp3::type::double_number) return int_of_double(v.dbl).value_or(fallback);
  if (v.is_string()) return parse_int<std::int64_t>(v.str).value_or(fallback);
  return fallback;
}

std::vector<std::string> as_strings(resp3::value&& v) {
  std::vector<std::string> out;
  out.reserve(v.elements.size());
  for (auto& e : v.elements) out.push_back(std::move(e.str));
  return out;
}

bool is_transient(const boost::system::error_code& ec) {
  namespace ae = boost::asio::error;
  return ec == error::unknown_outcome || ec == error::not_connected ||
         ec == error::request_timeout || ec == error::health_check_timeout ||
         ec == error::connect_timeout || ec.category() == ae::get_system_category() ||
         ec.category() == ae::get_misc_category() || ec.category() == ae::get_netdb_category();
}

}  // namespace thoonk::detail::jobs
