// Waiting claimers never block the shared connection, are coalesced, and
// are woken by a put from another client before the fallback poll.
#include "support/helpers.hpp"

#include <functional>
#include <optional>
#include <set>
#include <thread>

using namespace thoonk::test;
using thoonk::test::run_coro;
using thoonk::test::unique_name;

namespace {

// One field of INFO (e.g. "blocked_clients"), or -1.
std::int64_t info_number(const std::string& info, const std::string& field) {
  auto pos = info.find("\n" + field + ":");
  if (pos == std::string::npos) pos = info.find(field + ":") == 0 ? 0 : std::string::npos;
  if (pos == std::string::npos) return -1;
  pos = info.find(':', pos) + 1;
  return std::stoll(info.substr(pos, info.find('\r', pos) - pos));
}

// calls=N of one command in INFO commandstats (0 when absent).
std::int64_t command_calls(const std::string& stats, const std::string& command) {
  auto pos = stats.find("cmdstat_" + command + ":calls=");
  if (pos == std::string::npos) return 0;
  pos = stats.find('=', pos) + 1;
  return std::stoll(stats.substr(pos, stats.find(',', pos) - pos));
}

// INFO `section` of the node serving `k`: the one server; under
// cluster_topology() the primary serving k's slot.
asio::awaitable<std::string> info_of_owner(thoonk::connection& c, std::string section,
                                           std::string k) {
  thoonk::request r;
  r.push("INFO", section);
  if (cluster_topology()) {
    auto resp = co_await exec_on_node(c, owner_port(k), r);
    co_return resp.at(0).str;
  }
  auto v = co_await exec_one(c, std::move(r));
  co_return v.str;
}

// One INFO field summed over every node: the one server; under
// cluster_topology() every node of the cluster, replicas included.
asio::awaitable<std::int64_t> info_sum(thoonk::connection& c, std::string section,
                                       std::function<std::int64_t(const std::string&)> field) {
  thoonk::request r;
  r.push("INFO", section);
  if (!cluster_topology()) {
    auto v = co_await exec_one(c, std::move(r));
    co_return field(v.str);
  }
  std::int64_t sum = 0;
  for (auto port : cluster_ports(false)) {
    auto resp = co_await exec_on_node(c, port, r);
    sum += field(resp.at(0).str);
  }
  co_return sum;
}

// n INCRs of `k`, one after the other, over the client's own connection
// (on a cluster the connection to k's primary).
asio::awaitable<double> run_requests(thoonk::connection& c, std::string k, int n) {
  thoonk::request r;
  r.push("INCR", k);
  auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < n; ++i) co_await c.async_exec(r, asio::use_awaitable);
  co_return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

const char* const blocking_commands[] = {"brpop",  "blpop",    "brpoplpush", "blmove",
                                         "blmpop", "bzpopmin", "bzpopmax",   "bzmpop",
                                         "wait",   "xread",    "xreadgroup"};

}  // namespace

// On a cluster: the requests go to the queue's primary, over the same
// connection as the claimers' scripts (the counter shares the queue's
// slot); nobody is blocked and no blocking command ran on any node; the
// claim scripts are counted on the queue's primary.
TEST_CASE("job: 200 waiting claimers do not delay other requests on the connection",
          "[job][claim][finish][open][put_many]") {
  asio::io_context ioc;
  const auto client_name = unique_name("jobs-wait");
  thoonk::client c{ioc.get_executor(), named_config(client_name)};
  const auto name = unique_name("jobs-wait");
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await c.async_connect(asio::use_awaitable);
        co_await create_feed(c.conn(), name, "job");
        auto q = co_await thoonk::job_queue::async_open(c, name, asio::use_awaitable);
        const std::string counter = "jobs-wait-counter:" + key_name(name);

        // Baseline: 10,000 requests, one after the other, nobody waiting.
        co_await run_requests(c.conn(), counter, 500);  // warm-up
        const double alone = co_await run_requests(c.conn(), counter, 10000);

        co_await cmd(c.conn(), "CONFIG", "RESETSTAT");
        const auto pops_before = co_await command_calls_on(c.conn(), name, "rpop");
        constexpr int waiters = 200;
        int claimed = 0, finished = 0;
        std::set<std::string> ids;
        for (int i = 0; i < waiters; ++i) {
          asio::co_spawn(
              ioc,
              [&]() -> asio::awaitable<void> {
                auto [ec, j] = co_await q.async_claim(60s, nothrow);
                if (!ec) {
                  ++claimed;
                  ids.insert(j.id);
                  auto [fec] = co_await q.async_finish(j, nothrow);
                  if (!fec) ++finished;
                }
              },
              asio::detached);
        }
        // Every claimer registers before the first claim script runs (they
        // start at this coroutine's next suspension); once one has run, they
        // are waiting.
        auto idle = co_await ran_since(c.conn(), name, "rpop", pops_before);
        REQUIRE(idle);
        // The server sees nobody blocked, and no blocking command ever.
        const std::function<std::int64_t(const std::string&)> blocked_field =
            [](const std::string& text) { return info_number(text, "blocked_clients"); };
        auto blocked = co_await info_sum(c.conn(), "clients", blocked_field);
        CHECK(blocked == 0);

        const double with_waiters = co_await run_requests(c.conn(), counter, 10000);
        INFO("10,000 requests alone: " << alone << " s, with 200 waiters: " << with_waiters
                                       << " s");
        // Generous: the waiters cost a few script calls per poll interval.
        CHECK(with_waiters < 3 * alone + 0.5);

        auto list = co_await cmd(c.conn(), "CLIENT", "LIST");
        for (const char* b : blocking_commands) {
          CHECK(list.str.find(std::string("cmd=") + b + " ") == std::string::npos);
        }

        // Now feed them: every waiter gets one job, with few claim scripts.
        std::vector<std::string> items(waiters, "job");
        co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
        auto all_finished = co_await wait_until([&] { return finished == waiters; }, 30s);
        CHECK(all_finished);
        CHECK(claimed == waiters);
        CHECK(finished == waiters);
        CHECK(ids.size() == static_cast<std::size_t>(waiters));

        for (const char* b : blocking_commands) {
          INFO("blocking command " << b);
          const std::function<std::int64_t(const std::string&)> calls_of =
              [b](const std::string& text) { return command_calls(text, b); };
          auto calls = co_await info_sum(c.conn(), "commandstats", calls_of);
          CHECK(calls == 0);
        }
        // Each claim script pops once (RPOP). 200 claimers, a handful of
        // calls: coalesced.
        auto stats = co_await info_of_owner(c.conn(), "commandstats", key("ids", name));
        const auto pops = command_calls(stats, "rpop");
        INFO("claim scripts run: " << pops);
        CHECK(pops > 0);
        CHECK(pops <= 40);
        co_await cmd(c.conn(), "DEL", counter);
      },
      120s);
}

TEST_CASE("job: a put from another client wakes an idle claimer before the poll",
          "[job][claim][put]") {
  asio::io_context ioc;
  thoonk::client worker{ioc.get_executor(), named_config()};
  thoonk::client producer{ioc.get_executor(), named_config()};
  const auto name = unique_name("jobs-wake");
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(worker, producer);
        co_await create_feed(worker.conn(), name, "job");
        // The fallback poll is far beyond this test's deadline: only the
        // wake-up notification can deliver the job in time.
        thoonk::job_queue_options opts;
        opts.poll_interval = std::chrono::hours(1);
        thoonk::job_queue wq(worker, name, opts);
        thoonk::job_queue pq(producer, name);

        bool got = false;
        std::string got_id;
        std::chrono::steady_clock::time_point when{};
        const auto pops_before = co_await command_calls_on(worker.conn(), name, "rpop");
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              auto [ec, j] = co_await wq.async_claim(std::chrono::milliseconds::max(), nothrow);
              if (!ec) {
                got = true;
                got_id = j.id;
                when = std::chrono::steady_clock::now();
              }
            },
            asio::detached);
        // It goes idle once its first attempt has found the queue empty.
        auto idle = co_await ran_since(worker.conn(), name, "rpop", pops_before);
        REQUIRE(idle);
        CHECK(!got);
        auto t0 = std::chrono::steady_clock::now();
        auto id = co_await put_item(pq, "wake up");
        auto woken = co_await wait_until([&] { return got; });
        REQUIRE(woken);
        CHECK(got_id == id);
        auto latency = std::chrono::duration_cast<std::chrono::milliseconds>(when - t0).count();
        INFO("put -> claim latency " << latency << " ms");
        CHECK(latency < 5000);
      },
      20s);
}

TEST_CASE("job: a claimer cancelled or timed out while its claim is in flight loses no job",
          "[job][cancel][claim][counts][finish][open][put_many]") {
  fixture f("jobs-cancel");
  auto& ioc = f.ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await f.c.async_connect(asio::use_awaitable);
    co_await create_feed(f.c.conn(), f.name, "job");
    auto q = co_await thoonk::job_queue::async_open(f.c, f.name, asio::use_awaitable);
    std::vector<std::string> items{"1", "2", "3"};
    co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
    int cancels = 0;
    for (int round = 0; round < 20; ++round) {
      asio::cancellation_signal sig;
      int outcome = -1;  // 0 aborted, 1 claimed
      std::string claimed_id;
      std::int64_t token = 0;
      asio::co_spawn(
          ioc,
          [&]() -> asio::awaitable<void> {
            auto [ec, j] =
                co_await q.async_claim(5s, asio::bind_cancellation_slot(sig.slot(), nothrow));
            if (ec == asio::error::operation_aborted) outcome = 0;
            else if (!ec) {
              outcome = 1;
              claimed_id = j.id;
              token = j.token;
            }
          },
          asio::detached);
      for (int i = 0; i < round % 5; ++i) co_await asio::post(ioc, asio::use_awaitable);
      sig.emit(asio::cancellation_type::terminal);
      auto ended = co_await wait_until([&] { return outcome >= 0; });
      REQUIRE(ended);
      if (outcome == 1) {
        const thoonk::claim_ref claim{claimed_id, token};
        co_await q.async_cancel(claim, asio::use_awaitable);
        ++cancels;
      }
      // A claim cancelled after its script ran is released in the
      // background: wait until the release has landed.
      thoonk::job_counts counts;
      auto back = co_await wait_until([&]() -> asio::awaitable<bool> {
        counts = co_await q.async_counts(asio::use_awaitable);
        co_return counts.waiting == 3 && counts.claimed == 0;
      });
      CHECK(back);
      CHECK(counts.waiting == 3);
      CHECK(counts.claimed == 0);
    }
    // Released claims count no failure; cancels do.
    std::int64_t failures = 0;
    for (int i = 0; i < 3; ++i) {
      auto j = co_await q.async_claim(1s, asio::use_awaitable);
      failures += j.failures;
      co_await q.async_finish(j, asio::use_awaitable);
    }
    CHECK(failures == cancels);
  });
}

FIXTURE_TEST_CASE("jobs-close", "job: destroying the queue ends pending claims and result waits",
                  "[job][claim][get_result]") {
  error_code claim_ec, result_ec;
  int done = 0;
  {
    auto q = co_await contract_job_queue(f);
    const auto pops = co_await command_calls_on(f.c.conn(), f.name, "rpop");
    const auto reads = co_await command_calls_on(f.c.conn(), f.name, "lindex");
    q.async_claim(60s, [&](error_code ec, thoonk::claimed_job) {
      claim_ec = ec;
      ++done;
    });
    q.async_get_result("nothing", 60s, [&](error_code ec, std::string) {
      result_ec = ec;
      ++done;
    });
    // Both pending: the claim's first attempt and the result's first read
    // are done.
    auto claim_waits = co_await ran_since(f.c.conn(), f.name, "rpop", pops);
    auto result_waits = co_await ran_since(f.c.conn(), f.name, "lindex", reads);
    CHECK(claim_waits);
    CHECK(result_waits);
    CHECK(done == 0);
  }
  auto ended = co_await wait_until([&] { return done == 2; });
  CHECK(ended);
  CHECK(done == 2);
  CHECK(claim_ec == asio::error::operation_aborted);
  CHECK(result_ec == asio::error::operation_aborted);
}

TEST_CASE("job: claims and results work by polling when pub/sub is not permitted",
          "[job][claim][finish][get_result][put]") {
  asio::io_context ioc;
  const auto user = unique_name("jobs-nopubsub");
  thoonk::client admin{ioc.get_executor(), named_config()};
  auto cfg = named_config();
  cfg.username = user;
  cfg.password = "secret";
  std::optional<thoonk::client> worker;
  const auto name = unique_name("jobs-poll");
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await admin.async_connect(asio::use_awaitable);
        // Every command and key, no channel: SUBSCRIBE is refused.
        co_await cmd(admin.conn(), "ACL", "SETUSER", user, "on", ">secret", "~*", "resetchannels",
                     "+@all");
        co_await create_feed(admin.conn(), name, "job");
        worker.emplace(ioc.get_executor(), cfg);
        co_await worker->conn().async_connect(asio::use_awaitable);
        thoonk::job_queue_options opts;
        opts.poll_interval = 100ms;
        thoonk::job_queue wq(*worker, name, opts);
        thoonk::job_queue aq(admin, name);

        bool got = false;
        thoonk::claimed_job job;
        const auto pops = co_await command_calls_on(admin.conn(), name, "rpop");
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              auto [ec, j] = co_await wq.async_claim(10s, nothrow);
              got = !ec;
              job = j;
            },
            asio::detached);
        // The claimer's first attempt finds the queue empty: the job put
        // next reaches it by a poll.
        auto idle = co_await ran_since(admin.conn(), name, "rpop", pops);
        REQUIRE(idle);
        auto id = co_await put_item(aq, "no wake-up for me");
        auto claimed = co_await wait_until([&] { return got; });
        REQUIRE(claimed);
        CHECK(job.id == id);

        std::string result;
        bool have = false;
        const auto reads = co_await command_calls_on(admin.conn(), name, "lindex");
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              auto [ec, r] = co_await wq.async_get_result(id, 10s, nothrow);
              have = !ec;
              result = r;
            },
            asio::detached);
        // The result wait has read once (nothing yet): the finish next
        // reaches it by a poll.
        auto waiting = co_await ran_since(admin.conn(), name, "lindex", reads);
        REQUIRE(waiting);
        // (This user may not PUBLISH either: the finish comes from another
        // client; the token is the job's, not the client's.)
        co_await aq.async_finish(job, std::string("polled"), asio::use_awaitable);
        auto finished = co_await wait_until([&] { return have; });
        CHECK(finished);
        CHECK(have);
        CHECK(result == "polled");
        worker->stop();
        co_await cmd(admin.conn(), "ACL", "DELUSER", user);
      },
      30s);
}

TEST_CASE("job and queue operations initiated from another thread",
          "[job][claim][counts][create_feed][finish][get][put]") {
  asio::io_context ioc;
  auto work = asio::make_work_guard(ioc);
  thoonk::client c{ioc.get_executor(), named_config()};
  const std::string jname = thoonk::test::unique_name("jobs-thread");
  const std::string qname = thoonk::test::unique_name("queue-thread");
  std::thread runner([&] { ioc.run(); });
  // Everything below runs on this thread; the client's work runs on `runner`.
  c.async_connect(asio::use_future).get();
  c.async_create_feed(jname, thoonk::feed_type::job, {}, asio::use_future).get();
  c.async_create_feed(qname, thoonk::feed_type::queue, {}, asio::use_future).get();
  {
    thoonk::job_queue_options o;
    o.prefetch = 4;  // claims are served from the prefetch buffer too
    thoonk::job_queue q(c, jname, o);
    std::vector<std::future<thoonk::put_result>> puts;
    for (int i = 0; i < 20; ++i)
      puts.push_back(q.async_put("job " + std::to_string(i), asio::use_future));
    for (auto& p : puts) CHECK(!p.get().id.empty());
    int finished = 0;
    for (int i = 0; i < 20; ++i) {
      auto j = q.async_claim(5s, asio::use_future).get();
      q.async_finish(j, asio::use_future).get();
      ++finished;
    }
    CHECK(finished == 20);
    auto counts = q.async_counts(asio::use_future).get();
    CHECK(counts.items == 0);
    CHECK(counts.claimed == 0);

    thoonk::queue plain(c, qname);
    plain.async_put("item", asio::use_future).get();
    auto it = plain.async_get(5s, asio::use_future).get();
    CHECK(it.item == "item");
  }
  asio::post(ioc, [&] { c.stop(); });
  work.reset();
  runner.join();
}
