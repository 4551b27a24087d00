// A client destroyed without stop() while its requests are in flight: what
// it owned is freed whether or not its io_context runs again, and requests
// written and not answered complete with unknown_outcome. Runs on one server and, in
// the cluster run (THOONK_TEST_TOPOLOGY=cluster), on a cluster, where the
// router's per-primary connections are what is at stake.
#include "support/helpers.hpp"

#include "connection/router.hpp"

#include <thoonk/script.hpp>

#include <optional>

using namespace thoonk::test;
using thoonk::detail::router_of;

namespace {

// Holds the server for about `ms` milliseconds on the slot of KEYS[1], so
// a request sent after it stays written and unanswered for that long.
const thoonk::script busy_script(
    "local t0 = redis.call('TIME') "
    "local stop = tonumber(t0[1]) * 1000000 + tonumber(t0[2]) + tonumber(ARGV[1]) * 1000 "
    "repeat local t = redis.call('TIME') "
    "until tonumber(t[1]) * 1000000 + tonumber(t[2]) >= stop "
    "return redis.call('INCR', KEYS[1])");

struct lifetime_case {
  asio::io_context ioc;
  std::optional<thoonk::client> c{std::in_place, ioc.get_executor(),
                                  named_config("thoonk-lifetime")};
  std::string counter = key("lifetime", unique_name("lt"));
  // The router's cluster state (null on one server): expired once freed.
  std::weak_ptr<thoonk::detail::slot_source> cluster_state;
  int done = 0;
  std::vector<error_code> results;

  // Connects, then sends `n` evals of the busy script (the first holds the
  // server `busy_ms`), and runs the io_context until they are all written.
  void start(int n, int busy_ms) {
    run_coro(ioc, [this]() -> asio::awaitable<void> {
      co_await c->async_connect(asio::use_awaitable);
      // A first call loads the script, so the calls below are sent at once.
      std::vector<std::string> keys{counter}, args{"0"};
      co_await c->async_eval(busy_script, keys, args, asio::use_awaitable);
    });
    cluster_state = router_of(*c).slots();
    for (int i = 0; i < n; ++i) {
      c->async_eval(busy_script, {counter}, {i == 0 ? std::to_string(busy_ms) : "0"},
                    [this](error_code ec, thoonk::resp3::value) {
                      results.push_back(ec);
                      ++done;
                    });
    }
    ioc.restart();
    ioc.run_for(std::chrono::milliseconds(busy_ms / 4));
  }
};

}  // namespace

TEST_CASE(
    "client lifetime: destroyed without stop() with requests in flight, its io_context "
    "never run again: everything it owned is freed",
    "[client][lifetime][stop]") {
  std::weak_ptr<thoonk::detail::slot_source> state;
  {
    lifetime_case t;
    t.start(8, 400);
    REQUIRE(t.done == 0);  // all written, none answered: the server is busy
    state = t.cluster_state;
    t.c.reset();
    // The io_context goes without running again: the completions it holds
    // are destroyed, not run.
  }
  // On a cluster the router's state was kept alive by its own requests'
  // frames before the fix (a cycle through the node connections); on one
  // server there is none. LeakSanitizer checks the rest at exit.
  CHECK(state.expired());
}

TEST_CASE(
    "client lifetime: destroyed without stop() with requests in flight, its io_context "
    "running on: they complete with unknown_outcome",
    "[client][lifetime][stop]") {
  lifetime_case t;
  t.start(8, 400);
  REQUIRE(t.done == 0);
  t.c.reset();
  t.ioc.restart();
  t.ioc.run_for(std::chrono::seconds(5));
  CHECK(t.done == 8);
  // Written and never answered: the outcome is unknown to the client.
  for (const auto& ec : t.results) CHECK(ec == thoonk::error::unknown_outcome);
  CHECK(t.cluster_state.expired());
  // They did run, each once (the first call of start() included): the
  // GET waits behind the busy one.
  asio::io_context check_ioc;
  thoonk::connection admin(check_ioc.get_executor(), test_config());
  run_coro(check_ioc, [&]() -> asio::awaitable<void> {
    co_await admin.async_connect(asio::use_awaitable);
    auto v = co_await cmd(admin, "GET", t.counter);
    CHECK(v.str == "9");
    admin.stop();
  });
}
