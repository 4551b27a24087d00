#include "support/bench_support.hpp"

#include "support/redis_server.hpp"

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <regex>
#include <sstream>

namespace thoonk::bench {

server::server() {
  const char* url = std::getenv("THOONK_REDIS_URL");
  if (url != nullptr && *url != '\0') {
    boost::system::error_code ec;
    cfg_ = thoonk::config::from_url(url, ec);
    if (ec) throw boost::system::system_error(ec, "THOONK_REDIS_URL");
    return;
  }
  own_ = std::make_unique<thoonk::test::redis_server>();
  cfg_.host = own_->host();
  cfg_.port = own_->port();
}

server::~server() = default;

namespace {
// Single-quotes an argument for /bin/sh ('it'\''s').
std::string shell_quote(const std::string& a) {
  std::string q = "'";
  for (char c : a) {
    if (c == '\'') q += "'\\''";
    else q.push_back(c);
  }
  return q + "'";
}
}  // namespace

std::optional<double> redis_benchmark_rps(const server& s, const std::vector<std::string>& args) {
  std::string command =
      "redis-benchmark -h " + shell_quote(s.host()) + " -p " + std::to_string(s.port());
  if (!s.cfg().password.empty()) command += " -a " + shell_quote(s.cfg().password);
  command += " -q";
  for (const auto& a : args) command += " " + shell_quote(a);
  command += " 2>/dev/null";
  FILE* p = ::popen(command.c_str(), "r");
  if (p == nullptr) return std::nullopt;
  std::string out;
  std::array<char, 4096> buf{};
  while (std::fgets(buf.data(), static_cast<int>(buf.size()), p) != nullptr) out += buf.data();
  if (int rc = ::pclose(p); rc != 0) {
    std::fprintf(stderr, "redis-benchmark failed (status %d): %s\n", rc, command.c_str());
    return std::nullopt;
  }
  // -q prints progress lines ending in '\r' and a final "NAME: 123.45 requests per second".
  static const std::regex rps(R"(([0-9]+(\.[0-9]+)?) requests per second)");
  std::smatch m;
  std::optional<double> last;
  for (auto it = std::sregex_iterator(out.begin(), out.end(), rps); it != std::sregex_iterator();
       ++it)
    last = std::stod((*it)[1].str());
  return last;
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string json_escape(const std::string& s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    o.push_back(c);
  }
  return o;
}

std::string num(std::optional<double> v) {
  if (!v) return "null";
  std::ostringstream o;
  o.precision(6);
  o << *v;
  return o.str();
}

}  // namespace thoonk::bench
