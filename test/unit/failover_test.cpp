// Replicas and failover without I/O: the address order, the ROLE check in
// the setup, which replies mean "not executed, send again", the pauses
// before that, and config URLs with several hosts.
#include "connection/failover.hpp"
#include "connection/handshake.hpp"
#include "connection/request_queue.hpp"

#include <thoonk/config.hpp>
#include <thoonk/error.hpp>
#include <thoonk/request.hpp>

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

#include "support/resp3_values.hpp"

#include <string>
#include <vector>

using namespace std::chrono_literals;
using thoonk::detail::failover;
using thoonk::detail::unavailable;
namespace resp3 = thoonk::resp3;
using namespace thoonk::test;

namespace {

resp3::value role(std::string word) { return array_reply({string_reply(std::move(word))}); }

thoonk::config two_servers() {
  thoonk::config cfg;
  cfg.endpoints = {{"10.0.0.1", 6379}, {"10.0.0.2", 6380}, {"10.0.0.3", 6381}};
  return cfg;
}

}  // namespace

TEST_CASE("failover: one address by default, no ROLE check", "[unit][failover]") {
  thoonk::config cfg;
  cfg.host = "redis.internal";
  cfg.port = 7000;
  failover f(cfg);
  REQUIRE(f.addresses().size() == 1);
  CHECK_FALSE(f.checks_role());
  CHECK(f.on_attempt_failed());  // a round of one
  f.on_not_primary();
  CHECK(f.current().host == "redis.internal");
  CHECK(f.attempt_config(cfg).port == 7000);
}

TEST_CASE("failover: attempts go round the addresses; a lost connection tries the same first",
          "[unit][failover]") {
  auto cfg = two_servers();
  failover f(cfg);
  CHECK(f.checks_role());
  CHECK(f.current().host == "10.0.0.1");
  f.on_lost();
  CHECK(f.current().host == "10.0.0.1");
  CHECK_FALSE(f.on_attempt_failed());  // two addresses left in this round
  CHECK(f.current().host == "10.0.0.2");
  auto a = f.attempt_config(cfg);
  CHECK(a.host == "10.0.0.2");
  CHECK(a.port == 6380);
  CHECK(a.endpoints.size() == 3);
  f.on_not_primary();  // a new round
  CHECK(f.current().port == 6381);
  CHECK_FALSE(f.on_attempt_failed());
  CHECK(f.current().port == 6379);
  CHECK_FALSE(f.on_attempt_failed());
  CHECK(f.on_attempt_failed());     // all three failed: report and back off
  CHECK(f.current().port == 6381);  // the next round starts where this one did
  CHECK_FALSE(f.on_attempt_failed());
  f.on_connected();
  CHECK_FALSE(f.on_attempt_failed());
  CHECK_FALSE(f.on_attempt_failed());
  CHECK(f.on_attempt_failed());
}

TEST_CASE("failover: cluster seeds are not checked for their role", "[unit][failover][cluster]") {
  // In cluster mode the addresses are seeds, primaries or replicas alike:
  // each serves the slot map, so none is refused as a replica.
  auto cfg = two_servers();
  cfg.cluster = true;
  failover f(cfg);
  CHECK(f.addresses().size() == 3);
  CHECK_FALSE(f.checks_role());
  CHECK_FALSE(f.on_attempt_failed());  // the seeds are still tried in turn
  CHECK(f.current().host == "10.0.0.2");
}

TEST_CASE("failover: only a ROLE reply naming a master is a primary", "[unit][failover]") {
  CHECK(failover::is_primary(role("master")));
  CHECK_FALSE(failover::is_primary(role("slave")));
  CHECK_FALSE(failover::is_primary(role("sentinel")));
  CHECK_FALSE(failover::is_primary(
      error_reply("NOPERM this user has no permissions to run the 'role' command")));
  CHECK_FALSE(failover::is_primary(string_reply("master")));
  CHECK_FALSE(failover::is_primary(resp3::value{}));
  CHECK(failover::role_name(role("slave")) == "slave");
}

TEST_CASE("failover: READONLY, LOADING and MASTERDOWN mean not executed; nothing else does",
          "[unit][failover]") {
  CHECK(failover::classify(error_reply("READONLY You can't write against a read only replica.")) ==
        unavailable::readonly);
  CHECK(failover::classify(error_reply("LOADING Redis is loading the dataset in memory")) ==
        unavailable::loading);
  CHECK(failover::classify(
            error_reply("MASTERDOWN Link with MASTER is down and replica-serve-stale-data "
                        "is set to 'no'.")) == unavailable::masterdown);
  // A library script refused at its first write on a replica.
  CHECK(failover::classify(error_reply("ERR Error running script (call to f_x): @user_script:12: "
                                       "-READONLY You can't write against a read only replica.")) ==
        unavailable::readonly);
  // Not retried: an error that says the command ran or was wrong, success.
  CHECK(failover::classify(error_reply("ERR wrong number of arguments")) == unavailable::none);
  CHECK(failover::classify(error_reply("BUSY Redis is busy running a script")) ==
        unavailable::none);
  CHECK(failover::classify(error_reply("OOM command not allowed")) == unavailable::none);
  CHECK(failover::classify(string_reply("READONLY")) == unavailable::none);
  // A request: the first such reply decides; a read that succeeded beside it
  // does not stop the retry.
  thoonk::response r{string_reply("value"), error_reply("READONLY You can't write"),
                     error_reply("LOADING x")};
  CHECK(failover::classify(r) == unavailable::readonly);
  CHECK(failover::classify(thoonk::response{string_reply("a"), string_reply("b")}) ==
        unavailable::none);
}

TEST_CASE("failover: retries are bounded and their pauses double up to the maximum",
          "[unit][failover]") {
  thoonk::config cfg;
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 100ms;
  cfg.unavailable_retries = 4;
  failover f(cfg);
  CHECK(f.max_retries() == 4);
  CHECK(f.retry_delay(0) == 10ms);
  CHECK(f.retry_delay(1) == 20ms);
  CHECK(f.retry_delay(3) == 80ms);
  CHECK(f.retry_delay(4) == 100ms);
  CHECK(f.retry_delay(40) == 100ms);
}

TEST_CASE("failover: with several addresses the setup ends with ROLE and refuses a replica",
          "[unit][failover][handshake]") {
  auto cfg = two_servers();
  cfg.client_name.clear();
  thoonk::detail::handshake hs(cfg, true);
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));  // HELLO
  resp3::value ok;
  ok.type = resp3::type::map;
  hs.on_reply(ok);
  REQUIRE(hs.next_batch(batch));  // ROLE
  CHECK(batch.payload() == "*1\r\n$4\r\nROLE\r\n");
  REQUIRE(hs.replies_due() == 1);
  SECTION("a replica: not_primary, not a refusal (another address may be the primary)") {
    hs.on_reply(role("slave"));
    CHECK(hs.error() == thoonk::error::not_primary);
    CHECK_FALSE(hs.refused());
    CHECK(hs.server_message() == "ROLE: slave");
  }
  SECTION("the primary: set up") {
    hs.on_reply(role("master"));
    CHECK(!hs.error());
    CHECK_FALSE(hs.next_batch(batch));
  }
  SECTION("a user without +role: refused with no_permission") {
    hs.on_reply(error_reply("NOPERM this user has no permissions to run the 'role' command"));
    CHECK(hs.error() == thoonk::error::no_permission);
    CHECK(hs.refused());
  }
}

TEST_CASE("failover: a request queued again keeps its number for cancellation",
          "[unit][failover][request_queue]") {
  thoonk::detail::request_queue q;
  std::vector<thoonk::detail::completion> out;
  auto seq = q.push(
      "*1\r\n$4\r\nPING\r\n", 1, [](boost::system::error_code, thoonk::response) {}, true, {},
      true);
  q.push(
      "*1\r\n$3\r\nGET\r\n", 1, [](boost::system::error_code, thoonk::response) {}, true);
  q.take_batch();
  REQUIRE(q.on_reply(error_reply("LOADING x"), out));
  REQUIRE(out.size() == 1);
  REQUIRE(out[0].retained);
  CHECK(out[0].retained->seq == seq);
  CHECK(out[0].retained->payload == "*1\r\n$4\r\nPING\r\n");
  q.push_again(std::move(*out[0].retained), out[0].handler.take());
  out.clear();
  CHECK(q.has_unwritten());
  // The second request (a newer number) is still in flight, the first is
  // queued behind it: cancelling by the old number finds the right one.
  q.cancel(seq, boost::asio::error::operation_aborted, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].ec == boost::asio::error::operation_aborted);
  CHECK_FALSE(q.has_unwritten());
  CHECK(q.in_flight() == 1);
  // Unretained requests carry nothing back.
  out.clear();
  REQUIRE(q.on_reply(string_reply("v"), out));
  REQUIRE(out.size() == 1);
  CHECK_FALSE(out[0].retained);
}

TEST_CASE("config: a URL with several hosts fills endpoints", "[unit][failover][config]") {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url("redis://u:p@h1:7001,h2,[::1]:7003/2", ec);
  REQUIRE(!ec);
  REQUIRE(cfg.endpoints.size() == 3);
  CHECK(cfg.endpoints[0].host == "h1");
  CHECK(cfg.endpoints[0].port == 7001);
  CHECK(cfg.endpoints[1].host == "h2");
  CHECK(cfg.endpoints[1].port == 6379);
  CHECK(cfg.endpoints[2].host == "::1");
  CHECK(cfg.endpoints[2].port == 7003);
  CHECK(cfg.host == "h1");
  CHECK(cfg.database == 2);
  CHECK(cfg.username == "u");
  auto one = thoonk::config::from_url("redis://h9:7009", ec, cfg);
  REQUIRE(!ec);
  CHECK(one.endpoints.empty());
  CHECK(one.host == "h9");
  thoonk::config::from_url("redis://h1:1,h2:99999", ec);
  CHECK(ec == thoonk::error::invalid_url);
  thoonk::config::from_url("redis://h1,[::1", ec);
  CHECK(ec == thoonk::error::invalid_url);
}
