// redis-server killed with SIGKILL while producers put jobs and workers
// claim and finish them, then restarted on its data (appendonly yes,
// appendfsync always) on the same port. The clients are never told: they
// reconnect by themselves. The history must show every acknowledged put
// finished (none lost), no acknowledged finish undone (a finished job
// never comes back), and the unknown outcomes counted as such. Also timed:
// from the restarted server's first PONG to the first put and the first
// claim that complete after it.
//
// The clients run on a thread of their own; the test's main thread kills
// and restarts the server (redis_server is not thread-safe and its child
// must be started by a thread that outlives it).
#include "fault_support.hpp"
#include "support/helpers.hpp"

#include <atomic>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

using namespace thoonk::test;
using namespace thoonk::faults;

namespace {

struct put_rec {
  std::int64_t t;
  outcome result;
  std::string id;
};
struct claim_rec {
  std::int64_t t;
  std::string id;
};
struct finish_rec {
  std::int64_t t;
  std::string id;
  outcome first;  // the first attempt's outcome
  bool finished;  // a finish of this claim succeeded (possibly after an unknown)
};

// Written on the clients' thread only, read after it ended.
struct history {
  std::vector<put_rec> puts;
  std::vector<claim_rec> claims;
  std::vector<finish_rec> finishes;
  tally claim_errors;  // claims that failed (not queue_empty)
  int producers = 0, claimers = 0;
};

asio::awaitable<void> producer(thoonk::job_queue q, history* h, std::atomic<bool>* stop, int n) {
  ++h->producers;
  for (int i = 0; !stop->load(); ++i) {
    auto [ec, id] =
        co_await q.async_put("item " + std::to_string(n) + "-" + std::to_string(i), nothrow);
    h->puts.push_back({now_ms(), classify(ec), id.id});
    co_await sleep_for(ec ? 20ms : 3ms);
  }
  --h->producers;
}

asio::awaitable<void> claimer(thoonk::job_queue q, history* h, bool* stop) {
  ++h->claimers;
  while (!*stop) {
    auto [ec, job] = co_await q.async_claim(200ms, nothrow);
    if (ec == thoonk::error::queue_empty) continue;
    if (ec) {
      h->claim_errors.add(classify(ec));
      co_await sleep_for(20ms);
      continue;
    }
    h->claims.push_back({now_ms(), job.id});
    // An unknown outcome is resolved by asking again: success, or
    // job_not_found (it had finished), or lost_claim (it lapsed).
    finish_rec f{0, job.id, outcome::ok, false};
    for (int attempt = 0; attempt < 100; ++attempt) {
      auto [fec] = co_await q.async_finish(job, job.id, nothrow);
      if (attempt == 0) f.first = classify(fec);
      if (!fec) f.finished = true;
      if (classify(fec) != outcome::unknown) break;  // a definite answer
      co_await sleep_for(20ms);
    }
    f.t = now_ms();
    h->finishes.push_back(std::move(f));
  }
  --h->claimers;
}

}  // namespace

TEST_CASE("faults: redis-server SIGKILLed and restarted on its AOF loses no acknowledged put",
          "[faults][server_kill]") {
  const auto& prof = current_profile();
  thoonk::test::redis_server srv(
      std::vector<std::string>{"--appendonly", "yes", "--appendfsync", "always"});
  asio::io_context ioc;
  auto cfg = fault_config(srv.url());
  cfg.health_check_interval = 500ms;
  cfg.health_check_timeout = 1000ms;
  thoonk::client producers(ioc.get_executor(), cfg);
  thoonk::client workers(ioc.get_executor(), cfg);
  const std::string name = "faults-restart";
  history h;
  std::atomic<bool> stop_puts{false};
  std::atomic<bool> drained{false};
  bool stop_claims = false;
  thoonk::job_queue pq, wq;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(producers, workers);
        pq = co_await thoonk::job_queue::async_create_or_open(
            producers, name, requeue_on_lapse(1000ms), asio::use_awaitable);
        thoonk::job_queue_options wo;
        wo.poll_interval = 200ms;
        wq = co_await thoonk::job_queue::async_open(workers, name, wo, asio::use_awaitable);
      },
      20s);

  // The clients' side, on a thread of its own (started below).
  asio::cancellation_signal stop_maintenance;
  for (int i = 0; i < 2; ++i) asio::co_spawn(ioc, producer(pq, &h, &stop_puts, i), asio::detached);
  for (int i = 0; i < 4; ++i) asio::co_spawn(ioc, claimer(wq, &h, &stop_claims), asio::detached);
  {
    thoonk::maintenance_options mo = no_stats();
    mo.check_unaccounted = false;
    mo.lock_ttl = 1s;
    wq.async_run_maintenance(
        200ms, mo,
        asio::bind_cancellation_slot(stop_maintenance.slot(), [](boost::system::error_code) {}));
  }
  // Once the producers stopped: wait until every job is finished, then
  // stop everything.
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        while (!stop_puts.load() || h.producers > 0) co_await sleep_for(20ms);
        for (;;) {
          auto [ec, c] = co_await wq.async_counts(nothrow);
          if (!ec && c.waiting == 0 && c.claimed == 0 && c.scheduled == 0) break;
          co_await sleep_for(100ms);
        }
        stop_claims = true;
        while (h.claimers > 0) co_await sleep_for(10ms);
        stop_maintenance.emit(asio::cancellation_type::terminal);
        drained = true;
        ioc.stop();
      },
      asio::detached);
  const auto run_limit = prof.scenario_limit + 60s;
  io_thread clients(ioc, run_limit);

  // The faults, from this thread.
  std::mt19937 rng{std::random_device{}()};
  struct restart_times {
    std::int64_t killed, up;
  };
  std::vector<restart_times> restarts;
  std::this_thread::sleep_for(500ms);
  for (int k = 0; k < prof.server_kills; ++k) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(300, 1500)(rng)));
    restart_times r{};
    r.killed = now_ms();
    REQUIRE(srv.pid() > 0);  // never signal pid 0 or -1
    ::kill(srv.pid(), SIGKILL);
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(50, 500)(rng)));
    srv.restart();  // same port, same --dir: the AOF is loaded
    r.up = now_ms();
    restarts.push_back(r);
  }
  std::this_thread::sleep_for(1s);
  stop_puts = true;
  clients.join();
  REQUIRE(drained.load());

  // Check the history against the server.
  asio::io_context check_ioc;
  thoonk::client check(check_ioc.get_executor(), cfg);
  std::vector<std::int64_t> result_lens;
  std::vector<bool> live;
  std::vector<std::string> acked;
  for (const auto& p : h.puts)
    if (p.result == outcome::ok) acked.push_back(p.id);
  run_coro(
      check_ioc,
      [&]() -> asio::awaitable<void> {
        co_await check.async_connect(asio::use_awaitable);
        thoonk::request r;
        for (auto& id : acked)
          r.push("LLEN", "feed.jobfinished:" + name + std::string(1, '\0') + id);
        auto lens = co_await check.conn().async_exec(r, asio::use_awaitable);
        for (auto& v : lens) result_lens.push_back(v.integer);
        thoonk::request l;
        for (auto& id : acked) l.push("HEXISTS", "feed.items:" + name, id);
        auto items = co_await check.conn().async_exec(l, asio::use_awaitable);
        for (auto& v : items) live.push_back(v.integer == 1);
        check.stop();
      },
      60s);

  tally puts, finishes;
  for (const auto& p : h.puts) puts.add(p.result);
  std::map<std::string, int> claims_of;
  for (const auto& c : h.claims) ++claims_of[c.id];
  std::map<std::string, std::int64_t> finished_at;
  for (const auto& f : h.finishes) {
    finishes.add(f.first);
    if (f.finished && f.first == outcome::ok) finished_at.emplace(f.id, f.t);
  }
  std::uint64_t lost = 0, twice = 0, resurrected = 0, duplicates = 0;
  for (std::size_t i = 0; i < acked.size(); ++i) {
    lost += result_lens[i] == 0 && !live[i];
    twice += result_lens[i] > 1;
  }
  for (const auto& [id, n] : claims_of) duplicates += static_cast<std::uint64_t>(n - 1);
  // A job whose finish was acknowledged is never claimed again.
  for (const auto& c : h.claims) {
    auto it = finished_at.find(c.id);
    if (it != finished_at.end() && c.t > it->second) ++resurrected;
  }
  std::int64_t put_resume = 0, claim_resume = 0, downtime = 0;
  for (const auto& r : restarts) {
    downtime = std::max(downtime, r.up - r.killed);
    for (const auto& p : h.puts)
      if (p.result == outcome::ok && p.t > r.up) {
        put_resume = std::max(put_resume, p.t - r.up);
        break;
      }
    for (const auto& c : h.claims)
      if (c.t > r.up) {
        claim_resume = std::max(claim_resume, c.t - r.up);
        break;
      }
  }
  const auto unknown = puts.unknown + finishes.unknown + h.claim_errors.unknown;
  INFO("puts " << puts.ok << " ok, " << puts.failed << " failed, " << puts.unknown
               << " unknown; claims " << h.claims.size() << " (" << h.claim_errors.unknown
               << " unknown, " << h.claim_errors.failed << " failed); finishes " << finishes.ok
               << " ok, " << finishes.failed << " refused, " << finishes.unknown
               << " unknown; reconnects " << producers.conn().stats().reconnects << " / "
               << workers.conn().stats().reconnects);
  CHECK(restarts.size() == static_cast<std::size_t>(prof.server_kills));
  CHECK(puts.ok > 0);
  CHECK(lost == 0);
  CHECK(twice == 0);
  CHECK(resurrected == 0);
  // Nothing stays live: every acknowledged put ran to its finish.
  CHECK(std::count(live.begin(), live.end(), true) == 0);
  // The clients came back by themselves after every restart.
  CHECK(producers.conn().stats().reconnects >= restarts.size());
  CHECK(workers.conn().stats().reconnects >= restarts.size());
  CHECK(workers.sub().stats().connection.reconnects >= restarts.size());
  // And went on working after the last one.
  CHECK(put_resume > 0);
  CHECK(claim_resume > 0);

  report({"redis-server SIGKILLed and restarted (AOF always): " + std::to_string(restarts.size()) +
              " kills",
          puts.total() + h.claims.size() + h.claim_errors.total() + finishes.total(), lost,
          duplicates, unknown,
          "server down ≤ " + std::to_string(downtime) + " ms; after it answered: puts resume ≤ " +
              std::to_string(put_resume) + " ms, waiting claimers ≤ " +
              std::to_string(claim_resume) + " ms"});
}
