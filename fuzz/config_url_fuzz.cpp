// Fuzz target: the URL parser of thoonk::config (config::from_url). Any
// input either parses or fails with error::invalid_url; a failure returns
// the base config untouched; a success gives a usable config (a port, an
// absolute socket path, TLS exactly for rediss://, TLS settings only with
// TLS). A crash, a sanitizer report or a broken rule is a finding.
#include <thoonk/config.hpp>
#include <thoonk/error.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace {

[[noreturn]] void finding(const char* what, std::string_view url) {
  std::fprintf(stderr, "from_url broke a rule (%s) for: %.*s\n", what, static_cast<int>(url.size()),
               url.data());
  std::abort();
}

bool same_where(const thoonk::config& a, const thoonk::config& b) {
  return a.host == b.host && a.port == b.port && a.unix_socket == b.unix_socket &&
         a.database == b.database && a.username == b.username && a.password == b.password &&
         a.tls.enabled == b.tls.enabled && a.tls.ca_file == b.tls.ca_file &&
         a.tls.server_name == b.tls.server_name && a.tls.verify_peer == b.tls.verify_peer;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view url(reinterpret_cast<const char*>(data), size);
  // A base whose every field differs from the defaults, so a field the URL
  // does not name must visibly survive.
  thoonk::config base;
  base.host = "base.example";
  base.port = 7000;
  base.database = 3;
  base.username = "base-user";
  base.password = "base-pass";
  base.tls.ca_file = "/base/ca.pem";
  base.tls.server_name = "base-name";

  boost::system::error_code ec;
  const thoonk::config cfg = thoonk::config::from_url(url, ec, base);
  if (ec) {
    if (ec != thoonk::error::invalid_url) finding("an error other than invalid_url", url);
    if (!same_where(cfg, base)) finding("a failed parse changed the config", url);
    return 0;
  }
  if (cfg.port == 0) finding("port 0", url);
  if (cfg.database < 0 || cfg.database > 1'000'000) finding("database out of range", url);
  const bool tls_url = url.starts_with("rediss://");
  if (cfg.tls.enabled != tls_url) finding("TLS on without rediss:// or off with it", url);
  if (!cfg.unix_socket.empty()) {
    if (!url.starts_with("unix://")) finding("a unix socket from a TCP URL", url);
    if (cfg.unix_socket.front() != '/') finding("a relative unix socket path", url);
  } else if (url.starts_with("unix://")) {
    finding("a unix:// URL without a socket path", url);
  }
  if (!tls_url && cfg.tls.server_name != base.tls.server_name)
    finding("a TLS setting taken from a URL without TLS", url);
  // Parsing is a function of the URL and the base only.
  boost::system::error_code ec2;
  const thoonk::config again = thoonk::config::from_url(url, ec2, base);
  if (ec2 || !same_where(cfg, again)) finding("two parses of one URL differ", url);
  return 0;
}
