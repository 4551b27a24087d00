// The connection setup without I/O: which handshake replies are fatal
// (refused), which are ignorable (a refused client name), which are
// transient, what the handshake sends next, and the reconnect policy that
// follows from it (delays, failing requests instead of waiting).
#include "connection/handshake.hpp"
#include "connection/backoff.hpp"

#include <thoonk/config.hpp>
#include <thoonk/error.hpp>
#include <thoonk/request.hpp>

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

#include "support/resp3_values.hpp"

#include <string>
#include <vector>

using namespace std::chrono_literals;
using boost::system::error_code;
using thoonk::detail::classify_setup_reply;
using thoonk::detail::handshake;
using thoonk::detail::reconnect_policy;
using thoonk::detail::setup_step;
using thoonk::detail::setup_verdict;
using namespace thoonk::test;

namespace {

thoonk::resp3::value ok() { return simple_reply("OK"); }

// HELLO's reply: a map (its content does not matter to the handshake).
thoonk::resp3::value hello_map() { return aggregate_reply(thoonk::resp3::type::map); }

template <class... Args>
std::string bytes(std::string_view command, const Args&... args) {
  thoonk::request r;
  r.push(command, args...);
  return r.payload();
}

// What Redis answers to a client name with spaces.
constexpr const char* invalid_name_reply =
    "ERR Client names cannot contain spaces, newlines or special characters.";

thoonk::config base_config() {
  thoonk::config cfg;
  cfg.client_name = "app";
  return cfg;
}

// base_config() for user "u" with `password`, on `database`.
thoonk::config user_config(std::string password, int database) {
  auto cfg = base_config();
  cfg.username = "u";
  cfg.password = std::move(password);
  cfg.database = database;
  return cfg;
}

}  // namespace

TEST_CASE("setup replies: credentials, database and ACL refusals are fatal", "[unit][handshake]") {
  struct row {
    setup_step step;
    std::string text;
    thoonk::error expected;
  };
  auto r = GENERATE(
      row{setup_step::hello, "WRONGPASS invalid username-password pair or user is disabled.",
          thoonk::error::auth_failed},
      row{setup_step::hello,
          "NOAUTH HELLO must be called with the client already authenticated, otherwise ...",
          thoonk::error::auth_failed},
      row{setup_step::auth, "WRONGPASS invalid username-password pair or user is disabled.",
          thoonk::error::auth_failed},
      row{setup_step::auth, "ERR invalid password", thoonk::error::auth_failed},
      row{setup_step::auth,
          "ERR AUTH <password> called without any password configured for "
          "the default user. Are you sure your configuration is correct?",
          thoonk::error::auth_failed},
      row{setup_step::auth, "ERR Client sent AUTH, but no password is set",
          thoonk::error::auth_failed},
      // RESP2 without a password against a server that needs one: SETNAME is
      // the first command and gets NOAUTH. Not a refused name.
      row{setup_step::setname, "NOAUTH Authentication required.", thoonk::error::auth_failed},
      row{setup_step::select, "NOAUTH Authentication required.", thoonk::error::auth_failed},
      row{setup_step::select, "ERR DB index is out of range", thoonk::error::handshake_failed},
      row{setup_step::select, "ERR SELECT is not allowed in cluster mode",
          thoonk::error::handshake_failed},
      row{setup_step::select, "NOPERM this user has no permissions to run the 'select' command",
          thoonk::error::no_permission},
      row{setup_step::hello, "ERR Syntax error in HELLO option 'X'",
          thoonk::error::handshake_failed});
  CAPTURE(r.text);
  auto m = classify_setup_reply(r.step, error_reply(r.text), true);
  CHECK(m.verdict == setup_verdict::refused);
  CHECK(m.ec == r.expected);
  CHECK(!m.ec.message().empty());
}

TEST_CASE("setup replies: a refused client name is not fatal", "[unit][handshake]") {
  SECTION(
      "CLIENT SETNAME refused: by the ACL no_permission, an invalid name handshake_failed; go on") {
    struct row {
      const char* text;
      thoonk::error expected;
    };
    for (const row& r :
         {row{"NOPERM this user has no permissions to run the 'client|setname' command",
              thoonk::error::no_permission},
          row{invalid_name_reply, thoonk::error::handshake_failed}}) {
      CAPTURE(r.text);
      auto m = classify_setup_reply(setup_step::setname, error_reply(r.text));
      CHECK(m.verdict == setup_verdict::name_refused);
      CHECK(m.ec == r.expected);
    }
  }
  SECTION("HELLO refusing the name it carried: HELLO again without it") {
    auto m = classify_setup_reply(setup_step::hello, error_reply(invalid_name_reply), true);
    CHECK(m.verdict == setup_verdict::drop_name);
    // Without SETNAME in the HELLO, the same text cannot be about our name.
    auto m2 = classify_setup_reply(setup_step::hello, error_reply(invalid_name_reply), false);
    CHECK(m2.verdict == setup_verdict::refused);
  }
}

TEST_CASE("setup replies: HELLO refusals fall back to RESP2", "[unit][handshake]") {
  auto text =
      GENERATE(std::string("NOPROTO unsupported protocol version"),
               std::string("ERR unknown command 'HELLO'"),
               std::string("ERR unknown command `HELLO`, with args beginning with: `3`, "),
               // Redis 6 checks HELLO against the ACL (Redis 7 does not).
               std::string("NOPERM this user has no permissions to run the 'hello' command"));
  CAPTURE(text);
  auto m = classify_setup_reply(setup_step::hello, error_reply(text), true);
  CHECK(m.verdict == setup_verdict::use_resp2);
  CHECK(!m.ec);
}

TEST_CASE("setup replies: a server that cannot serve yet is transient", "[unit][handshake]") {
  auto text = GENERATE(std::string("LOADING Redis is loading the dataset in memory"),
                       std::string("BUSY Redis is busy running a script."),
                       std::string("MASTERDOWN Link with MASTER is down"),
                       std::string("ERR max number of clients reached"),
                       std::string("TRYAGAIN Multiple keys request during rehashing of slot"));
  auto step =
      GENERATE(setup_step::hello, setup_step::auth, setup_step::setname, setup_step::select);
  CAPTURE(text);
  auto m = classify_setup_reply(step, error_reply(text), true);
  CHECK(m.verdict == setup_verdict::transient);
  CHECK(m.ec == thoonk::error::handshake_failed);
  // BUSYKEY is not BUSY.
  CHECK(classify_setup_reply(setup_step::select,
                             error_reply("BUSYKEY Target key name already exists."))
            .verdict == setup_verdict::refused);
}

TEST_CASE("setup replies: success is success", "[unit][handshake]") {
  for (auto step : {setup_step::hello, setup_step::auth, setup_step::setname, setup_step::select})
    CHECK(classify_setup_reply(step, ok()).verdict == setup_verdict::ok);
}

TEST_CASE("handshake: RESP3 sends HELLO with AUTH and SETNAME, then SELECT", "[unit][handshake]") {
  handshake hs(user_config("pw", 3));
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));
  CHECK(batch.payload() == bytes("HELLO", "3", "AUTH", "u", "pw", "SETNAME", "app"));
  CHECK(!hs.final_batch());
  REQUIRE(hs.replies_due() == 1);
  hs.on_reply(hello_map());
  CHECK(hs.protocol() == 3);
  REQUIRE(hs.next_batch(batch));
  CHECK(hs.final_batch());
  CHECK(batch.payload() == bytes("SELECT", 3));
  REQUIRE(hs.replies_due() == 1);
  hs.on_reply(ok());
  CHECK(!hs.next_batch(batch));
  CHECK(!hs.error());
  CHECK(!hs.name_refused());
}

TEST_CASE("handshake: the last batch is offered even when empty", "[unit][handshake]") {
  // The subscriber appends its SUBSCRIBEs to it.
  handshake hs(base_config());
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));
  hs.on_reply(hello_map());
  REQUIRE(hs.next_batch(batch));
  CHECK(hs.final_batch());
  CHECK(batch.empty());
  CHECK(hs.replies_due() == 0);
  CHECK(!hs.next_batch(batch));
  CHECK(!hs.error());
}

TEST_CASE("handshake: HELLO refused by the ACL, RESP2 SETNAME refused: connected without a name",
          "[unit][handshake]") {
  handshake hs(user_config("pw", 1));
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));
  hs.on_reply(error_reply("NOPERM this user has no permissions to run the 'hello' command"));
  CHECK(hs.protocol() == 2);
  REQUIRE(hs.next_batch(batch));
  CHECK(batch.payload() ==
        bytes("AUTH", "u", "pw") + bytes("CLIENT", "SETNAME", "app") + bytes("SELECT", 1));
  REQUIRE(hs.replies_due() == 3);
  hs.on_reply(ok());
  hs.on_reply(
      error_reply("NOPERM this user has no permissions to run the 'client|setname' command"));
  hs.on_reply(ok());
  CHECK(!hs.next_batch(batch));
  CHECK(!hs.error());
  CHECK(hs.name_refused());
  CHECK(hs.name_error() == thoonk::error::no_permission);
  CHECK(hs.server_message().find("client|setname") != std::string::npos);
}

TEST_CASE("handshake: protocol 2 never sends HELLO", "[unit][handshake]") {
  auto cfg = base_config();
  cfg.protocol = 2;
  cfg.password = "pw";
  handshake hs(cfg);
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));
  CHECK(hs.final_batch());
  CHECK(batch.payload() == bytes("AUTH", "pw") + bytes("CLIENT", "SETNAME", "app"));
  hs.on_reply(ok());
  hs.on_reply(error_reply(invalid_name_reply));
  CHECK(!hs.next_batch(batch));
  CHECK(!hs.error());
  CHECK(hs.protocol() == 2);
  CHECK(hs.name_error() == thoonk::error::handshake_failed);
}

TEST_CASE("handshake: a name HELLO refuses is dropped and HELLO sent again", "[unit][handshake]") {
  auto cfg = base_config();
  cfg.client_name = "bad name";
  cfg.password = "pw";
  handshake hs(cfg);
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));
  hs.on_reply(error_reply(invalid_name_reply));
  CHECK(!hs.error());
  REQUIRE(hs.next_batch(batch));
  CHECK(batch.payload() == bytes("HELLO", "3", "AUTH", "default", "pw"));
  CHECK(!hs.final_batch());
  hs.on_reply(hello_map());
  CHECK(hs.protocol() == 3);
  REQUIRE(hs.next_batch(batch));
  CHECK(batch.empty());
  CHECK(!hs.next_batch(batch));
  CHECK(!hs.error());
  CHECK(hs.name_refused());
}

TEST_CASE("handshake: the first refusal decides and the rest need not be read",
          "[unit][handshake]") {
  auto cfg = user_config("wrong", 2);
  cfg.protocol = 2;
  handshake hs(cfg);
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));
  REQUIRE(hs.replies_due() == 3);
  hs.on_reply(error_reply("WRONGPASS invalid username-password pair or user is disabled."));
  CHECK(hs.replies_due() == 0);
  CHECK(!hs.next_batch(batch));
  CHECK(hs.error() == thoonk::error::auth_failed);
  CHECK(hs.refused());
  CHECK(hs.server_message().starts_with("WRONGPASS"));
}

TEST_CASE("handshake: a transient failure is not a refusal", "[unit][handshake]") {
  handshake hs(base_config());
  thoonk::request batch;
  REQUIRE(hs.next_batch(batch));
  hs.on_reply(error_reply("LOADING Redis is loading the dataset in memory"));
  CHECK(!hs.next_batch(batch));
  CHECK(hs.error() == thoonk::error::handshake_failed);
  CHECK(!hs.refused());
}

TEST_CASE("backoff: saturate jumps to the top tier until reset", "[unit][backoff]") {
  thoonk::detail::backoff b(10ms, 1000ms, 7);
  b.saturate();
  for (int i = 0; i < 50; ++i) {
    auto d = b.next();
    CHECK(d >= 500ms);
    CHECK(d <= 1000ms);
  }
  b.reset();
  CHECK(b.next() <= 10ms);
  // min == max: the only tier is the top one.
  thoonk::detail::backoff flat(100ms, 100ms, 7);
  flat.saturate();
  CHECK(flat.next() >= 50ms);
}

TEST_CASE("reconnect policy: a refused setup fails requests and waits the maximum delay",
          "[unit][backoff]") {
  reconnect_policy p(10ms, 5000ms, 42);
  SECTION("transient failures grow from the minimum and let requests wait") {
    CHECK(p.on_failed(boost::asio::error::connection_refused, false) <= 10ms);
    CHECK(p.on_failed(boost::asio::error::connection_refused, false) <= 20ms);
    CHECK(!p.refusal());
  }
  SECTION("a refusal: every delay is in [max/2, max], requests fail with its error") {
    for (int i = 0; i < 20; ++i) {
      auto d = p.on_failed(thoonk::error::auth_failed, true);
      CHECK(d >= 2500ms);
      CHECK(d <= 5000ms);
    }
    CHECK(p.refusal() == thoonk::error::auth_failed);
    // The server going away meanwhile proves nothing about the credentials:
    // the refusal stays, and so does the slow pace.
    auto d = p.on_failed(boost::asio::error::connection_refused, false);
    CHECK(d >= 2500ms);
    CHECK(p.refusal() == thoonk::error::auth_failed);
    // With the password corrected, the next attempt succeeds.
    p.on_connected();
    CHECK(!p.refusal());
    CHECK(p.on_lost() <= 10ms);
  }
  SECTION("the latest refusal is the one reported") {
    p.on_failed(thoonk::error::auth_failed, true);
    p.on_failed(thoonk::error::no_permission, true);
    CHECK(p.refusal() == thoonk::error::no_permission);
  }
}
