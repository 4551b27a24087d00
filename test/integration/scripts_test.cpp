// The library's Lua scripts (src/lua, embedded at build time by
// scripts/lua_embed; docs/architecture.md "Scripts"): every one loads on
// a real server (a syntax error fails here, not in a user's call), and a
// server error raised on a known line of a .lua file reports that line.
#include "detail/client_core.hpp"
#include "support/helpers.hpp"

#include "detail/keys.hpp"
#include "feeds/common.hpp"
#include "jobs/job_keys.hpp"
#include "scripts/script_exec.hpp"
#include "scripts/script_functions.hpp"
#include "thoonk_lua_scripts.hpp"

#include <algorithm>
#include <regex>
#include <set>

using namespace thoonk::test;
namespace scripts = thoonk::detail::scripts;

namespace {

// The 1-based line of `file_text` holding `needle` (0 when absent).
std::size_t line_of(std::string_view file_text, std::string_view needle) {
  auto at = file_text.find(needle);
  if (at == std::string_view::npos) return 0;
  return 1 + static_cast<std::size_t>(std::count(file_text.begin(), file_text.begin() + at, '\n'));
}

// The line number in `user_script:N` (EVALSHA) or `user_function:N` (FCALL)
// of a server error text (0 when absent).
std::size_t reported_line(const std::string& text) {
  std::smatch m;
  if (!std::regex_search(text, m, std::regex("user_(?:script|function):([0-9]+)"))) return 0;
  return std::stoul(m[1].str());
}

const scripts::embedded_script& find_script(std::string_view file) {
  for (const auto& s : scripts::all_scripts())
    if (s.file == file) return s;
  FAIL("no embedded script " << file);
  throw std::logic_error("unreachable");
}

// Runs the script of `file` on f.name, made a feed of `type` first, with
// `keys` and `args` that make it fail on the line holding `marker`, and
// checks that the server's error reports that line of the file.
asio::awaitable<void> expect_error_line(fixture& f, std::string type, std::string_view file,
                                        std::string_view marker, std::vector<std::string> keys,
                                        std::vector<std::string> args) {
  co_await create_feed(f.c.conn(), f.name, std::move(type));
  const auto& s = find_script(file);
  auto want = line_of(s.file_text, marker);
  REQUIRE(want > 1);
  auto [ec, v] = co_await thoonk::detail::run_script(thoonk::detail::core_of(f.c), s.get(),
                                                     std::move(keys), std::move(args));
  INFO(v.str);
  CHECK(ec == thoonk::error::script_error);
  CHECK(reported_line(v.str) == want);
  // Run the way the client is configured: as a function or with EVALSHA.
  CHECK(v.str.find(f.c.get_config().use_functions ? "user_function:" : "user_script:") !=
        std::string::npos);
}

}  // namespace

TEST_CASE("scripts: every embedded script has its layout and loads on the server", "[scripts]") {
  auto all = scripts::all_scripts();
  REQUIRE(all.size() >= 31);
  std::set<std::string> seen;
  for (const auto& s : all) {
    INFO(s.file);
    CHECK(seen.insert(std::string(s.file)).second);
    // The header names the layout (scripts/lua_embed refuses a script without).
    CHECK(s.file_text.find("\n-- KEYS: layout " + std::string(s.layout)) != std::string_view::npos);
    const auto& src = s.get().source();
    // The included definitions and the layout header sit on the first line: the script
    // the server runs has exactly the file's lines, the file's text last.
    CHECK(src.ends_with(s.file_text));
    CHECK(std::count(src.begin(), src.end(), '\n') ==
          std::count(s.file_text.begin(), s.file_text.end(), '\n'));
    // Keys are named at the top by the layout, not indexed in the body
    // (finish.lua's result keys, KEYS[k] with k from ARGV, excepted).
    CHECK(!std::regex_search(std::string(s.file_text), std::regex("KEYS\\[[0-9]")));
    // The same object each time: built, and its SHA1 computed, once.
    CHECK(&s.get() == &s.get());
  }

  fixture f("scripts");
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    co_await f.c.async_connect(asio::use_awaitable);
    for (const auto& s : all) {
      INFO(s.file);
      auto v = co_await cmd(f.c.conn(), "SCRIPT", "LOAD", s.get().source());
      INFO(v.str);
      CHECK(!v.is_error());
      CHECK(v.str == s.get().sha1());
      // And as a function library (config::use_functions), in both forms:
      // a function with more than 60 upvalues, say, fails here.
      for (const auto& variant : {s.get(), thoonk::detail::sharded_variant(s.get())}) {
        const auto* lib = thoonk::detail::function_library_of(variant);
        REQUIRE(lib != nullptr);
        co_await cmd(f.c.conn(), "FUNCTION", "DELETE", lib->name);  // may not exist
        auto l = co_await cmd(f.c.conn(), "FUNCTION", "LOAD", lib->text);
        INFO(l.str);
        CHECK(!l.is_error());
        CHECK(l.str == lib->name);
      }
    }
  });
}

namespace {
thoonk::config scripts_eval_config() {
  auto cfg = named_config("thoonk-scripts-eval");
  cfg.use_functions = false;
  return cfg;
}
}  // namespace

FIXTURE_TEST_CASE_WITH_CONFIG(scripts_eval_config(), "scripts",
                              "scripts: a Lua error reports the line of the .lua file (EVALSHA)",
                              "[scripts]") {
  co_await f.c.async_connect(asio::use_awaitable);
  const thoonk::detail::feed_names names(f.c.get_config(), f.name);
  std::vector<std::string> args{"not a number"};
  co_await expect_error_line(f, "queue", "queues/get.lua", "redis.call('RPOP'",
                             thoonk::detail::jobs::queue_keys(names).keys, std::move(args));
}

FIXTURE_TEST_CASE("scripts", "scripts: a Lua error reports the line of the .lua file",
                  "[scripts]") {
  co_await f.c.async_connect(asio::use_awaitable);
  const thoonk::detail::feed_names names(f.c.get_config(), f.name);

  SECTION("queue layout: queues/get.lua with a count that is no number") {
    std::vector<std::string> args{"not a number"};
    co_await expect_error_line(f, "queue", "queues/get.lua", "redis.call('RPOP'",
                               thoonk::detail::jobs::queue_keys(names).keys, std::move(args));
  }

  SECTION("feed layout: feeds/catch_up.lua with a row limit that is no number") {
    // ARGV as catch_up.lua documents them; the 4th (max rows) is no number.
    std::vector<std::string> args{"feed", "0", "",  "not a number", "1000", "0", "", "", "",
                                  "0",    "",  "10"};
    co_await expect_error_line(f, "feed", "feeds/catch_up.lua", "if limit > 0 then",
                               thoonk::detail::data_keys(names), std::move(args));
  }

  SECTION("THOONK codes map to the library's error codes") {
    // No such feed: includes/feed_config.lua's open_feed fails with THOONK feed_not_found.
    std::vector<std::string> args;
    args.emplace_back("counts");
    auto [ec, v] = co_await thoonk::detail::run_script(
        thoonk::detail::core_of(f.c), scripts::jobs_read(),
        thoonk::detail::jobs::job_keys(names).keys, std::move(args));
    CHECK(ec == thoonk::error::feed_not_found);
    CHECK(v.str.find("THOONK feed_not_found") != std::string::npos);
  }
}
