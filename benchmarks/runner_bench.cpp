// The worker runner (job_queue::run) against raw claim/finish loops, end to
// end (put, claim, no-op handler, finish), at concurrency 1, 16 and 64, the
// two alternating round by round in one run, with redis-benchmark's SET
// ceiling from the same server.
//
//   runner_bench [--quick] [--rounds N] [--concurrency C] [--only raw|runner]
//
// Uses THOONK_REDIS_URL, or starts a throwaway redis-server on a free
// 127.0.0.1 port and stops it (by pid) at the end. Prints one JSON document:
// per concurrency, every round's jobs/s for both and their medians, the
// runner's ratio to raw, the server CPU per job (µs) of each and the
// time spent inside scripts per job (µs, INFO commandstats). Raw
// means N coroutines each looping claim() then finish() (two round trips a
// job, batched by the queue object); the runner finishes and claims in one
// script call per round. Bounded: every run has a job count and a time
// limit.
#include "support/bench_support.hpp"
#include "support/job_bench_support.hpp"

#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>

#include <algorithm>
#include <cstring>
#include <iostream>
#include <sstream>

#include <sys/resource.h>
#include <string>

namespace asio = boost::asio;
namespace bench = thoonk::bench;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {

const std::string payload70(70, 'p');

struct result {
  double jobs_per_s = 0;
  double server_cpu_us_per_job = 0;
  double script_us_per_job = 0;      // inside EVALSHA (INFO commandstats)
  double script_calls_per_job = 0;   // EVALSHA calls (the puts' included)
  double client_cpu_us_per_job = 0;  // this process (producer and consumers)
  bool complete = false;
};

// CPU seconds this process has used (user + system).
double process_cpu_seconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec / 1e6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

asio::awaitable<void> pause_for(thoonk::client& c, std::chrono::milliseconds d) {
  asio::steady_timer t(c.get_executor(), d);
  co_await t.async_wait(asio::use_awaitable);
}

// One end-to-end run: the producer puts `jobs` while the consumers take
// them; timed until the last finish is acknowledged.
result one_run(const thoonk::config& cfg, bool use_runner, int concurrency, long jobs) {
  result r;
  bench::run_client(
      cfg,
      [&](thoonk::client& c) -> asio::awaitable<void> {
        auto name = bench::unique(use_runner ? "bench-runner" : "bench-raw");
        co_await bench::create(c, name, {});
        auto q = co_await thoonk::job_queue::async_open(c, name, asio::use_awaitable);
        const double scpu0 = co_await bench::server_cpu(c);
        const auto scripts0 = co_await bench::evalsha_stats(c);
        const double ccpu0 = process_cpu_seconds();
        const auto t0 = steady::now();
        asio::co_spawn(c.get_executor(), bench::put_in_chunks(q, jobs, payload70), asio::detached);
        long finished = 0;
        if (use_runner) {
          long handled = 0;
          thoonk::job_coroutine noop =
              [&handled](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
            ++handled;
            co_return std::nullopt;
          };
          thoonk::run_options o;
          o.concurrency = static_cast<std::size_t>(concurrency);
          asio::cancellation_signal stop;
          bool done = false;
          thoonk::run_report rep;
          q.async_run(noop, o,
                      asio::bind_cancellation_slot(
                          stop.slot(), [&](boost::system::error_code, thoonk::run_report x) {
                            rep = std::move(x);
                            done = true;
                          }));
          while (handled < jobs && steady::now() - t0 < 60s) co_await pause_for(c, 1ms);
          stop.emit(asio::cancellation_type::terminal);
          while (!done) co_await pause_for(c, 1ms);
          finished = static_cast<long>(rep.finished);
        } else {
          int live = concurrency;
          for (int i = 0; i < concurrency; ++i)
            asio::co_spawn(c.get_executor(), bench::claim_finish_loop(q, &finished, jobs, &live),
                           asio::detached);
          while (live > 0 && steady::now() - t0 < 60s) co_await pause_for(c, 1ms);
          while (live > 0) co_await pause_for(c, 10ms);
        }
        const double secs = bench::seconds_since(t0);
        const double ccpu = process_cpu_seconds() - ccpu0;
        r.complete = finished >= jobs;
        r.jobs_per_s = static_cast<double>(finished) / secs;
        if (finished > 0) {
          r.server_cpu_us_per_job =
              (co_await bench::server_cpu(c) - scpu0) * 1e6 / static_cast<double>(finished);
          const auto scripts1 = co_await bench::evalsha_stats(c);
          r.script_us_per_job = (scripts1.usec - scripts0.usec) / static_cast<double>(finished);
          r.script_calls_per_job =
              (scripts1.calls - scripts0.calls) / static_cast<double>(finished);
          r.client_cpu_us_per_job = ccpu * 1e6 / static_cast<double>(finished);
        }
        co_await bench::drop(c, name);
      },
      120s);
  return r;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

}  // namespace

using bench::num;

int main(int argc, char** argv) {
  bool quick = false;
  int rounds = 3;
  int only = 0;           // --concurrency C: that row alone
  std::string only_mode;  // --only raw|runner: one of the two (for profiling)
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--quick") == 0) quick = true;
    else if (std::strcmp(argv[i], "--rounds") == 0 && i + 1 < argc)
      rounds = std::max(1, std::atoi(argv[++i]));
    else if (std::strcmp(argv[i], "--concurrency") == 0 && i + 1 < argc)
      only = std::atoi(argv[++i]);
    else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) only_mode = argv[++i];
  }
  bench::server srv;
  auto cfg = srv.cfg();
  cfg.client_name = "runner_bench";

  std::ostringstream o;
  o.precision(6);
  o << "{\n  \"benchmark\": \"runner_bench\",\n  \"rounds\": " << rounds << ",\n  \"runs\": [";
  bool first = true;
  for (auto [conc, n] :
       {std::pair{1, quick ? 3000L : 10000L}, std::pair{16, quick ? 20000L : 60000L},
        std::pair{64, quick ? 40000L : 150000L}}) {
    if (only != 0 && conc != only) continue;
    std::vector<double> raw, run, raw_cpu, run_cpu, raw_script, run_script, raw_calls, run_calls,
        raw_ccpu, run_ccpu;
    bool complete = true;
    for (int k = 0; k < rounds; ++k) {
      // Alternate which goes first, so drift hits both alike.
      for (bool use_runner :
           k % 2 ? std::vector<bool>{true, false} : std::vector<bool>{false, true}) {
        if (!only_mode.empty() && use_runner != (only_mode == "runner")) continue;
        auto r = one_run(cfg, use_runner, conc, n);
        complete = complete && r.complete;
        (use_runner ? run : raw).push_back(r.jobs_per_s);
        (use_runner ? run_cpu : raw_cpu).push_back(r.server_cpu_us_per_job);
        (use_runner ? run_script : raw_script).push_back(r.script_us_per_job);
        (use_runner ? run_calls : raw_calls).push_back(r.script_calls_per_job);
        (use_runner ? run_ccpu : raw_ccpu).push_back(r.client_cpu_us_per_job);
      }
    }
    auto list = [](const std::vector<double>& v) {
      std::ostringstream s;
      s << "[";
      for (std::size_t i = 0; i < v.size(); ++i) s << (i ? ", " : "") << v[i];
      s << "]";
      return s.str();
    };
    const double mr = median(raw), mu = median(run);
    o << (first ? "" : ",") << "\n    {\"concurrency\": " << conc << ", \"jobs\": " << n
      << ", \"complete\": " << (complete ? "true" : "false")
      << ", \"raw_jobs_per_s\": " << list(raw) << ", \"runner_jobs_per_s\": " << list(run)
      << ", \"raw_median\": " << mr << ", \"runner_median\": " << mu
      << ", \"runner_vs_raw\": " << (mr > 0 ? mu / mr : 0)
      << ", \"raw_server_cpu_us_per_job\": " << median(raw_cpu)
      << ", \"runner_server_cpu_us_per_job\": " << median(run_cpu)
      << ", \"raw_script_us_per_job\": " << median(raw_script)
      << ", \"runner_script_us_per_job\": " << median(run_script)
      << ", \"raw_script_calls_per_job\": " << median(raw_calls)
      << ", \"runner_script_calls_per_job\": " << median(run_calls)
      << ", \"raw_client_cpu_us_per_job\": " << median(raw_ccpu)
      << ", \"runner_client_cpu_us_per_job\": " << median(run_ccpu) << "}";
    first = false;
  }
  auto set_rps = bench::redis_benchmark_rps(
      srv, {"-P", "64", "-c", "1", "-n", quick ? "200000" : "1000000", "-t", "set"});
  o << "\n  ],\n  \"ceiling_redis_benchmark_P64_c1\": {\"set_per_s\": " << num(set_rps) << "}\n}\n";
  std::cout << o.str();
  return 0;
}
