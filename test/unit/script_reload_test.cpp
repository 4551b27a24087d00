// What the script runner does after NOSCRIPT, without I/O: the replies to
// its `SCRIPT LOAD` + `EVALSHA` retry decide whether the EVALSHA's reply
// stands, the load's error does, or the source is sent with EVAL; and a
// user refused both ways gets one error naming both.
#include "detail/script_exec.hpp"

#include <thoonk/error.hpp>

#include <catch2/catch.hpp>

#include <string>

using thoonk::detail::after_eval;
using thoonk::detail::after_reload;
using thoonk::detail::reload_step;
namespace resp3 = thoonk::resp3;

namespace {

resp3::value err(std::string text) {
  resp3::value v;
  v.type = resp3::type::simple_error;
  v.str = std::move(text);
  return v;
}

resp3::value str(std::string text) {
  resp3::value v;
  v.type = resp3::type::blob_string;
  v.str = std::move(text);
  return v;
}

const std::string noscript = "NOSCRIPT No matching script. Please use EVAL.";
const std::string no_load = "NOPERM this user has no permissions to run the 'script|load' command";
const std::string no_eval = "NOPERM this user has no permissions to run the 'eval' command";

}  // namespace

TEST_CASE("script reload: a loaded script's reply stands", "[unit][scripts]") {
  CHECK(after_reload(str("0123abcd"), str("result")) == reload_step::done);
  // A Lua error of the script is its reply, not a reason to send EVAL.
  CHECK(after_reload(str("0123abcd"), err("ERR user_script:3: boom")) == reload_step::done);
}

TEST_CASE("script reload: a load refused by the ACL falls back to EVAL, nothing having run",
          "[unit][scripts]") {
  CHECK(after_reload(err(no_load), err(noscript)) == reload_step::try_eval);
  // Someone else loaded it in between: the EVALSHA ran, its reply stands.
  CHECK(after_reload(err(no_load), str("result")) == reload_step::done);
}

TEST_CASE("script reload: a load that failed otherwise is the outcome", "[unit][scripts]") {
  CHECK(after_reload(err("OOM command not allowed when used memory > 'maxmemory'."),
                     err(noscript)) == reload_step::load_failed);
  CHECK(after_reload(err("ERR Error compiling script"), err(noscript)) == reload_step::load_failed);
}

TEST_CASE("script reload: EVAL's reply stands unless the ACL refused it too", "[unit][scripts]") {
  auto ok = after_eval(err(no_load), str("result"));
  CHECK(ok.str == "result");
  auto lua = after_eval(err(no_load), err("ERR user_script:1: boom"));
  CHECK(lua.str == "ERR user_script:1: boom");
  auto both = after_eval(err(no_load), err(no_eval));
  REQUIRE(both.is_error());
  INFO(both.str);
  CHECK(both.str.find("NOSCRIPT") != std::string::npos);
  CHECK(both.str.find("'script|load'") != std::string::npos);
  CHECK(both.str.find("'eval'") != std::string::npos);
  CHECK(thoonk::detail::reply_error(both) == thoonk::error::no_script_permission);
}
