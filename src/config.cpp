#include <thoonk/config.hpp>
#include <thoonk/error.hpp>

#include "detail/parse_int.hpp"

#include <boost/system/system_error.hpp>

#include <algorithm>
#include <cstdlib>

namespace thoonk {
namespace {

bool parse_uint(std::string_view s, unsigned long& out) {
  auto v = detail::parse_int<unsigned long>(s);
  if (v) out = *v;
  return v.has_value();
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool percent_decode(std::string_view in, std::string& out) {
  out.clear();
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return false;
    int hi = hex_digit(in[i + 1]), lo = hex_digit(in[i + 2]);
    if (hi < 0 || lo < 0) return false;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return true;
}

// Applies `db=N`, `password=...`, `username=...`, `cluster=yes|no`,
// `functions=yes|no` and the
// `tls_*` query parameters.
bool apply_query(std::string_view query, config& cfg) {
  while (!query.empty()) {
    auto amp = query.find('&');
    auto part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    auto eq = part.find('=');
    if (eq == std::string_view::npos) return false;
    auto key = part.substr(0, eq), val = part.substr(eq + 1);
    if (key == "db") {
      unsigned long db;
      if (!parse_uint(val, db) || db > 1'000'000) return false;
      cfg.database = static_cast<int>(db);
    } else if (key == "password") {
      if (!percent_decode(val, cfg.password)) return false;
    } else if (key == "username") {
      if (!percent_decode(val, cfg.username)) return false;
    } else if (key == "cluster" || key == "functions") {
      bool& field = key == "cluster" ? cfg.cluster : cfg.use_functions;
      if (val == "yes" || val == "1" || val == "true") field = true;
      else if (val == "no" || val == "0" || val == "false") field = false;
      else return false;
    } else if (key.starts_with("tls_")) {
      // TLS settings only make sense with TLS: on a redis:// URL they would
      // be silently ignored and the traffic sent in clear.
      if (!cfg.tls.enabled) return false;
      if (key == "tls_verify") {
        if (val == "none") {
          cfg.tls.verify_peer = false;
          cfg.tls.verify_hostname = false;
        } else if (val == "full") {
          cfg.tls.verify_peer = true;
          cfg.tls.verify_hostname = true;
        } else {
          return false;
        }
        continue;
      }
      std::string* field = key == "tls_ca_file"       ? &cfg.tls.ca_file
                           : key == "tls_ca_dir"      ? &cfg.tls.ca_dir
                           : key == "tls_cert_file"   ? &cfg.tls.cert_file
                           : key == "tls_key_file"    ? &cfg.tls.key_file
                           : key == "tls_server_name" ? &cfg.tls.server_name
                                                      : nullptr;
      if (field == nullptr || !percent_decode(val, *field)) return false;
    } else {
      return false;
    }
  }
  return true;
}

// `host`, `host:port`, `:port` or `[v6]:port`; what is missing keeps `a`'s.
bool parse_address(std::string_view authority, config::address& a) {
  std::string_view host = authority, port;
  if (authority.starts_with('[')) {  // [::1]:6379
    auto close = authority.find(']');
    if (close == std::string_view::npos) return false;
    host = authority.substr(1, close - 1);
    auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') return false;
      port = after.substr(1);
    }
  } else if (auto colon = authority.rfind(':'); colon != std::string_view::npos) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (!host.empty()) a.host = std::string(host);
  if (!port.empty()) {
    unsigned long p;
    if (!parse_uint(port, p) || p == 0 || p > 65535) return false;
    a.port = static_cast<std::uint16_t>(p);
  }
  return true;
}

}  // namespace

config config::from_url(std::string_view url, boost::system::error_code& ec, const config& base) {
  config cfg = base;
  ec = {};
  auto fail = [&] {
    ec = error::invalid_url;
    return base;
  };
  std::string_view query;
  if (auto q = url.find('?'); q != std::string_view::npos) {
    query = url.substr(q + 1);
    url = url.substr(0, q);
  }
  if (url.starts_with("unix://")) {
    auto path = url.substr(7);
    if (path.empty() || path.front() != '/') return fail();
    cfg.unix_socket = std::string(path);
    cfg.endpoints.clear();
    // Redis serves TLS on its TCP port only.
    cfg.tls.enabled = false;
    if (!apply_query(query, cfg)) return fail();
    return cfg;
  }
  std::string_view rest;
  if (url.starts_with("redis://")) {
    rest = url.substr(8);
    cfg.tls.enabled = false;
  } else if (url.starts_with("rediss://")) {
    rest = url.substr(9);
    cfg.tls.enabled = true;
  } else {
    return fail();
  }
  auto slash = rest.find('/');
  auto authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    auto db = rest.substr(slash + 1);
    if (!db.empty()) {
      unsigned long n;
      if (!parse_uint(db, n) || n > 1'000'000) return fail();
      cfg.database = static_cast<int>(n);
    }
  }
  if (auto at = authority.rfind('@'); at != std::string_view::npos) {
    auto userinfo = authority.substr(0, at);
    authority = authority.substr(at + 1);
    auto colon = userinfo.find(':');
    if (colon == std::string_view::npos) {
      // "redis://secret@host" is the common password-only form.
      if (!percent_decode(userinfo, cfg.password)) return fail();
    } else {
      if (!percent_decode(userinfo.substr(0, colon), cfg.username) ||
          !percent_decode(userinfo.substr(colon + 1), cfg.password))
        return fail();
    }
  }
  // One address, or several separated by commas (a primary and its
  // replicas: config::endpoints). A missing host or port is the base's.
  cfg.endpoints.clear();
  const std::size_t count =
      static_cast<std::size_t>(std::count(authority.begin(), authority.end(), ',')) + 1;
  while (true) {
    auto comma = authority.find(',');
    config::address a{cfg.host, cfg.port};
    if (!parse_address(authority.substr(0, comma), a)) return fail();
    if (count > 1) cfg.endpoints.push_back(a);
    else {
      cfg.host = a.host;
      cfg.port = a.port;
    }
    if (comma == std::string_view::npos) break;
    authority = authority.substr(comma + 1);
  }
  if (!cfg.endpoints.empty()) {
    cfg.host = cfg.endpoints.front().host;
    cfg.port = cfg.endpoints.front().port;
  }
  cfg.unix_socket.clear();
  if (!apply_query(query, cfg)) return fail();
  return cfg;
}

config config::from_url(std::string_view url, boost::system::error_code& ec) {
  return from_url(url, ec, config{});
}

config config::from_env() { return from_env(config{}); }

config config::from_env(const config& base) {
  const char* url = std::getenv("THOONK_REDIS_URL");
  if (url == nullptr || *url == '\0') return base;
  boost::system::error_code ec;
  auto cfg = from_url(url, ec, base);
  if (ec) throw boost::system::system_error(ec, "THOONK_REDIS_URL");
  return cfg;
}

}  // namespace thoonk
