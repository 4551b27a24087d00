// The library's scripts as Redis functions (config::use_functions,
// src/scripts/script_functions.hpp) against a real server: loaded once per
// server on first use and again after FUNCTION FLUSH; EVALSHA for good, after
// one refused attempt that ran nothing, for a user that may not FCALL or not
// FUNCTION LOAD; EVALSHA for one call when the server refuses to start a
// function but would start a script (out of memory, for a read); and never
// a function when the configuration says so. Single server: the library's
// cluster runs (integration_on_cluster) load the sharded libraries per node.
#include "support/helpers.hpp"

#include "scripts/script_functions.hpp"
#include "thoonk_lua_scripts.hpp"

using namespace thoonk::test;
using E = thoonk::error;
using jq = thoonk::job_queue;
namespace scripts = thoonk::detail::scripts;

namespace {

const std::string& put_library_name() {
  return thoonk::detail::function_library_of(scripts::jobs_put())->name;
}

asio::awaitable<bool> library_loaded(thoonk::connection& c, const std::string& name) {
  auto v = co_await cmd(c, "FUNCTION", "LIST", "LIBRARYNAME", name);
  co_return !v.elements.empty();
}

asio::awaitable<bool> script_cached(thoonk::connection& c, const thoonk::script& s) {
  auto v = co_await cmd(c, "SCRIPT", "EXISTS", s.sha1());
  co_return !v.elements.empty() && v.elements[0].integer == 1;
}

// How often the ACL refused `user` the command or subcommand `object`
// (ACL LOG aggregates equal refusals into one entry with a count).
asio::awaitable<std::int64_t> refusals(thoonk::connection& c, const std::string& user,
                                       const std::string& object) {
  auto log = co_await cmd(c, "ACL", "LOG");
  std::int64_t n = 0;
  for (const auto& entry : log.elements) {
    std::int64_t count = 0;
    std::string who, what;
    for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2) {
      const auto& k = entry.elements[i].str;
      const auto& v = entry.elements[i + 1];
      if (k == "count") count = v.integer;
      if (k == "username") who = v.str;
      if (k == "object") what = v.str;
    }
    if (who == user && what == object) n += count;
  }
  co_return n;
}

thoonk::config eval_only_config() {
  auto cfg = named_config("thoonk-evalonly");
  cfg.use_functions = false;
  return cfg;
}

}  // namespace

FIXTURE_TEST_CASE("fnload",
                  "functions: loaded once per server on first use, run with FCALL, "
                  "loaded again after FUNCTION FLUSH",
                  "[functions][scripts][job]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await cmd(f.c.conn(), "FUNCTION", "DELETE", put_library_name());  // may not exist
  co_await cmd(f.c.conn(), "SCRIPT", "FLUSH");
  auto q = co_await jq::async_create_or_open(f.c, f.name, asio::use_awaitable);
  const bool before = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(!before);

  co_await q.async_put("a", asio::use_awaitable);
  const bool loaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(loaded);
  // Never sent as a script: neither EVALSHA's reload nor EVAL cached it.
  const bool cached = co_await script_cached(f.c.conn(), scripts::jobs_put());
  CHECK(!cached);

  co_await cmd(f.c.conn(), "FUNCTION", "FLUSH");
  co_await q.async_put("b", asio::use_awaitable);
  co_await q.async_put("c", asio::use_awaitable);
  const bool reloaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(reloaded);
  const bool cached_after = co_await script_cached(f.c.conn(), scripts::jobs_put());
  CHECK(!cached_after);
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 3);
}

FIXTURE_TEST_CASE_WITH_CONFIG(eval_only_config(), "fneval",
                              "functions: use_functions = false runs every script with EVALSHA",
                              "[functions][scripts][job][config]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await cmd(f.c.conn(), "FUNCTION", "DELETE", put_library_name());
  auto q = co_await jq::async_create_or_open(f.c, f.name, asio::use_awaitable);
  co_await q.async_put("a", asio::use_awaitable);
  const bool loaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(!loaded);
  const bool cached = co_await script_cached(f.c.conn(), scripts::jobs_put());
  CHECK(cached);
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 1);
}

FIXTURE_TEST_CASE("fnacl",
                  "functions: a user that may not FCALL, or not FUNCTION LOAD, gets EVALSHA "
                  "after one refusal that ran nothing",
                  "[functions][scripts][job][acl]") {
  co_await f.c.async_connect(asio::use_awaitable);
  auto admin_q = co_await jq::async_create_or_open(f.c, f.name, asio::use_awaitable);

  struct grant_case {
    const char* label;
    const char* denied;  // the ACL rule taken away
    const char* object;  // what the ACL LOG names
    bool unload;         // the library must be loaded by this user first
  };
  for (const grant_case& k :
       {grant_case{"without +fcall", "-fcall", "fcall", false},
        grant_case{"without +function", "-function", "function|load", true}}) {
    INFO(k.label);
    gap_user user;
    co_await user.create_with(f.c.conn(), "~*", "&*", "+@all", k.denied);
    if (k.unload) co_await cmd(f.c.conn(), "FUNCTION", "DELETE", put_library_name());
    co_await cmd(f.c.conn(), "SCRIPT", "FLUSH");
    {
      thoonk::client uc(f.ioc.get_executor(), user.config());
      co_await uc.async_connect(asio::use_awaitable);
      auto q = co_await jq::async_open(uc, f.name, asio::use_awaitable);
      for (int i = 0; i < 3; ++i) {
        auto [ec, r] = co_await q.async_put("x", nothrow);
        CHECK(!ec);
      }
      uc.stop();
    }
    // Refused once, then never asked again; the scripts ran with EVALSHA.
    auto refused = co_await refusals(f.c.conn(), user.name, k.object);
    CHECK(refused == 1);
    const bool cached = co_await script_cached(f.c.conn(), scripts::jobs_put());
    CHECK(cached);
    co_await cmd(f.c.conn(), "ACL", "DELUSER", user.name);
  }
  // Each put ran exactly once.
  auto counts = co_await admin_q.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 6);
}

FIXTURE_TEST_CASE("fnoom",
                  "functions: out of memory a read still runs (with EVALSHA) and a write is "
                  "refused whole",
                  "[functions][scripts][job][single]") {
  co_await f.c.async_connect(asio::use_awaitable);
  auto q = co_await jq::async_create_or_open(f.c, f.name, asio::use_awaitable);
  co_await q.async_put("a", asio::use_awaitable);
  co_await q.async_counts(asio::use_awaitable);  // both libraries loaded

  co_await cmd(f.c.conn(), "CONFIG", "SET", "maxmemory", "1");
  auto [e1, counts] = co_await q.async_counts(nothrow);
  auto [e2, put] = co_await q.async_put("b", nothrow);
  co_await cmd(f.c.conn(), "CONFIG", "SET", "maxmemory", "0");

  CHECK(!e1);
  CHECK(counts.waiting == 1);
  CHECK(e2);
  auto after = co_await q.async_counts(asio::use_awaitable);
  CHECK(after.waiting == 1);
  // Still functions: the refusal was for this call only.
  co_await cmd(f.c.conn(), "FUNCTION", "DELETE", put_library_name());
  auto [e3, put2] = co_await q.async_put("c", nothrow);
  CHECK(!e3);
  const bool loaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(loaded);
}

namespace {

// A function library as another build of this library would have left it:
// a `thoonk_` name of 40 hex digits that this build does not use.
std::string fake_library_text(const std::string& name) {
  return "#!lua name=" + name + "\nredis.register_function('" + name +
         "', function(keys, args) return 1 end)";
}

// The `thoonk_<sha1>` libraries loaded on the server that this build does
// not use, read with FUNCTION LIST (the test's own reading of the reply).
asio::awaitable<std::set<std::string>> stale_on_server(thoonk::connection& c) {
  auto v = co_await cmd(c, "FUNCTION", "LIST");
  std::set<std::string> out;
  for (const auto& lib : v.elements)
    for (std::size_t i = 0; i + 1 < lib.elements.size(); i += 2)
      if (lib.elements[i].str == "library_name") {
        const auto& n = lib.elements[i + 1].str;
        if (n.size() == 47 && n.starts_with("thoonk_") &&
            !thoonk::detail::this_build_libraries().contains(n))
          out.insert(n);
      }
  co_return out;
}

const std::string stale_a = "thoonk_" + std::string(40, 'a');
const std::string stale_b = "thoonk_0123456789abcdef0123456789abcdef01234567";
// Libraries that are not this library's: never deleted.
const std::string app_library = "orders";
const std::string app_lookalike = "thoonk_helpers";

}  // namespace

FIXTURE_TEST_CASE("fnstale",
                  "functions: delete_stale_functions deletes other builds' libraries, keeps "
                  "this build's and an application's, and the queue keeps working",
                  "[functions][scripts][job]") {
  co_await f.c.async_connect(asio::use_awaitable);
  for (const auto& n : {stale_a, stale_b, app_library, app_lookalike})
    co_await cmd(f.c.conn(), "FUNCTION", "LOAD", "REPLACE", fake_library_text(n));
  auto q = co_await jq::async_create_or_open(f.c, f.name, asio::use_awaitable);
  co_await q.async_put("a", asio::use_awaitable);
  const auto before = co_await stale_on_server(f.c.conn());
  CHECK(before.contains(stale_a));
  CHECK(before.contains(stale_b));

  auto [ec, deleted] = co_await f.c.async_delete_stale_functions(nothrow);
  REQUIRE_FALSE(ec);
  CHECK(deleted == before.size());
  const auto after = co_await stale_on_server(f.c.conn());
  CHECK(after.empty());
  for (const auto& n : {app_library, app_lookalike, put_library_name()}) {
    INFO(n);
    const bool kept = co_await library_loaded(f.c.conn(), n);
    CHECK(kept);
  }

  // Nothing left to delete; the queue's library was never unloaded.
  auto [ec2, again] = co_await f.c.async_delete_stale_functions(nothrow);
  CHECK_FALSE(ec2);
  CHECK(again == 0);
  co_await q.async_put("b", asio::use_awaitable);
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 2);
  for (const auto& n : {app_library, app_lookalike})
    co_await cmd(f.c.conn(), "FUNCTION", "DELETE", n);
}

FIXTURE_TEST_CASE("fnstaleacl",
                  "functions: delete_stale_functions without FUNCTION LIST or FUNCTION DELETE "
                  "is no_permission and deletes nothing; on a stopped client, an error",
                  "[functions][scripts][acl]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await cmd(f.c.conn(), "FUNCTION", "LOAD", "REPLACE", fake_library_text(stale_a));
  for (const char* denied : {"-function|list", "-function|delete"}) {
    INFO(denied);
    gap_user user;
    co_await user.create_with(f.c.conn(), "~*", "&*", "+@all", denied);
    {
      thoonk::client uc(f.ioc.get_executor(), user.config());
      co_await uc.async_connect(asio::use_awaitable);
      thoonk::diagnostics diag;
      auto [ec, deleted] =
          co_await uc.async_delete_stale_functions(thoonk::capture_diagnostics(diag, nothrow));
      CHECK(ec == thoonk::error::no_permission);
      CHECK(deleted == 0);
      CHECK(diag.server_message().starts_with("NOPERM"));
      uc.stop();
      // A stopped client: an error, nothing sent.
      auto [sec, none] = co_await uc.async_delete_stale_functions(nothrow);
      CHECK(sec);
      CHECK(none == 0);
    }
    const bool kept = co_await library_loaded(f.c.conn(), stale_a);
    CHECK(kept);
    co_await cmd(f.c.conn(), "ACL", "DELUSER", user.name);
  }
  co_await cmd(f.c.conn(), "FUNCTION", "DELETE", stale_a);
}
