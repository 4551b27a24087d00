// The library's scripts as Redis functions, without I/O: every embedded
// script's library form, its name, and what the runner does after the
// FCALL and FUNCTION LOAD replies (src/scripts/script_functions.hpp).
#include "scripts/script_functions.hpp"
#include "scripts/script_exec.hpp"
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
    // name, then makes the functions. The cold values are assigned by
    // bind_cold, which runs in a call (the first cold call of each call).
    auto top = lib->text.substr(0, lib->text.find("redis.register_function"));
    CHECK(top.starts_with("#!lua name=" + lib->name + "\nlocal KEYS, ARGV"));
    const auto call = lib->text.substr(top.size());
    if (const auto bind = top.find("local function bind_cold() "); bind != std::string::npos) {
      const auto bind_end = top.find(" end cold = {", bind);
      REQUIRE(bind_end != std::string::npos);
      top.erase(bind, bind_end - bind);
      CHECK(call.find("cold_bound = false ") != std::string::npos);
    }
    CHECK(top.find(" = KEYS[") == std::string::npos);
    // Nothing is built per call for the cold branches: no table, no closure.
    CHECK(call.find("setmetatable") == std::string::npos);
    if (e.file_text.find("cold.") != std::string_view::npos)
      CHECK(top.find(" cold = {") != std::string::npos);

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

namespace {

// One library of a FUNCTION LIST reply as RESP3 sends it (a map) or RESP2
// (a flat array); its one function has the library's name.
thoonk::resp3::value listed_library(const std::string& name, thoonk::resp3::type t) {
  return aggregate_reply(
      t, {simple_reply("library_name"), string_reply(name), simple_reply("engine"),
          string_reply("LUA"), simple_reply("functions"),
          array_reply({aggregate_reply(
              t, {simple_reply("name"), string_reply(name), simple_reply("description"),
                  aggregate_reply(thoonk::resp3::type::null), simple_reply("flags"),
                  aggregate_reply(thoonk::resp3::type::set)})})});
}

const std::string stale_name = "thoonk_" + std::string(40, 'a');

}  // namespace

TEST_CASE("script functions: this build's libraries, both forms", "[unit][scripts]") {
  const auto& names = thoonk::detail::this_build_libraries();
  for (const auto& e : scripts::all_scripts()) {
    INFO(e.file);
    CHECK(names.contains(function_library_of(e.get())->name));
    CHECK(names.contains(function_library_of(thoonk::detail::sharded_variant(e.get()))->name));
  }
  for (const auto& n : names) CHECK(thoonk::detail::is_library_name(n));
  CHECK_FALSE(names.contains(stale_name));
}

TEST_CASE("script functions: which names are the library's", "[unit][scripts]") {
  using thoonk::detail::is_library_name;
  CHECK(is_library_name(stale_name));
  CHECK(is_library_name("thoonk_0123456789abcdef0123456789abcdef01234567"));
  CHECK_FALSE(is_library_name("thoonk_0123456789ABCDEF0123456789abcdef01234567"));  // upper case
  CHECK_FALSE(is_library_name("thoonk_" + std::string(39, 'a')));
  CHECK_FALSE(is_library_name("thoonk_" + std::string(41, 'a')));
  CHECK_FALSE(is_library_name("thoonk_" + std::string(39, 'a') + "g"));
  CHECK_FALSE(is_library_name("Thoonk_" + std::string(40, 'a')));
  CHECK_FALSE(is_library_name("myapp_" + std::string(41, 'a')));
  CHECK_FALSE(is_library_name("thoonk_"));
  CHECK_FALSE(is_library_name(""));
}

TEST_CASE("script functions: stale libraries in a FUNCTION LIST reply", "[unit][scripts]") {
  using thoonk::detail::stale_libraries;
  const auto& keep = thoonk::detail::this_build_libraries();
  const std::string current = *keep.begin();
  const std::string other_stale = "thoonk_" + std::string(40, '7');
  for (auto t : {thoonk::resp3::type::map, thoonk::resp3::type::array}) {
    INFO(thoonk::resp3::to_string(t));
    auto reply = array_reply({listed_library(stale_name, t), listed_library(current, t),
                              listed_library("thoonk_app_helpers", t), listed_library("orders", t),
                              listed_library(other_stale, t)});
    boost::system::error_code ec = thoonk::error::server_error;
    CHECK(stale_libraries(reply, keep, ec) == std::vector<std::string>{stale_name, other_stale});
    CHECK_FALSE(ec);
  }
  boost::system::error_code ec;
  CHECK(stale_libraries(array_reply({}), keep, ec).empty());
  CHECK_FALSE(ec);
}

TEST_CASE("script functions: a FUNCTION LIST reply of another shape", "[unit][scripts]") {
  using thoonk::detail::stale_libraries;
  using thoonk::resp3::type;
  const auto& keep = thoonk::detail::this_build_libraries();
  const std::vector<thoonk::resp3::value> bad = {
      string_reply("OK"),                                                         // not an array
      array_reply({string_reply(stale_name)}),                                    // names, not maps
      array_reply({aggregate_reply(type::map, {simple_reply("library_name")})}),  // odd length
      array_reply({aggregate_reply(type::map, {simple_reply("engine"), string_reply("LUA")})}),
      array_reply({aggregate_reply(type::map, {simple_reply("library_name"), number_reply(7)})}),
      // A good entry does not save a bad one after it: nothing is named.
      array_reply({listed_library(stale_name, type::map), string_reply("x")}),
  };
  for (std::size_t i = 0; i < bad.size(); ++i) {
    INFO("case " << i);
    boost::system::error_code ec;
    CHECK(stale_libraries(bad[i], keep, ec).empty());
    CHECK(ec == thoonk::error::unexpected_type);
  }
}

TEST_CASE("script functions: the FUNCTION DELETE replies counted", "[unit][scripts]") {
  using thoonk::detail::count_deleted;
  const std::string noperm =
      "NOPERM User ops has no permissions to run the 'function|delete' command";
  thoonk::detail::op_status st = thoonk::error::server_error;
  std::vector<thoonk::resp3::value> all_ok{simple_reply("OK"), simple_reply("OK")};
  CHECK(count_deleted(all_ok, st) == 2);
  CHECK_FALSE(st);

  // Another client deleted one first: neither counted nor an error.
  std::vector<thoonk::resp3::value> raced{error_reply("ERR Library not found"), simple_reply("OK")};
  CHECK(count_deleted(raced, st) == 1);
  CHECK_FALSE(st);

  // The first error is the status (an ACL refusal: no_permission, with the
  // server's text); the libraries deleted around it still count.
  std::vector<thoonk::resp3::value> refused{simple_reply("OK"), error_reply(noperm),
                                            error_reply("ERR something else"), simple_reply("OK")};
  CHECK(count_deleted(refused, st) == 2);
  CHECK(st == thoonk::error::no_permission);
  CHECK(st.server_message == noperm);

  std::vector<thoonk::resp3::value> other{error_reply("ERR something else")};
  CHECK(count_deleted(other, st) == 0);
  CHECK(st == thoonk::error::server_error);
}

TEST_CASE("script functions: FUNCTION LIST refused, or unknown before Redis 7", "[unit][scripts]") {
  using thoonk::detail::function_reply_status;
  using thoonk::detail::functions_unknown;
  CHECK(functions_unknown(
      error_reply("ERR unknown command `FUNCTION`, with args beginning with: `LIST`, ")));
  CHECK(
      functions_unknown(error_reply("ERR unknown command 'FUNCTION', with args beginning with: ")));
  CHECK_FALSE(functions_unknown(array_reply({})));
  CHECK_FALSE(
      functions_unknown(error_reply("NOPERM User ops has no permissions to run the "
                                    "'function|list' command")));
  // reply_status calls a FUNCTION refusal a script permission; here it is
  // a command the operation needs.
  auto st = function_reply_status(
      error_reply("NOPERM User ops has no permissions to run the 'function|list' command"));
  CHECK(st == thoonk::error::no_permission);
  CHECK_FALSE(function_reply_status(array_reply({})));
  CHECK(function_reply_status(error_reply("LOADING Redis is loading the dataset in memory")) ==
        thoonk::error::server_error);
}

TEST_CASE("script functions: one FUNCTION LOAD per node and library at a time", "[unit][scripts]") {
  thoonk::detail::load_flights<int> f;
  const std::string a = "127.0.0.1:7000\nthoonk_lib", b = "127.0.0.1:7001\nthoonk_lib";
  REQUIRE(f.lead(a));  // the first call loads
  CHECK(f.in_flight(a));
  CHECK_FALSE(f.lead(a));  // the next ones wait for it
  f.join(a, 1);
  CHECK_FALSE(f.lead(a));
  f.join(a, 2);
  CHECK(f.lead(b));  // another node: a flight of its own
  CHECK(f.waiting(a) == 2);

  SECTION("the leader ends: every waiter is woken and goes on") {
    auto woken = f.finish(a);
    CHECK(woken == std::vector<int>{1, 2});
    CHECK_FALSE(f.in_flight(a));
    CHECK(f.resumed(a, 1));
    CHECK(f.resumed(a, 2));
    // A later call finding no function (a FUNCTION FLUSH) leads again.
    CHECK(f.lead(a));
    CHECK(f.resumed(a, 3));  // not of this flight: woken before it began
  }
  SECTION("a waiter cancelled leaves its flight") {
    CHECK_FALSE(f.resumed(a, 1));
    CHECK(f.waiting(a) == 1);
    CHECK(f.finish(a) == std::vector<int>{2});
  }
  CHECK(f.finish(b).empty());
  CHECK(f.finish("nothing").empty());
}
