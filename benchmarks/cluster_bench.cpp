// Job queues on a local Redis Cluster: throughput per shard and in total,
// and server CPU per job per shard (docs/cluster.md, docs/benchmarks.md).
//
//   cluster_bench [--queues N] [--workers W] [--seconds S]
//
// Starts a private cluster of 3 primaries and 3 replicas on loopback
// (test/support/redis_cluster.hpp; stopped by pid at the end), creates N job
// queues (default 6) whose names spread evenly over the 3 primaries, and
// runs W coroutines per queue (default 16) that each put a job, claim one
// and finish it, for S seconds (default 5), all on one client in cluster
// mode. Prints one JSON document:
//   shards   per primary: queues, jobs finished, jobs/s, server CPU seconds
//            (INFO cpu, user + sys, before/after) and CPU microseconds per job
//   total    jobs/s over all shards, client CPU microseconds per job
// On a machine with few cores the primaries, their replicas and the client
// share them, so the throughput is bounded by the machine; the server CPU
// per job is the figure that carries to bigger machines.
#include "support/bench_support.hpp"

#include "support/redis_cluster.hpp"

#include "connection/cluster.hpp"

#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <map>
#include <sstream>

#include <sys/resource.h>

namespace asio = boost::asio;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

namespace {

double own_cpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double info_number(const std::string& info, const std::string& field) {
  auto p = info.find(field + ":");
  if (p == std::string::npos) return 0;
  return std::strtod(info.c_str() + p + field.size() + 1, nullptr);
}

double server_cpu(const thoonk::test::redis_cluster& cl, unsigned short port) {
  auto info = cl.cli(port, {"INFO", "cpu"});
  return info_number(info, "used_cpu_user") + info_number(info, "used_cpu_sys");
}

struct queue_run {
  std::string name;
  unsigned short port = 0;
  std::uint64_t finished = 0, errors = 0;
};

asio::awaitable<void> worker(thoonk::job_queue* qp, queue_run* rp, steady::time_point until) {
  auto& q = *qp;
  auto& r = *rp;
  const std::string payload(70, 'p');
  while (steady::now() < until) {
    thoonk::put_options po;
    std::string item = payload;
    auto [ec, id] = co_await q.async_put(std::move(item), po, nothrow);
    if (ec) {
      ++r.errors;
      continue;
    }
    auto [cec, job] = co_await q.async_claim(1s, nothrow);
    if (cec) {
      ++r.errors;
      continue;
    }
    auto [fec] = co_await q.async_finish(job, nothrow);
    if (fec) ++r.errors;
    else ++r.finished;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int queues = 6, workers = 16, seconds = 5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--queues")) queues = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--workers")) workers = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--seconds")) seconds = std::atoi(argv[i + 1]);
  }
  thoonk::test::redis_cluster cl;
  const auto any = cl.any_live_port();
  std::vector<unsigned short> primaries;
  for (const auto& n : cl.nodes(any))
    if (n.primary) primaries.push_back(n.port);
  std::sort(primaries.begin(), primaries.end());

  // Names spread round robin over the primaries.
  std::vector<queue_run> runs;
  for (int i = 0, k = 0; static_cast<int>(runs.size()) < queues; ++k) {
    auto name = "bench-q" + std::to_string(k);
    auto port = cl.primary_of(thoonk::detail::hash_slot(name), any);
    if (port != primaries[static_cast<std::size_t>(i) % primaries.size()]) continue;
    runs.push_back({name, port});
    ++i;
  }

  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), cl.client_config());
  std::map<unsigned short, double> cpu_before, cpu_after;
  double own_before = 0, own_after = 0, elapsed = 0;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await c.async_connect(asio::use_awaitable);
        std::vector<thoonk::job_queue> qs;
        for (auto& r : runs) {
          auto q = co_await thoonk::job_queue::async_create_or_open(c, r.name, asio::use_awaitable);
          qs.push_back(std::move(q));
        }
        for (auto p : primaries) cpu_before[p] = server_cpu(cl, p);
        own_before = own_cpu();
        const auto start = steady::now();
        const auto until = start + std::chrono::seconds(seconds);
        int left = queues * workers;
        asio::steady_timer done(ioc, steady::time_point::max());
        for (std::size_t i = 0; i < runs.size(); ++i)
          for (int w = 0; w < workers; ++w)
            asio::co_spawn(ioc, worker(&qs[i], &runs[i], until), [&](std::exception_ptr) {
              if (--left == 0) done.cancel();
            });
        auto [ec] = co_await done.async_wait(nothrow);
        (void)ec;
        elapsed = std::chrono::duration<double>(steady::now() - start).count();
        own_after = own_cpu();
        for (auto p : primaries) cpu_after[p] = server_cpu(cl, p);
        c.stop();
      },
      asio::detached);
  ioc.run_for(std::chrono::seconds(seconds + 120));

  std::ostringstream out;
  out << "{\n  \"queues\": " << queues << ", \"workers_per_queue\": " << workers
      << ", \"seconds\": " << thoonk::bench::num(elapsed) << ",\n  \"shards\": [\n";
  std::uint64_t total = 0, errors = 0;
  for (std::size_t i = 0; i < primaries.size(); ++i) {
    auto p = primaries[i];
    std::uint64_t jobs = 0;
    int nq = 0;
    for (const auto& r : runs)
      if (r.port == p) {
        jobs += r.finished;
        errors += r.errors;
        ++nq;
      }
    total += jobs;
    const double cpu = cpu_after[p] - cpu_before[p];
    out << "    {\"port\": " << p << ", \"queues\": " << nq << ", \"jobs\": " << jobs
        << ", \"jobs_per_s\": " << thoonk::bench::num(elapsed > 0 ? jobs / elapsed : 0)
        << ", \"server_cpu_s\": " << thoonk::bench::num(cpu) << ", \"server_cpu_us_per_job\": "
        << thoonk::bench::num(jobs ? cpu * 1e6 / static_cast<double>(jobs) : 0) << "}"
        << (i + 1 < primaries.size() ? "," : "") << "\n";
  }
  out << "  ],\n  \"total\": {\"jobs\": " << total << ", \"errors\": " << errors
      << ", \"jobs_per_s\": " << thoonk::bench::num(elapsed > 0 ? total / elapsed : 0)
      << ", \"client_cpu_us_per_job\": "
      << thoonk::bench::num(total ? (own_after - own_before) * 1e6 / static_cast<double>(total) : 0)
      << "}\n}\n";
  std::cout << out.str();
  return 0;
}
