// Small no-I/O pieces: backoff, key naming and validation, URL parsing,
// error messages, UUIDs, script digests.
#include "connection/backoff.hpp"
#include "detail/keys.hpp"
#include "detail/uuid.hpp"

#include <thoonk/config.hpp>
#include <thoonk/error.hpp>
#include <thoonk/script.hpp>

#include <catch2/catch.hpp>

#include <set>

using namespace std::chrono_literals;

TEST_CASE("backoff: doubles with jitter between min and max", "[unit]") {
  thoonk::detail::backoff b(100ms, 1000ms, 42);
  std::vector<std::chrono::milliseconds> d;
  for (int i = 0; i < 8; ++i) d.push_back(b.next());
  CHECK(d[0] >= 50ms);
  CHECK(d[0] <= 100ms);
  CHECK(d[1] >= 100ms);
  CHECK(d[1] <= 200ms);
  CHECK(d[2] >= 200ms);
  CHECK(d[2] <= 400ms);
  for (int i = 4; i < 8; ++i) {
    CHECK(d[i] >= 500ms);
    CHECK(d[i] <= 1000ms);
  }
  b.reset();
  CHECK(b.next() <= 100ms);
}

TEST_CASE("keys: contract names and the cluster hash-tag policy", "[unit][keys]") {
  thoonk::config cfg;
  thoonk::detail::feed_names n(cfg, "orders");
  CHECK(n.key("ids") == "feed.ids:orders");
  CHECK(n.key("items") == "feed.items:orders");
  CHECK(n.channel("publish") == "feed.publish:orders");
  CHECK(n.job_finish_channel() == "job.finish:orders");
  CHECK(n.job_result_key("42") == std::string("feed.jobfinished:orders\0"
                                              "42",
                                              26));
  cfg.cluster_hash_tags = true;
  thoonk::detail::feed_names c(cfg, "orders");
  CHECK(c.key("ids") == "feed.ids:{orders}");
  // On one server channels keep the contract's bare names.
  CHECK(c.channel("publish") == "feed.publish:orders");
  CHECK(c.job_finish_channel() == "job.finish:orders");
  CHECK(thoonk::detail::catchup_channel("uuid", c) == "thoonk.sync:uuid");
}

TEST_CASE("keys: names, ids and items are validated", "[unit][keys]") {
  thoonk::config cfg;
  cfg.max_name_length = 8;
  cfg.max_item_size = 4;
  using thoonk::detail::validate_id;
  using thoonk::detail::validate_item;
  using thoonk::detail::validate_name;
  CHECK(!validate_name(cfg, "ok"));
  CHECK(validate_name(cfg, "") == thoonk::error::invalid_name);
  CHECK(validate_name(cfg, std::string("a\0b", 3)) == thoonk::error::invalid_name);
  CHECK(validate_name(cfg, "123456789") == thoonk::error::invalid_name);
  CHECK(validate_name(cfg, "a{b}") == thoonk::error::invalid_name);
  cfg.allow_hash_tag_names = true;
  CHECK(!validate_name(cfg, "a{b}"));
  CHECK(validate_id(cfg, "") == thoonk::error::invalid_id);
  CHECK(validate_id(cfg, std::string("\0", 1)) == thoonk::error::invalid_id);
  CHECK(!validate_item(cfg, std::string("a\0b", 3)));  // NUL in items is fine
  CHECK(validate_item(cfg, "12345") == thoonk::error::item_too_large);
}

TEST_CASE("config: redis:// and unix:// URLs", "[unit][config]") {
  boost::system::error_code ec;
  auto c = thoonk::config::from_url("redis://user:p%40ss@example.com:6380/2", ec);
  REQUIRE(!ec);
  CHECK(c.host == "example.com");
  CHECK(c.port == 6380);
  CHECK(c.username == "user");
  CHECK(c.password == "p@ss");
  CHECK(c.database == 2);
  c = thoonk::config::from_url("redis://secret@127.0.0.1", ec);
  REQUIRE(!ec);
  CHECK(c.password == "secret");
  CHECK(c.port == 6379);
  c = thoonk::config::from_url("redis://[::1]:7000?db=5", ec);
  REQUIRE(!ec);
  CHECK(c.host == "::1");
  CHECK(c.port == 7000);
  CHECK(c.database == 5);
  c = thoonk::config::from_url("unix:///tmp/r.sock?db=1", ec);
  REQUIRE(!ec);
  CHECK(c.unix_socket == "/tmp/r.sock");
  CHECK(c.database == 1);
  for (auto bad : {"http://x", "redis://h:0", "redis://h:99999", "redis://h:12ab", "redis://h/x",
                   "unix://relative", "redis://h?bogus=1", "redis://u:%zz@h"}) {
    thoonk::config::from_url(bad, ec);
    INFO(bad);
    CHECK(ec == thoonk::error::invalid_url);
  }
}

TEST_CASE("errors: every code has a message in the thoonk category", "[unit]") {
  for (int e = static_cast<int>(thoonk::error::invalid_type_byte);
       e <= static_cast<int>(thoonk::error::cluster_cross_slot); ++e) {  // the last code
    boost::system::error_code ec = static_cast<thoonk::error>(e);
    CHECK(std::string(ec.category().name()) == "thoonk");
    CHECK(ec.message().find("unknown thoonk error") == std::string::npos);
    CHECK(ec.message().size() > 20);
  }
}

TEST_CASE("uuid: version 4 format, unique", "[unit]") {
  std::set<std::string> seen;
  for (int i = 0; i < 1000; ++i) {
    auto u = thoonk::detail::make_uuid();
    REQUIRE(u.size() == 36);
    CHECK(u[8] == '-');
    CHECK(u[14] == '4');
    CHECK(std::string("89ab").find(u[19]) != std::string::npos);
    seen.insert(u);
  }
  CHECK(seen.size() == 1000);
}

TEST_CASE("script: SHA1 matches what Redis computes", "[unit]") {
  // SHA1("return 1") as SCRIPT LOAD reports it.
  thoonk::script s("return 1");
  CHECK(s.sha1() == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}
