// The Lua embedding step without I/O (scripts/lua_embed/lua_embed.hpp):
// includes resolved transitively, each once, in dependency order; only
// what a script uses embedded; key tables made into names; and each tree
// it cannot embed refused with a message naming the file and line.
#include "lua_embed.hpp"

#include <catch2/catch.hpp>

#include <map>
#include <string>

namespace {

using thoonk::lua_embed::embed;
using thoonk::lua_embed::embed_error;
using files_t = std::map<std::string, std::string>;

// A tree with one layout (`job`) and the include every layout needs.
files_t embed_base() {
  return {
      {"layouts/job.lua",
       "-- Layout job.\n--- @include \"includes/acl\"\nlocal K_IDS = KEYS[1]\nlocal LIMIT = 10\n"},
      {"includes/acl.lua", "-- The check.\nlocal function check_commands(...) return nil end\n"},
  };
}

// The message of the embed_error `files` raises ("" when none).
std::string embed_refusal(const files_t& files) {
  try {
    embed(files, "src/lua/");
  } catch (const embed_error& e) {
    return e.what();
  }
  return "";
}

// The script form of `name` in the generated source.
std::string embedded_source(const files_t& files, const std::string& ident) {
  const auto cpp = embed(files).at("thoonk_lua_scripts.cpp");
  const auto open = "constexpr char source_" + ident + "[] = R\"thoonk_lua(";
  const auto at = cpp.find(open);
  REQUIRE(at != std::string::npos);
  const auto from = at + open.size();
  return cpp.substr(from, cpp.find(")thoonk_lua\"", from) - from);
}

std::size_t occurrences(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (auto at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("lua_embed: includes come transitively, once each, after what they include",
          "[unit][lua_embed]") {
  auto files = embed_base();
  files["includes/base.lua"] = "-- Base.\nlocal function base(n) return n + LIMIT end\n";
  files["includes/twice.lua"] =
      "-- Twice.\n--- @include \"includes/base\"\nlocal function twice(n) return 2 * base(n) end\n";
  files["includes/spare.lua"] = "-- Never used.\nlocal function spare() return 0 end\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: 1 n\n--- @include \"includes/twice\"\n--- "
      "@include "
      "\"includes/base\"\n--- @include \"includes/spare\"\nreturn twice(base(tonumber(ARGV[1])))\n";
  const auto src = embedded_source(files, "jobs_probe");
  CHECK(occurrences(src, "local function base(") == 1);
  CHECK(occurrences(src, "local function twice(") == 1);
  CHECK(src.find("local LIMIT = 10") < src.find("local function base("));
  CHECK(src.find("local function base(") < src.find("local function twice("));
  // Included but unused: left out (every function costs a closure per call).
  CHECK(src.find("local function spare") == std::string::npos);
  CHECK(src.find("K_IDS") == std::string::npos);
  // The definitions sit on the first line, the file's lines follow as they are.
  CHECK(src.ends_with(files["jobs/probe.lua"]));
  CHECK(occurrences(src, "\n") == occurrences(files["jobs/probe.lua"], "\n"));
  CHECK(src.find("check_commands() if refused") != std::string::npos);
}

TEST_CASE("lua_embed: the commands a script and its definitions run are checked first",
          "[unit][lua_embed]") {
  auto files = embed_base();
  files["includes/read.lua"] = "-- Read.\nlocal function read(k) return redis.call('GET', k) end\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/read\"\n"
      "-- redis.call('DEL', x) in a comment runs nothing\nredis.call('SET', K_IDS, read(K_IDS))\n"
      "redis.call('PUBLISH', 'c', 'm')\n";
  const auto src = embedded_source(files, "jobs_probe");
  CHECK(src.find("check_commands('get', 'set') if refused") != std::string::npos);
}

TEST_CASE("lua_embed: cold definitions are made on the first cold call", "[unit][lua_embed]") {
  auto files = embed_base();
  files["includes/rare.lua"] = "-- Rare.\nlocal function rare(n) return n + LIMIT end\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/rare\"\nreturn "
      "cold.rare(1)\n";
  const auto src = embedded_source(files, "jobs_probe");
  CHECK(src.starts_with("local cold local function check_commands"));
  CHECK(src.find(
            "__index = function(t, k) local LIMIT = 10 local function rare(n) return n + LIMIT end "
            "t.rare = rare return rawget(t, k) end") != std::string::npos);
  const auto cpp = embed(files).at("thoonk_lua_scripts.cpp");
  CHECK(cpp.find("local function bind_cold() cold_bound = true LIMIT = 10 end cold = {rare = "
                 "function(...) if "
                 "not cold_bound then bind_cold() end return rare(...) end, } end") !=
        std::string::npos);
}

TEST_CASE("lua_embed: a key table makes the layout's key names and the C++ list",
          "[unit][lua_embed]") {
  auto files = embed_base();
  files["layouts/job.keys"] = "# The keys.\nconfig K_CONFIG\nscheduled_items K_SCHED_ITEMS\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn {K_SCHED_ITEMS, K_COUNT}\n";
  const auto src = embedded_source(files, "jobs_probe");
  CHECK(src.find("local K_SCHED_ITEMS = KEYS[2] local K_COUNT = 2 ") != std::string::npos);
  CHECK(src.find("K_CONFIG") == std::string::npos);
  const auto hpp = embed(files).at("thoonk_lua_layouts.hpp");
  CHECK(hpp.find("#define THOONK_LAYOUT_JOB_KEYS(X) X(config) X(scheduled_items)\n") !=
        std::string::npos);
  CHECK(hpp.find(
            "inline constexpr std::string_view job_keys[] = {\"config\", \"scheduled_items\"};") !=
        std::string::npos);

  files["layouts/job.keys"] = "config K_CONFIG\nscheduled items\n";
  CHECK(embed_refusal(files).starts_with("src/lua/layouts/job.keys:2: a row must read"));
}

TEST_CASE("lua_embed: an include that names no file is refused", "[unit][lua_embed]") {
  auto files = embed_base();
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/nowhere\"\n";
  CHECK(embed_refusal(files) ==
        "src/lua/jobs/probe.lua:4: includes `includes/nowhere`, but there is no "
        "src/lua/includes/nowhere.lua");
}

TEST_CASE("lua_embed: an include cycle is refused", "[unit][lua_embed]") {
  auto files = embed_base();
  files["includes/a.lua"] =
      "-- A.\n--- @include \"includes/b\"\nlocal function a() return b() end\n";
  files["includes/b.lua"] =
      "-- B.\n\n--- @include \"includes/a\"\nlocal function b() return a() end\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/a\"\n";
  CHECK(embed_refusal(files) ==
        "src/lua/includes/b.lua:3: an include cycle: includes/a.lua -> includes/b.lua -> "
        "includes/a.lua; move "
        "what both need into an include of its own");
  // Including itself is a cycle too.
  files["includes/a.lua"] = "-- A.\n--- @include \"includes/a\"\nlocal function a() return 1 end\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/includes/a.lua:2: an include cycle: includes/a.lua -> "
      "includes/a.lua"));
}

TEST_CASE("lua_embed: a name defined twice is refused", "[unit][lua_embed]") {
  auto files = embed_base();
  files["includes/a.lua"] = "-- A.\nlocal function half(n) return n / 2 end\n";
  files["includes/b.lua"] = "-- B.\n\nlocal HALF, half = 0.5, 0\n";
  files["jobs/probe.lua"] = "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn 1\n";
  CHECK(embed_refusal(files) ==
        "src/lua/includes/b.lua:3: `half` is defined twice: also at src/lua/includes/a.lua:2; a "
        "name has one "
        "definition");
  // An include may not redefine a name of the layout either.
  files.erase("includes/b.lua");
  files["includes/a.lua"] = "-- A.\nlocal LIMIT = 5\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/a\"\n";
  CHECK(embed_refusal(files) ==
        "src/lua/includes/a.lua:2: `LIMIT` is defined twice for jobs/probe.lua: also at "
        "src/lua/layouts/job.lua:4");
}

TEST_CASE("lua_embed: a KEYS header that does not match the layout is refused",
          "[unit][lua_embed]") {
  auto files = embed_base();
  files["layouts/lock.lua"] =
      "-- Layout lock.\n--- @include \"includes/acl\"\nlocal K_LOCK = KEYS[1]\n";
  // The script's own code uses a key of another layout.
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn redis.call('GET', K_LOCK)\n";
  CHECK(embed_refusal(files) ==
        "src/lua/jobs/probe.lua:4: `K_LOCK` is no name of layout job, which the KEYS header of "
        "jobs/probe.lua "
        "(line 2) names; layout lock defines it: fix the KEYS line or the key");
  // An include it uses does.
  files["includes/unlock.lua"] =
      "-- Unlock.\nlocal function unlock() return redis.call('DEL', K_LOCK) end\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/unlock\"\nreturn "
      "unlock()\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/includes/unlock.lua:2: `K_LOCK` is no name of layout job"));
  // The KEYS line names a key the layout does not have.
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job: K_IDS, K_LOCK\n-- ARGV: none\nreturn 1\n";
  CHECK(embed_refusal(files) ==
        "src/lua/jobs/probe.lua:2: the KEYS header names `K_LOCK`, which is no name of layout job "
        "(src/lua/layouts/job.lua)");
  files["jobs/probe.lua"] = "-- A probe.\n-- KEYS: layout job: K_IDS\n-- ARGV: none\nreturn 1\n";
  CHECK(embed_refusal(files).empty());
  // A layout that does not exist.
  files["jobs/probe.lua"] = "-- A probe.\n-- KEYS: layout nowhere\n-- ARGV: none\nreturn 1\n";
  CHECK(embed_refusal(files) ==
        "src/lua/jobs/probe.lua:2: layout `nowhere` has no file src/lua/layouts/nowhere.lua");
}

TEST_CASE("lua_embed: a script without its KEYS and ARGV header is refused", "[unit][lua_embed]") {
  auto files = embed_base();
  files["jobs/probe.lua"] = "-- A probe.\n-- ARGV: none\nreturn 1\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/jobs/probe.lua:1: no `-- KEYS: layout <kind>` line"));
  files["jobs/probe.lua"] = "-- A probe.\n-- KEYS: layout job\nreturn 1\n";
  CHECK(embed_refusal(files).starts_with("src/lua/jobs/probe.lua:1: no `-- ARGV` line"));
  files["jobs/probe.lua"] = "return 1\n-- KEYS: layout job\n-- ARGV: none\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/jobs/probe.lua:1: the first line must be a comment"));
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn 1\n--- @include \"includes/acl\"\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/jobs/probe.lua:5: an include below the script's code"));
}

TEST_CASE("lua_embed: a name used from a file that is not included is refused",
          "[unit][lua_embed]") {
  auto files = embed_base();
  files["includes/base.lua"] = "-- Base.\nlocal function base(n) return n end\n";
  files["includes/twice.lua"] = "-- Twice.\nlocal function twice(n)\n  return 2 * base(n)\nend\n";
  files["jobs/probe.lua"] = "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn 1\n";
  CHECK(embed_refusal(files) ==
        "src/lua/includes/twice.lua:3: uses `base`, defined at src/lua/includes/base.lua:2, which "
        "includes/twice.lua does not include: add `--- @include \"includes/base\"` to its header");
  files["includes/twice.lua"] =
      "-- Twice.\n--- @include \"includes/base\"\nlocal function twice(n) return 2 * base(n) end\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nlocal n = 1\nreturn base(n)\n";
  CHECK(embed_refusal(files).starts_with("src/lua/jobs/probe.lua:5: uses `base`, defined at"));
  // What an include reaches, the script reaches: it comes first.
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/twice\"\nreturn "
      "base(1)\n";
  CHECK(embed_refusal(files).empty());
  // A local of the script's own that shares the name is no use of it.
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\n--- @include \"includes/twice\"\nlocal "
      "base = 1\n"
      "return twice(base)\n";
  CHECK(embed_refusal(files).empty());
}

TEST_CASE("lua_embed: header code that cannot be joined onto one line is refused",
          "[unit][lua_embed]") {
  auto files = embed_base();
  files["jobs/probe.lua"] = "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn 1\n";
  files["includes/a.lua"] = "-- A.\nlocal X = 1 -- one\n";
  CHECK(embed_refusal(files).starts_with("src/lua/includes/a.lua:2: a comment after code"));
  files["includes/a.lua"] = "-- A.\nlocal X = [[one]]\n";
  CHECK(embed_refusal(files).starts_with("src/lua/includes/a.lua:2: a long string"));
  files["includes/a.lua"] = "-- A.\nX = 1\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/includes/a.lua:2: a top-level line that is no `local`"));
  files["includes/a.lua"] = "-- A.\n--- @inclde \"includes/b\"\nlocal X = 1\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/includes/a.lua:2: a `--- @` line the build does not know"));
  files["includes/a.lua"] = "-- A.\nlocal X = 1\n";
  files["jobs/probe.lua"] =
      "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn ')thoonk_lua\"'\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/jobs/probe.lua: contains the raw string delimiter"));
}

TEST_CASE("lua_embed: the check_commands the build calls must reach every script",
          "[unit][lua_embed]") {
  auto files = embed_base();
  files["layouts/job.lua"] = "-- Layout job, without the check.\nlocal K_IDS = KEYS[1]\n";
  files["jobs/probe.lua"] = "-- A probe.\n-- KEYS: layout job\n-- ARGV: none\nreturn 1\n";
  CHECK(embed_refusal(files).starts_with(
      "src/lua/jobs/probe.lua:2: no definition of check_commands reaches"));
}
