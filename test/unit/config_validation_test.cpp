// No-I/O checks of what create_feed / set_config accept
// (detail::validate_config_field, docs/feeds.md §2, docs/jobs.md §1) and of
// how ACL refusals map to error codes (detail::permission_error, used by
// the one script error mapper detail::reply_error; docs/errors.md
// "Permissions").
#include "feeds/common.hpp"
#include "scripts/script_exec.hpp"

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/resp3/value.hpp>

#include <catch2/catch.hpp>

#include "support/resp3_values.hpp"

#include <string>
#include <vector>

using thoonk::detail::validate_config_field;
using thoonk::test::error_reply;

namespace {

const std::string max_exact = "9007199254740991";  // 2^53 - 1
const std::string above_max = "9007199254740992";  // 2^53
const std::string huge = "123456789012345678901234567890";

void check_ok(const std::string& field, const std::string& value) {
  INFO(field << " = '" << value << "'");
  auto r = validate_config_field(field, value);
  CHECK(!r.ec);
  CHECK(r.reason.empty());
  CHECK(thoonk::config_field_problem(field, value).empty());
}

void check_bad(const std::string& field, const std::string& value) {
  INFO(field << " = '" << value << "'");
  auto r = validate_config_field(field, value);
  CHECK(r.ec == thoonk::error::invalid_argument);
  // The reason names the field (the error code's message cannot).
  CHECK(r.reason.find("'" + field + "'") != std::string::npos);
  // The public entry point gives the same sentence.
  CHECK(thoonk::config_field_problem(field, value) == r.reason);
}

}  // namespace

TEST_CASE("config: every integer field the library reads is checked for type and range",
          "[unit][config]") {
  struct range {
    std::string field;
    std::string min;        // smallest allowed value
    std::string below_min;  // empty: the minimum is 0 (only negatives are below)
  };
  const range fields[] = {
      {"max_length", "0", ""},     {"retraction_log", "0", ""}, {"claim_timeout_ms", "1", "0"},
      {"max_stalls", "1", "0"},    {"max_retries", "1", "0"},   {"result_ttl_ms", "1", "0"},
      {"min_backoff_ms", "0", ""}, {"max_backoff_ms", "0", ""},
  };
  for (const auto& f : fields) {
    SECTION(f.field) {
      // Good values: the minimum, a usual one, the largest exact integer.
      check_ok(f.field, f.min);
      check_ok(f.field, "5000");
      check_ok(f.field, max_exact);
      // Bad type.
      check_bad(f.field, "banana");
      check_bad(f.field, "");
      check_bad(f.field, "1.5");
      check_bad(f.field, "1e3");
      check_bad(f.field, " 5");
      check_bad(f.field, "5 ");
      check_bad(f.field, "+5");
      check_bad(f.field, "0x10");
      // Negative.
      check_bad(f.field, "-3");
      check_bad(f.field, "-0");
      // Out of range.
      check_bad(f.field, above_max);
      check_bad(f.field, huge);
      if (!f.below_min.empty()) check_bad(f.field, f.below_min);
      // The reason gives the allowed range.
      auto r = validate_config_field(f.field, "banana");
      CHECK(r.reason.find("from " + f.min + " to " + max_exact) != std::string::npos);
    }
  }
}

TEST_CASE("config: published and events are 0 or 1", "[unit][config]") {
  for (const std::string flag : {"published", "events"}) {
    check_ok(flag, "0");
    check_ok(flag, "1");
    check_bad(flag, "banana");  // type
    check_bad(flag, "-1");      // negative
    check_bad(flag, "2");       // out of range
    check_bad(flag, "true");
    check_bad(flag, "");
    auto r = validate_config_field(flag, "yes");
    CHECK(r.reason.find("'0' or '1'") != std::string::npos);
  }
}

TEST_CASE("config: dead_letter_queue names a queue", "[unit][config]") {
  check_ok("dead_letter_queue", "orders.dead");
  check_ok("dead_letter_queue", "");
  check_bad("dead_letter_queue", std::string("a\0b", 3));
}

TEST_CASE("config: type and empty names are refused, other fields are the application's",
          "[unit][config]") {
  check_bad("type", "job");
  CHECK(validate_config_field("", "x").ec == thoonk::error::invalid_argument);
  CHECK(!validate_config_field("", "x").reason.empty());
  // Not read by the library: any value.
  check_ok("owner", "banana");
  check_ok("owner", "-3");
  check_ok("description", "");
  check_ok("max_length_hint", "banana");  // only exact names are checked
  check_ok("MAX_LENGTH", "banana");       // field names are case-sensitive in Redis
}

TEST_CASE("permissions: ACL refusals map to the specific codes, in every Redis wording",
          "[unit][acl]") {
  using thoonk::detail::permission_error;
  using E = thoonk::error;
  // The library's own check (check_publish) uses the THOONK convention.
  CHECK(thoonk::detail::reply_error(error_reply(
            "THOONK no_channel_permission the user may not PUBLISH on feed.publish:x")) ==
        E::no_channel_permission);
  // Each code with the refusal texts that map to it.
  struct group {
    boost::system::error_code expected;  // none: not a permission error
    std::vector<const char*> texts;
  };
  const group groups[] = {
      {E::no_script_permission,
       // Refused before the script runs (Redis 7.0 and 7.2+ texts).
       {"NOPERM this user has no permissions to run the 'evalsha' command",
        "NOPERM this user has no permissions to run the 'eval' command",
        "NOPERM this user has no permissions to run the 'script|load' command",
        "NOPERM User app has no permissions to run the 'evalsha' command"}},
      {E::no_key_permission,
       {"NOPERM this user has no permissions to access one of the keys used as arguments",
        "NOPERM No permissions to access a key",
        // Inside a script: Redis 7.0, then 7.2 and later.
        "ERR The user executing the script can't access at least one of the keys mentioned in "
        "the command arguments script: 8618, on @user_script:1.",
        "ERR ACL failure in script: No permissions to access a key script: 8a2f, on "
        "@user_script:4."}},
      {E::no_channel_permission,
       {"NOPERM this user has no permissions to access one of the channels used as arguments",
        "NOPERM No permissions to access a channel",
        "NOPERM this user has no permissions to run the 'publish' command",
        "ERR The user executing the script can't publish to the channel mentioned in the "
        "command script: 95eb, on @user_script:1.",
        "ERR ACL failure in script: User app has no permissions to run the 'publish' command "
        "script: 8a2f, on @user_script:4.",
        "ERR ACL failure in script: No permissions to access a channel script: 8a2f, on "
        "@user_script:4."}},
      {E::no_permission,
       {"NOPERM this user has no permissions to run the 'hset' command",
        "ERR The user executing the script can't run this command or subcommand script: 95eb, "
        "on @user_script:1.",
        "ERR ACL failure in script: User app has no permissions to run the 'time' command "
        "script: 8a2f, on @user_script:4."}},
      {{},
       {"ERR user_script:3: attempt to compare nil with number",
        "OOM command not allowed when used memory > 'maxmemory'.", "NOSCRIPT No matching script.",
        "NOAUTH Authentication required."}},
  };
  for (const group& g : groups) {
    for (const char* text : g.texts) {
      INFO(text);
      const auto ec = permission_error(text);
      if (g.expected) CHECK(ec == g.expected);
      else CHECK(!ec);
    }
  }
}

TEST_CASE("permissions: the script error mapper maps ACL refusals and THOONK codes",
          "[unit][acl]") {
  const char* texts[] = {
      "NOPERM this user has no permissions to run the 'evalsha' command",
      "NOPERM this user has no permissions to access one of the keys used as arguments",
      ("ERR The user executing the script can't publish to the channel mentioned in the command "
       "script: 95eb, on @user_script:1."),
      "NOPERM this user has no permissions to run the 'hset' command",
  };
  for (const char* t : texts) {
    INFO(t);
    CHECK(thoonk::detail::reply_error(error_reply(t)) == thoonk::detail::permission_error(t));
  }
  // The scripts' one convention: THOONK <code> <message> (src/lua/includes/errors.lua).
  CHECK(thoonk::detail::reply_error(error_reply("THOONK feed_not_found no such feed")) ==
        thoonk::error::feed_not_found);
  CHECK(thoonk::detail::reply_error(error_reply("ERR THOONK lost_claim")) ==
        thoonk::error::lost_claim);
  CHECK(thoonk::detail::reply_error(error_reply("THOONK id_not_found no such item")) ==
        thoonk::error::id_not_found);
  CHECK(thoonk::detail::reply_error(
            error_reply("THOONK no_channel_permission the user may not PUBLISH on feed.wake:q")) ==
        thoonk::error::no_channel_permission);
  CHECK(thoonk::detail::reply_error(error_reply("ERR user_script:1: boom")) ==
        thoonk::error::script_error);
  CHECK(thoonk::detail::reply_error(error_reply("OOM command not allowed")) ==
        thoonk::error::server_error);
}
