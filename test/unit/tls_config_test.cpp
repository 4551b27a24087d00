// rediss:// URLs and the TLS settings of thoonk::config; the error codes
// added for TLS and for reply memory; the parser's answer to a TLS record.
#include <thoonk/config.hpp>
#include <thoonk/error.hpp>
#include <thoonk/resp3/parser.hpp>

#include <catch2/catch.hpp>

#include <string>

using thoonk::error;

TEST_CASE("config: rediss:// turns TLS on and takes the tls_* parameters", "[unit][config][tls]") {
  boost::system::error_code ec;
  auto c = thoonk::config::from_url("rediss://u:p@redis.example:6380/1", ec);
  REQUIRE(!ec);
  CHECK(c.tls.enabled);
  CHECK(c.host == "redis.example");
  CHECK(c.port == 6380);
  CHECK(c.database == 1);
  CHECK(c.username == "u");
  // Safe defaults: verification on, TLS 1.2 at least.
  CHECK(c.tls.verify_peer);
  CHECK(c.tls.verify_hostname);
  CHECK(c.tls.min_version == 12);

  c = thoonk::config::from_url(
      "rediss://10.0.0.5:6390?tls_ca_file=/etc/ca%20dir/ca.pem&tls_ca_dir=/etc/cas"
      "&tls_cert_file=/c.crt&tls_key_file=/c.key&tls_server_name=redis.internal&db=2",
      ec);
  REQUIRE(!ec);
  CHECK(c.tls.enabled);
  CHECK(c.tls.ca_file == "/etc/ca dir/ca.pem");
  CHECK(c.tls.ca_dir == "/etc/cas");
  CHECK(c.tls.cert_file == "/c.crt");
  CHECK(c.tls.key_file == "/c.key");
  CHECK(c.tls.server_name == "redis.internal");
  CHECK(c.database == 2);

  c = thoonk::config::from_url("rediss://h?tls_verify=none", ec);
  REQUIRE(!ec);
  CHECK_FALSE(c.tls.verify_peer);
  CHECK_FALSE(c.tls.verify_hostname);
  c = thoonk::config::from_url("rediss://h?tls_verify=full", ec);
  REQUIRE(!ec);
  CHECK(c.tls.verify_peer);
}

TEST_CASE("config: the URL's scheme decides TLS; the base keeps the files", "[unit][config][tls]") {
  thoonk::config base;
  base.tls.ca_file = "/base/ca.pem";
  base.tls.enabled = true;
  boost::system::error_code ec;
  auto c = thoonk::config::from_url("redis://h:1", ec, base);
  REQUIRE(!ec);
  CHECK_FALSE(c.tls.enabled);
  c = thoonk::config::from_url("unix:///tmp/s.sock", ec, base);
  REQUIRE(!ec);
  CHECK_FALSE(c.tls.enabled);
  base.tls.enabled = false;
  c = thoonk::config::from_url("rediss://h:1", ec, base);
  REQUIRE(!ec);
  CHECK(c.tls.enabled);
  CHECK(c.tls.ca_file == "/base/ca.pem");
}

TEST_CASE("config: TLS settings without TLS, or unknown ones, are refused", "[unit][config][tls]") {
  thoonk::config base;
  base.host = "kept";
  for (auto bad :
       {"redis://h?tls_ca_file=/ca.pem", "redis://h?tls_verify=none",
        "unix:///s.sock?tls_cert_file=/c", "rediss://h?tls_verify=maybe", "rediss://h?tls_bogus=1",
        "rediss://h?tls_ca_file=%zz", "redisss://h", "rediss:/h", "rediss://h:0"}) {
    boost::system::error_code ec;
    auto c = thoonk::config::from_url(bad, ec, base);
    INFO(bad);
    CHECK(ec == error::invalid_url);
    CHECK(c.host == "kept");
    CHECK_FALSE(c.tls.enabled);
  }
}

TEST_CASE("errors: the TLS and reply memory codes have messages that say what to check",
          "[unit][tls]") {
  struct expectation {
    error code;
    const char* mentions;
  };
  for (auto [code, mentions] : {expectation{error::tls_handshake_failed, "TLS port"},
                                expectation{error::tls_certificate_rejected, "tls.ca_file"},
                                expectation{error::tls_config_invalid, "tls.key_file"},
                                expectation{error::tls_required, "rediss://"},
                                expectation{error::reply_too_many_values, "max_reply_values"},
                                expectation{error::reply_memory_exceeded, "max_reply_memory"}}) {
    const boost::system::error_code ec = code;
    INFO(ec.message());
    CHECK(std::string(ec.category().name()) == "thoonk");
    CHECK(ec.message().find(mentions) != std::string::npos);
  }
  CHECK(thoonk::resp3::is_parse_error(error::reply_too_many_values));
  CHECK(thoonk::resp3::is_parse_error(error::reply_memory_exceeded));
  CHECK(thoonk::resp3::is_parse_error(error::tls_required));
  CHECK(thoonk::resp3::is_parse_error(error::invalid_type_byte));
  CHECK(thoonk::resp3::is_parse_error(error::unsupported_streamed));
  CHECK_FALSE(thoonk::resp3::is_parse_error(error::unexpected_reply));
  CHECK_FALSE(thoonk::resp3::is_parse_error(error::tls_handshake_failed));
  CHECK_FALSE(thoonk::resp3::is_parse_error(boost::system::error_code{}));
}

TEST_CASE("resp3 parser: a TLS record where a reply should start is tls_required",
          "[unit][resp3][tls]") {
  // What a TLS port sends a plain client: an alert (0x15) or a handshake
  // record (0x16), TLS 1.x version bytes after.
  for (const std::string& wire : {std::string("\x15\x03\x01\x00\x02\x02\x46", 7),
                                  std::string("\x16\x03\x03\x00\x10", 5), std::string("\x15", 1)}) {
    thoonk::resp3::parser p;
    boost::system::error_code ec;
    CHECK(p.consume(wire, ec) == 0);
    CHECK(ec == error::tls_required);
  }
  // After a complete reply, the same byte still fails the next one.
  thoonk::resp3::parser p;
  boost::system::error_code ec;
  const std::string wire = std::string("+OK\r\n") + '\x15';
  CHECK(p.consume(wire, ec) == 5);
  CHECK_FALSE(ec);
  REQUIRE(p.ready());
  (void)p.take();
  CHECK(p.consume(std::string_view(wire).substr(5), ec) == 0);
  CHECK(ec == error::tls_required);
}
