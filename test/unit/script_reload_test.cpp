// What the script runner does after NOSCRIPT, without I/O: the replies to
// its `SCRIPT LOAD` + `EVALSHA` retry decide whether the EVALSHA's reply
// stands, the load's error does, or the source is sent with EVAL; and a
// user refused both ways gets one error naming both.
#include "scripts/script_exec.hpp"

#include <thoonk/error.hpp>

#include <catch2/catch.hpp>

#include "support/resp3_values.hpp"

#include <string>

using thoonk::detail::after_eval;
using thoonk::detail::after_reload;
using thoonk::detail::reload_step;
namespace resp3 = thoonk::resp3;
using namespace thoonk::test;

namespace {

const std::string noscript = "NOSCRIPT No matching script. Please use EVAL.";
const std::string no_load = "NOPERM this user has no permissions to run the 'script|load' command";
const std::string no_eval = "NOPERM this user has no permissions to run the 'eval' command";

}  // namespace

TEST_CASE("script reload: a loaded script's reply stands", "[unit][scripts]") {
  CHECK(after_reload(string_reply("0123abcd"), string_reply("result")) == reload_step::done);
  // A Lua error of the script is its reply, not a reason to send EVAL.
  CHECK(after_reload(string_reply("0123abcd"), error_reply("ERR user_script:3: boom")) ==
        reload_step::done);
}

TEST_CASE("script reload: a load refused by the ACL falls back to EVAL, nothing having run",
          "[unit][scripts]") {
  CHECK(after_reload(error_reply(no_load), error_reply(noscript)) == reload_step::try_eval);
  // Someone else loaded it in between: the EVALSHA ran, its reply stands.
  CHECK(after_reload(error_reply(no_load), string_reply("result")) == reload_step::done);
}

TEST_CASE("script reload: a load that failed otherwise is the outcome", "[unit][scripts]") {
  CHECK(after_reload(error_reply("OOM command not allowed when used memory > 'maxmemory'."),
                     error_reply(noscript)) == reload_step::load_failed);
  CHECK(after_reload(error_reply("ERR Error compiling script"), error_reply(noscript)) ==
        reload_step::load_failed);
}

TEST_CASE("script reload: EVAL's reply stands unless the ACL refused it too", "[unit][scripts]") {
  auto ok = after_eval(error_reply(no_load), string_reply("result"));
  CHECK(ok.str == "result");
  auto lua = after_eval(error_reply(no_load), error_reply("ERR user_script:1: boom"));
  CHECK(lua.str == "ERR user_script:1: boom");
  auto both = after_eval(error_reply(no_load), error_reply(no_eval));
  REQUIRE(both.is_error());
  INFO(both.str);
  CHECK(both.str.find("NOSCRIPT") != std::string::npos);
  CHECK(both.str.find("'script|load'") != std::string::npos);
  CHECK(both.str.find("'eval'") != std::string::npos);
  CHECK(thoonk::detail::reply_error(both) == thoonk::error::no_script_permission);
}

TEST_CASE("sharded_variant: notifications with SPUBLISH, other scripts unchanged",
          "[unit][script][cluster]") {
  using thoonk::detail::sharded_variant;
  const thoonk::script notifying(
      "local NOTIFY = 'publish' local function f() end redis.call(NOTIFY, KEYS[1], 'm')");
  const auto v = sharded_variant(notifying);
  CHECK(v.source() ==
        "local NOTIFY = 'spublish' local function f() end redis.call(NOTIFY, KEYS[1], 'm')");
  CHECK(v.sha1() != notifying.sha1());
  CHECK(sharded_variant(notifying).sha1() == v.sha1());  // made once, kept
  // Feed management keeps classic PUBLISH (no NOTIFY definition).
  const thoonk::script management("redis.call('PUBLISH', ARGV[1], ARGV[2])");
  CHECK(sharded_variant(management).sha1() == management.sha1());
}
