// Job traffic through the fault proxy: the workers' client (its command
// connection and its subscriber) goes through fault_proxy, which resets
// every connection or cuts one in the middle of a reply at random moments,
// so claims, finishes and wake-ups lose their replies. Claims whose reply
// was lost leave jobs claimed for nobody, which maintenance (on a direct
// client) requeues once their lease lapses. At the end every job must be
// finished exactly once, and no job claimed again after a finish that was
// acknowledged.
#include "fault_proxy.hpp"
#include "fault_support.hpp"
#include "support/helpers.hpp"

#include <algorithm>
#include <map>
#include <random>

using namespace thoonk::test;
using namespace thoonk::faults;

namespace {

struct job_history {
  struct claim_rec {
    std::int64_t t;
    std::string id;
  };
  std::vector<claim_rec> claims;
  std::map<std::string, std::int64_t> finished_at;  // acknowledged finishes
  std::map<std::string, int> ok_finishes;
  tally claim_ops, finish_ops;
  std::vector<std::int64_t> finish_times;
  int running = 0;
};

asio::awaitable<void> worker(thoonk::job_queue q, job_history* h, const bool* stop) {
  ++h->running;
  while (!*stop) {
    auto [ec, job] = co_await q.async_claim(200ms, nothrow);
    if (ec == thoonk::error::queue_empty) continue;
    h->claim_ops.add(classify(ec));
    if (ec) {
      co_await sleep_for(10ms);
      continue;
    }
    h->claims.push_back({now_ms(), job.id});
    // An unknown outcome is resolved by asking again.
    for (int attempt = 0; attempt < 100 && !*stop; ++attempt) {
      auto [fec] = co_await q.async_finish(job, job.id, nothrow);
      h->finish_ops.add(classify(fec));
      if (!fec) {
        ++h->ok_finishes[job.id];
        h->finished_at.emplace(job.id, now_ms());
        h->finish_times.push_back(now_ms());
      }
      if (classify(fec) != outcome::unknown) break;
      co_await sleep_for(10ms);
    }
  }
  --h->running;
}

/// A redis-server, the fault proxy in front of it, a client `w` whose
/// command connection and subscriber go through the proxy (health checks
/// tightened, so dead peers are seen quickly), a direct client `admin`, and
/// the faults planned for one scenario.
struct proxied_clients {
  thoonk::test::redis_server srv;
  asio::io_context ioc;
  fault_proxy proxy{ioc.get_executor(), srv.port()};
  thoonk::client w{ioc.get_executor(), proxied_config(proxy)};
  thoonk::client admin{ioc.get_executor(), fault_config(srv.url())};
  std::mt19937 rng{std::random_device{}()};
  std::vector<std::int64_t> fault_at;  // sorted
  int resets = 0, cuts = 0;
  asio::cancellation_signal stop_maintenance;
  thoonk::job_counts counts;          // read by finish()
  std::vector<std::int64_t> results;  // read by finish()

  static thoonk::config proxied_config(const fault_proxy& p) {
    auto cfg = fault_config("redis://127.0.0.1:" + std::to_string(p.port()));
    cfg.health_check_interval = 200ms;
    cfg.health_check_timeout = 400ms;
    cfg.connect_timeout = 1s;
    return cfg;
  }

  /// The job queue as both clients see it.
  struct queues {
    thoonk::job_queue direct;   ///< admin's
    thoonk::job_queue proxied;  ///< w's, polling every 100 ms
  };
  /// Connects both clients and creates job queue `name` (claims lapse after
  /// 500 ms and are requeued), with admin's maintenance every 100 ms until
  /// finish().
  asio::awaitable<queues> open(const std::string& name) {
    co_await connect_all(admin, w);
    auto direct = co_await thoonk::job_queue::async_create_or_open(
        admin, name, requeue_on_lapse(500ms), asio::use_awaitable);
    thoonk::job_queue_options wo;
    wo.poll_interval = 100ms;
    auto proxied = co_await thoonk::job_queue::async_open(w, name, wo, asio::use_awaitable);
    thoonk::maintenance_options mo = no_stats();
    mo.check_unaccounted = false;
    direct.async_run_maintenance(
        100ms, mo,
        asio::bind_cancellation_slot(stop_maintenance.slot(), [](boost::system::error_code) {}));
    co_return queues{std::move(direct), std::move(proxied)};
  }

  /// Plans `n` faults, each at a random point from 2 % to 90 % of `total`
  /// (of jobs finished, or put: whatever the scenario counts).
  void plan_faults(int n, std::int64_t total) {
    std::uniform_int_distribution<std::int64_t> at(total / 50, total * 9 / 10);
    for (int i = 0; i < n; ++i) fault_at.push_back(at(rng));
    std::sort(fault_at.begin(), fault_at.end());
  }
  int injected() const { return resets + cuts; }
  /// Whether a planned fault is due once the scenario's count is `progress`.
  bool fault_due(std::int64_t progress) const {
    const auto next = static_cast<std::size_t>(injected());
    return next < fault_at.size() && progress >= fault_at[next];
  }
  /// The next planned fault: even ones reset every connection, odd ones cut
  /// a connection within `cut_within` bytes of the next replies.
  void inject_next(std::size_t cut_within) {
    if (injected() % 2 == 0) {
      proxy.reset_all();
      ++resets;
    } else {
      proxy.plan().arm_cut(std::uniform_int_distribution<std::size_t>(1, cut_within)(rng));
      ++cuts;
    }
  }

  /// Stops the maintenance; reads `counts` and, for each job of `ids`, how
  /// many results it stored (`results`); stops both clients and the proxy.
  asio::awaitable<void> finish(thoonk::job_queue& q, const std::vector<std::string>& ids) {
    stop_maintenance.emit(asio::cancellation_type::terminal);
    counts = co_await q.async_counts(asio::use_awaitable);
    thoonk::request r;
    for (auto& id : ids) r.push("LLEN", "feed.jobfinished:" + q.name() + std::string(1, '\0') + id);
    auto lens = co_await admin.conn().async_exec(r, asio::use_awaitable);
    for (auto& v : lens) results.push_back(v.integer);
    w.stop();
    admin.stop();
    proxy.stop();
  }
};

}  // namespace

TEST_CASE("faults: job traffic through the proxy while it resets and cuts connections",
          "[faults][proxy][jobs]") {
  const auto& prof = current_profile();
  const int total = prof.jobs / 2;
  const int faults = 2 * prof.proxy_resets;
  proxied_clients pc;
  const std::string name = "faults-proxy-jobs";
  job_history h;
  std::vector<std::int64_t> recoveries;
  run_coro(
      pc.ioc,
      [&]() -> asio::awaitable<void> {
        auto [qa, qw] = co_await pc.open(name);
        // Items of 1 KiB, so that a claim's reply spans several reads and
        // a cut can land inside it.
        std::vector<std::string> items(static_cast<std::size_t>(total), std::string(1024, 'j'));
        const auto ids =
            co_await qa.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
        REQUIRE(ids.size() == static_cast<std::size_t>(total));
        bool stop = false;
        for (int i = 0; i < 8; ++i) asio::co_spawn(pc.ioc, worker(qw, &h, &stop), asio::detached);

        // Each fault once a random share of the jobs is finished, so all of
        // them land while jobs run.
        pc.plan_faults(faults, total);
        const auto t0 = std::chrono::steady_clock::now();
        std::int64_t finishes = 0;
        while (finishes < total && std::chrono::steady_clock::now() - t0 < prof.scenario_limit) {
          co_await sleep_for(
              std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 20)(pc.rng)));
          if (pc.fault_due(finishes)) {
            const auto at = now_ms();
            // A cut somewhere in the next few replies (a claim reply holds
            // at least 1 KiB).
            pc.inject_next(4096);
            const auto seen = h.finish_times.size();
            co_await wait_until([&] { return h.finish_times.size() > seen; }, 10s);
            if (h.finish_times.size() > seen) recoveries.push_back(h.finish_times[seen] - at);
          }
          auto [ec, c] = co_await qa.async_counts(nothrow);
          if (!ec) finishes = c.finishes;
        }
        stop = true;
        co_await wait_until([&] { return h.running == 0; }, 10s);
        co_await pc.finish(qa, ids);
      },
      prof.scenario_limit + 60s);

  const auto [lost, twice] = audit_results(pc.results);
  std::uint64_t double_finishes = 0, resurrected = 0;
  for (const auto& [id, n] : h.ok_finishes) double_finishes += n > 1;
  for (const auto& c : h.claims) {
    auto it = h.finished_at.find(c.id);
    if (it != h.finished_at.end() && c.t > it->second) ++resurrected;
  }
  const std::uint64_t duplicates = h.claims.size() - h.finished_at.size();
  auto& w = pc.w;
  INFO("resets " << pc.resets << ", cuts " << pc.cuts << " (made " << pc.proxy.plan().cuts()
                 << "); claims " << h.claims.size() << " ok, " << h.claim_ops.unknown
                 << " unknown, " << h.claim_ops.failed << " failed; finishes " << h.finish_ops.ok
                 << " ok, " << h.finish_ops.unknown << " unknown, " << h.finish_ops.failed
                 << " refused; reconnects " << w.conn().stats().reconnects << " / subscriber "
                 << w.sub().stats().connection.reconnects);
  CHECK(pc.injected() == faults);
  CHECK(pc.counts.finishes == total);
  CHECK(pc.counts.items == 0);
  CHECK(pc.counts.claimed == 0);
  CHECK(lost == 0);
  CHECK(twice == 0);
  CHECK(double_finishes == 0);
  CHECK(resurrected == 0);
  CHECK(w.conn().stats().reconnects >= static_cast<std::uint64_t>(pc.resets));
  REQUIRE(!recoveries.empty());
  const auto worst = *std::max_element(recoveries.begin(), recoveries.end());
  report({"jobs through the proxy: " + std::to_string(pc.resets) + " resets, " +
              std::to_string(pc.cuts) + " cuts, " + std::to_string(total) + " jobs",
          h.claim_ops.total() + h.finish_ops.total(), lost, duplicates,
          h.claim_ops.unknown + h.finish_ops.unknown,
          "fault → next finish ≤ " + std::to_string(worst) + " ms (lease 500 ms)"});
}

// A runner through the proxy: its rounds, heartbeats and hand-off messages
// lose their replies at random (connections reset, a reply cut in the
// middle), while a direct producer puts jobs one at a time, so the runner
// is often dry and most jobs reach it by hand-off. A hand-off lost with
// the subscriber is given back after the reconnect (the fence); a round's
// claims whose reply was lost lapse with their lease (500 ms) and
// maintenance requeues them. At the end every job is finished exactly once.
TEST_CASE("faults: a runner through the proxy while it resets and cuts connections",
          "[faults][proxy][jobs][run][hand_off]") {
  const auto& prof = current_profile();
  const int total = std::max(200, prof.jobs / 4);
  const int faults = 2 * prof.proxy_resets;
  proxied_clients pc;
  const std::string name = "faults-proxy-runner";
  std::map<std::string, int> started;  // handler starts per job
  thoonk::run_report rep;
  boost::system::error_code run_ec;
  run_coro(
      pc.ioc,
      [&]() -> asio::awaitable<void> {
        auto [qa, qw] = co_await pc.open(name);
        thoonk::run_options ro;
        ro.concurrency = 4;
        ro.worker_ttl = 2s;
        ro.heartbeat_interval = 100ms;
        thoonk::job_coroutine handler =
            [&](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
          ++started[ctx.job().id];
          co_return ctx.job().id;
        };
        bool run_done = false;
        asio::cancellation_signal stop_run;
        qw.async_run(handler, ro,
                     asio::bind_cancellation_slot(
                         stop_run.slot(), [&](boost::system::error_code ec, thoonk::run_report r) {
                           run_ec = ec;
                           rep = std::move(r);
                           run_done = true;
                         }));

        // One put every 1 - 4 ms; a fault after a random share of them.
        pc.plan_faults(faults, total);
        std::vector<std::string> ids;
        for (int i = 0; i < total; ++i) {
          co_await sleep_for(
              std::chrono::milliseconds(std::uniform_int_distribution<int>(1, 4)(pc.rng)));
          auto id = co_await put_item(qa, std::string(512, 'r'));
          ids.push_back(id);
          while (pc.fault_due(i)) pc.inject_next(2048);
        }
        const auto t0 = std::chrono::steady_clock::now();
        for (;;) {
          auto [ec, c] = co_await qa.async_counts(nothrow);
          if (!ec && c.finishes >= total) break;
          if (std::chrono::steady_clock::now() - t0 > prof.scenario_limit) break;
          co_await sleep_for(20ms);
        }
        stop_run.emit(asio::cancellation_type::terminal);
        co_await wait_until([&] { return run_done; }, 20s);
        co_await pc.finish(qa, ids);
      },
      prof.scenario_limit + 60s);

  const auto [lost, twice] = audit_results(pc.results);
  std::uint64_t ran_again = 0;
  for (const auto& [id, n] : started) ran_again += n > 1;
  auto& w = pc.w;
  INFO("resets " << pc.resets << ", cuts " << pc.cuts << " (made " << pc.proxy.plan().cuts()
                 << "); handed off " << rep.handed_off << ", started " << rep.started
                 << ", finished " << rep.finished << ", lost " << rep.lost << ", released "
                 << rep.released << ", run error " << run_ec.message() << "; reconnects "
                 << w.conn().stats().reconnects << " / subscriber "
                 << w.sub().stats().connection.reconnects);
  CHECK(pc.injected() == faults);
  CHECK(!run_ec);
  CHECK(pc.counts.finishes == total);
  CHECK(pc.counts.items == 0);
  CHECK(pc.counts.claimed == 0);
  CHECK(pc.results.size() == static_cast<std::size_t>(total));
  CHECK(lost == 0);
  CHECK(twice == 0);
  CHECK(rep.handed_off > 0);
  CHECK(w.sub().stats().connection.reconnects >= 1);
  report({"runner through the proxy: " + std::to_string(pc.resets) + " resets, " +
              std::to_string(pc.cuts) + " cuts, " + std::to_string(total) + " jobs",
          rep.started, lost, ran_again, 0,
          std::to_string(rep.handed_off) + " handed off, " + std::to_string(rep.released) +
              " given back"});
}
