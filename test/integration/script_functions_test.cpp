// The library's scripts as Redis functions (config::use_functions,
// src/detail/script_functions.hpp) against a real server: loaded once per
// server on first use and again after FUNCTION FLUSH; EVALSHA for good, after
// one refused attempt that ran nothing, for a user that may not FCALL or not
// FUNCTION LOAD; EVALSHA for one call when the server refuses to start a
// function but would start a script (out of memory, for a read); and never
// a function when the configuration says so. Single server: the library's
// cluster runs (integration_on_cluster) load the sharded libraries per node.
#include "support/helpers.hpp"

#include "detail/script_functions.hpp"
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
  co_await f.c.connect(asio::use_awaitable);
  co_await cmd(f.c.conn(), "FUNCTION", "DELETE", put_library_name());  // may not exist
  co_await cmd(f.c.conn(), "SCRIPT", "FLUSH");
  auto q = co_await jq::create_or_open(f.c, f.name, asio::use_awaitable);
  const bool before = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(!before);

  co_await q.put("a", asio::use_awaitable);
  const bool loaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(loaded);
  // Never sent as a script: neither EVALSHA's reload nor EVAL cached it.
  const bool cached = co_await script_cached(f.c.conn(), scripts::jobs_put());
  CHECK(!cached);

  co_await cmd(f.c.conn(), "FUNCTION", "FLUSH");
  co_await q.put("b", asio::use_awaitable);
  co_await q.put("c", asio::use_awaitable);
  const bool reloaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(reloaded);
  const bool cached_after = co_await script_cached(f.c.conn(), scripts::jobs_put());
  CHECK(!cached_after);
  auto counts = co_await q.counts(asio::use_awaitable);
  CHECK(counts.waiting == 3);
}

FIXTURE_TEST_CASE_WITH_CONFIG(eval_only_config(), "fneval",
                              "functions: use_functions = false runs every script with EVALSHA",
                              "[functions][scripts][job][config]") {
  co_await f.c.connect(asio::use_awaitable);
  co_await cmd(f.c.conn(), "FUNCTION", "DELETE", put_library_name());
  auto q = co_await jq::create_or_open(f.c, f.name, asio::use_awaitable);
  co_await q.put("a", asio::use_awaitable);
  const bool loaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(!loaded);
  const bool cached = co_await script_cached(f.c.conn(), scripts::jobs_put());
  CHECK(cached);
  auto counts = co_await q.counts(asio::use_awaitable);
  CHECK(counts.waiting == 1);
}

FIXTURE_TEST_CASE("fnacl",
                  "functions: a user that may not FCALL, or not FUNCTION LOAD, gets EVALSHA "
                  "after one refusal that ran nothing",
                  "[functions][scripts][job][acl]") {
  co_await f.c.connect(asio::use_awaitable);
  auto admin_q = co_await jq::create_or_open(f.c, f.name, asio::use_awaitable);

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
      co_await uc.connect(asio::use_awaitable);
      auto q = co_await jq::open(uc, f.name, asio::use_awaitable);
      for (int i = 0; i < 3; ++i) {
        auto [ec, r] = co_await q.put("x", nothrow);
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
  auto counts = co_await admin_q.counts(asio::use_awaitable);
  CHECK(counts.waiting == 6);
}

FIXTURE_TEST_CASE("fnoom",
                  "functions: out of memory a read still runs (with EVALSHA) and a write is "
                  "refused whole",
                  "[functions][scripts][job][single]") {
  co_await f.c.connect(asio::use_awaitable);
  auto q = co_await jq::create_or_open(f.c, f.name, asio::use_awaitable);
  co_await q.put("a", asio::use_awaitable);
  co_await q.counts(asio::use_awaitable);  // both libraries loaded

  co_await cmd(f.c.conn(), "CONFIG", "SET", "maxmemory", "1");
  auto [e1, counts] = co_await q.counts(nothrow);
  auto [e2, put] = co_await q.put("b", nothrow);
  co_await cmd(f.c.conn(), "CONFIG", "SET", "maxmemory", "0");

  CHECK(!e1);
  CHECK(counts.waiting == 1);
  CHECK(e2);
  auto after = co_await q.counts(asio::use_awaitable);
  CHECK(after.waiting == 1);
  // Still functions: the refusal was for this call only.
  co_await cmd(f.c.conn(), "FUNCTION", "DELETE", put_library_name());
  auto [e3, put2] = co_await q.put("c", nothrow);
  CHECK(!e3);
  const bool loaded = co_await library_loaded(f.c.conn(), put_library_name());
  CHECK(loaded);
}
