// The library's scripts as Redis functions, without I/O: every embedded
// script's library form, its name, and what the runner does after the
// FCALL and FUNCTION LOAD replies (src/detail/script_functions.hpp).
#include "detail/script_functions.hpp"
#include "detail/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

#include <thoonk/config.hpp>
#include <thoonk/error.hpp>

#include <catch2/catch.hpp>

#include "support/resp3_values.hpp"

#include <algorithm>
#include <set>
#include <string>

using thoonk::detail::after_fcall;
using thoonk::detail::after_function_load;
using thoonk::detail::fcall_step;
using thoonk::detail::function_library_of;
using namespace thoonk::test;
namespace scripts = thoonk::detail::scripts;

namespace {

const std::string fn_not_found = "ERR Function not found";
const std::string fn_oom = "OOM command not allowed when used memory > 'maxmemory'.";

}  // namespace

TEST_CASE("script functions: every embedded script has a library form, line for line",
          "[unit][scripts]") {
  std::set<std::string> names;
  for (const auto& e : scripts::all_scripts()) {
    INFO(e.file);
    const auto* lib = function_library_of(e.get());
    REQUIRE(lib != nullptr);
    CHECK(function_library_of(e.get()) == lib);  // made once
    CHECK(lib->name.starts_with("thoonk_"));
    CHECK(lib->name.size() == 7 + 40);
    CHECK(names.insert(lib->name).second);
    CHECK(lib->text.starts_with("#!lua name=" + lib->name + "\n"));
    CHECK(lib->text.find("redis.register_function('" + lib->name + "', function(keys, args) ") !=
          std::string::npos);
    CHECK(lib->text.find("@FN@") == std::string::npos);
    // Line N of the library is line N of the file for every N > 1: the
    // file's lines after its first, then the closing line.
    const auto rest = e.file_text.substr(e.file_text.find('\n') + 1);
    CHECK(lib->text.ends_with(std::string(rest) + "\nend)"));
    CHECK(std::count(lib->text.begin(), lib->text.end(), '\n') ==
          std::count(e.file_text.begin(), e.file_text.end(), '\n') + 1);
    // No value of a header is made at load: the top level declares every
    // name, then makes the functions.
    const auto top = lib->text.substr(0, lib->text.find("redis.register_function"));
    CHECK(top.starts_with("#!lua name=" + lib->name + "\nlocal KEYS, ARGV"));
    CHECK(top.find(" = KEYS[") == std::string::npos);

    // The sharded variant has its own library, reading 'spublish', exactly
    // when the EVALSHA form differs.
    const auto sharded = thoonk::detail::sharded_variant(e.get());
    const auto* slib = function_library_of(sharded);
    REQUIRE(slib != nullptr);
    if (sharded.sha1() == e.get().sha1()) {
      CHECK(slib == lib);
    } else {
      CHECK(slib->name != lib->name);
      CHECK(slib->text.find("NOTIFY = 'spublish'") != std::string::npos);
      CHECK(slib->text.find("NOTIFY = 'publish'") == std::string::npos);
      CHECK(lib->text.find("NOTIFY = 'publish'") != std::string::npos);
    }
  }
}

TEST_CASE("script functions: an application's script has no library form", "[unit][scripts]") {
  CHECK(function_library_of(thoonk::script("return 1")) == nullptr);
  // Not even one that reads like a sharded library script.
  CHECK(function_library_of(thoonk::script("local NOTIFY = 'spublish' return 1")) == nullptr);
}

TEST_CASE("script functions: the name follows the text", "[unit][scripts]") {
  const auto a = thoonk::detail::make_function_library("#!lua name=@FN@\nreturn 1", false);
  const auto b = thoonk::detail::make_function_library("#!lua name=@FN@\nreturn 2", false);
  CHECK(a.name != b.name);
  CHECK(a.name == thoonk::detail::make_function_library("#!lua name=@FN@\nreturn 1", false).name);
  CHECK(a.text == "#!lua name=" + a.name + "\nreturn 1");
}

TEST_CASE("script functions: after FCALL", "[unit][scripts]") {
  CHECK(after_fcall(string_reply("ok")) == fcall_step::done);
  CHECK(after_fcall(number_reply(3)) == fcall_step::done);
  // The script's own errors are its reply.
  CHECK(after_fcall(error_reply("ERR user_function:3: boom")) == fcall_step::done);
  CHECK(after_fcall(error_reply("ERR THOONK lost_claim gone")) == fcall_step::done);
  CHECK(after_fcall(error_reply("WRONGTYPE Operation against a key holding the wrong kind of "
                                "value script: thoonk_x, on @user_function:9.")) ==
        fcall_step::done);
  // A key the ACL refuses is refused to EVALSHA alike.
  CHECK(after_fcall(error_reply("NOPERM this user has no permissions to access one of the keys "
                                "used as arguments")) == fcall_step::done);

  CHECK(after_fcall(error_reply(fn_not_found)) == fcall_step::load);

  // Functions cannot work here.
  CHECK(after_fcall(error_reply(
            "ERR unknown command 'fcall', with args beginning with: 'thoonk_x' '1' ")) ==
        fcall_step::use_eval_for_good);
  CHECK(after_fcall(error_reply(
            "ERR unknown command `FCALL`, with args beginning with: `thoonk_x`, `1`, ")) ==
        fcall_step::use_eval_for_good);
  CHECK(
      after_fcall(error_reply("NOPERM this user has no permissions to run the 'fcall' command")) ==
      fcall_step::use_eval_for_good);
  // Some other unknown command is no reason.
  CHECK(after_fcall(error_reply("ERR unknown command 'foo', with args beginning with: "
                                "'fcall'")) == fcall_step::done);

  // Refused for the server's state, where EVALSHA would run until a write.
  CHECK(after_fcall(error_reply(fn_oom)) == fcall_step::use_eval);
  CHECK(after_fcall(error_reply("READONLY You can't write against a read only replica.")) ==
        fcall_step::use_eval);
  CHECK(after_fcall(error_reply("MISCONF Redis is configured to save RDB snapshots")) ==
        fcall_step::use_eval);
  CHECK(after_fcall(error_reply("NOREPLICAS Not enough good replicas to write.")) ==
        fcall_step::use_eval);
  CHECK(after_fcall(error_reply("OOMPH")) == fcall_step::done);
}

TEST_CASE("script functions: after FUNCTION LOAD and FCALL", "[unit][scripts]") {
  // Loaded: the FCALL's reply, as after FCALL alone.
  CHECK(after_function_load(string_reply("thoonk_x"), string_reply("ok")) == fcall_step::done);
  CHECK(after_function_load(string_reply("thoonk_x"), error_reply("ERR user_function:2: x")) ==
        fcall_step::done);
  CHECK(after_function_load(string_reply("thoonk_x"), error_reply(fn_oom)) == fcall_step::use_eval);
  // Another client loaded it first: the load fails, the call ran.
  CHECK(after_function_load(error_reply("ERR Library 'thoonk_x' already exists"),
                            string_reply("ok")) == fcall_step::done);
  // Loaded, yet not found: the slot moved between the two; load again.
  CHECK(after_function_load(string_reply("thoonk_x"), error_reply(fn_not_found)) ==
        fcall_step::load);
  // Not loaded and not found.
  CHECK(after_function_load(
            error_reply("NOPERM this user has no permissions to run the 'function|load' command"),
            error_reply(fn_not_found)) == fcall_step::use_eval_for_good);
  CHECK(after_function_load(
            error_reply("ERR Error compiling function: user_function:2: unexpected symbol"),
            error_reply(fn_not_found)) == fcall_step::use_eval_for_good);
  CHECK(after_function_load(error_reply(fn_oom), error_reply(fn_not_found)) ==
        fcall_step::use_eval);
}

TEST_CASE("script functions: the URL option", "[unit][scripts][config]") {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url("redis://h:1", ec);
  REQUIRE_FALSE(ec);
  CHECK(cfg.use_functions);  // the default
  cfg = thoonk::config::from_url("redis://h:1?functions=no&db=2", ec);
  REQUIRE_FALSE(ec);
  CHECK_FALSE(cfg.use_functions);
  CHECK(cfg.database == 2);
  cfg = thoonk::config::from_url("redis://h:1?functions=yes", ec, cfg);
  REQUIRE_FALSE(ec);
  CHECK(cfg.use_functions);
  thoonk::config::from_url("redis://h:1?functions=sometimes", ec);
  CHECK(ec == thoonk::error::invalid_url);
}
