// Job queue throughput, latency and memory, with the
// server's own ceiling for the same scripts measured in the same run.
//
//   job_bench [--quick]
//   job_bench --e2e WORKERS JOBS [PREFETCH]  (one end-to-end run, profiling)
//   job_bench --latency SECONDS      (only the put -> claim latency phase)
//
// Uses THOONK_REDIS_URL, or starts a throwaway redis-server on a free
// 127.0.0.1 port and stops it (by pid) at the end. Prints one JSON document:
//   end_to_end      jobs/s for put + claim + finish with 1, 16, 64 workers
//                   (one producer with put_many concurrently; one client),
//                   default options; end_to_end_prefetch: the same with
//                   job_queue_options::prefetch = 256 (claim ahead)
//   enqueue         puts/s: one by one awaited, one by one from 64
//                   coroutines (coalesced), put_many of 1000
//   latency         put -> claim at 1,000 jobs/s, p50/p99 ms (producer and
//                   workers on different clients: the wake-up path)
//   memory          Redis bytes per waiting job, 100,000 jobs of 70 bytes
//                   (INFO memory before/after), default and published=1,
//                   plus the contract's plain put with UUID ids for scale
//   ceiling         redis-benchmark -P 64 -c 1 EVALSHA of the put and claim
//                   scripts (and SET), calls/s and jobs/s, with ratios
// Bounded: every phase has a job count and a time limit.
#include "support/bench_names.hpp"
#include "support/bench_support.hpp"
#include "support/job_bench_support.hpp"

#include "thoonk_lua_scripts.hpp"

#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <random>
#include <sstream>

#include <sys/resource.h>

namespace {

const std::string payload70(70, 'p');
using bench::create;
using bench::drop;
using bench::job_keys;
using bench::own_cpu;
using bench::run;
using bench::run_client;
using bench::server_cpu;
using bench::unique;
using bench::used_memory;

// Creates a job queue named after `prefix` (a unique name) and opens it
// on `c` with `o`.
asio::awaitable<thoonk::job_queue> new_queue(thoonk::client& c, const std::string& prefix,
                                             thoonk::job_queue_options o = {}) {
  auto name = unique(prefix);
  co_await create(c, name, {});
  auto q = co_await thoonk::job_queue::async_open(c, name, std::move(o), asio::use_awaitable);
  co_return q;
}

// One put_many of 1000 jobs of 70 bytes.
asio::awaitable<void> put_thousand(thoonk::job_queue& q) {
  std::vector<std::string> items(1000, payload70);
  co_await q.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
}

// ---------------------------------------------------------------------------
struct e2e_result {
  int workers;
  long jobs;
  double seconds;
  double jobs_per_s;
  bool complete;
  double server_cpu_us_per_job = 0;
  double client_cpu_us_per_job = 0;
};

e2e_result end_to_end(const thoonk::config& cfg, int workers, long jobs, std::size_t prefetch) {
  e2e_result r{workers, jobs, 0, 0, false};
  run_client(
      cfg,
      [&](thoonk::client& c) -> asio::awaitable<void> {
        thoonk::job_queue_options qo;
        qo.prefetch = prefetch;
        auto q = co_await new_queue(c, "bench-e2e", qo);
        long finished = 0;
        int live = workers;
        const double scpu0 = co_await server_cpu(c);
        const double ccpu0 = own_cpu();
        auto t0 = steady::now();
        asio::co_spawn(c.get_executor(), bench::put_in_chunks(q, jobs, payload70), asio::detached);
        for (int i = 0; i < workers; ++i)
          asio::co_spawn(c.get_executor(), bench::claim_finish_loop(q, &finished, jobs, &live),
                         asio::detached);
        asio::steady_timer t(c.get_executor());
        while (live > 0 && steady::now() - t0 < 60s) {
          t.expires_after(1ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        r.seconds = bench::seconds_since(t0);
        r.complete = finished >= jobs;
        r.jobs_per_s = static_cast<double>(finished) / r.seconds;
        r.client_cpu_us_per_job = (own_cpu() - ccpu0) * 1e6 / static_cast<double>(finished);
        r.server_cpu_us_per_job =
            (co_await server_cpu(c) - scpu0) * 1e6 / static_cast<double>(finished);
        // Let the workers' last claims time out before the queue goes.
        while (live > 0) {
          t.expires_after(10ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        co_await drop(c, q.name());
      },
      90s);
  return r;
}

// ---------------------------------------------------------------------------
struct enqueue_result {
  double sequential_per_s = 0;
  double concurrent_per_s = 0;
  double batched_per_s = 0;
};

enqueue_result enqueue(const thoonk::config& cfg, long n_seq, long n_conc, long n_batch) {
  enqueue_result r;
  run_client(
      cfg,
      [&](thoonk::client& c) -> asio::awaitable<void> {
        auto q = co_await new_queue(c, "bench-put");
        // One by one, each awaited.
        auto t0 = steady::now();
        for (long i = 0; i < n_seq; ++i) co_await q.async_put(payload70, asio::use_awaitable);
        r.sequential_per_s = static_cast<double>(n_seq) / bench::seconds_since(t0);
        // One by one from 64 coroutines (coalesced into shared script calls).
        long left = n_conc;
        int live = 64;
        auto producer = [](thoonk::job_queue q, long* left, int* live) -> asio::awaitable<void> {
          while (*left > 0) {
            --*left;
            co_await q.async_put(payload70, asio::use_awaitable);
          }
          --*live;
        };
        t0 = steady::now();
        for (int i = 0; i < 64; ++i)
          asio::co_spawn(c.get_executor(), producer(q, &left, &live), asio::detached);
        asio::steady_timer t(c.get_executor());
        while (live > 0) {
          t.expires_after(1ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        r.concurrent_per_s = static_cast<double>(n_conc) / bench::seconds_since(t0);
        // put_many, 1000 per call.
        t0 = steady::now();
        for (long done = 0; done < n_batch; done += 1000) co_await put_thousand(q);
        r.batched_per_s = static_cast<double>(n_batch) / bench::seconds_since(t0);
        co_await drop(c, q.name());
      },
      120s);
  return r;
}

// ---------------------------------------------------------------------------
struct latency_result {
  long samples = 0;
  double p50_ms = 0, p99_ms = 0, max_ms = 0;
  double rate = 0;
};

latency_result latency(const thoonk::config& cfg, int rate, std::chrono::seconds duration) {
  latency_result r;
  std::vector<double> lat;
  run(
      [&](asio::io_context& ioc) -> asio::awaitable<void> {
        thoonk::client prod(ioc.get_executor(), cfg);
        thoonk::client work(ioc.get_executor(), cfg);
        co_await prod.async_connect(asio::use_awaitable);
        co_await work.async_connect(asio::use_awaitable);
        auto name = unique("bench-lat");
        co_await create(prod, name, {});
        thoonk::job_queue pq(prod, name);
        auto wq = co_await thoonk::job_queue::async_open(work, name, asio::use_awaitable);
        const long total = rate * duration.count();
        bool stop = false;
        int live = 4;
        auto worker = [](thoonk::job_queue q, std::vector<double>* lat, bool* stop,
                         int* live) -> asio::awaitable<void> {
          while (!*stop) {
            auto [ec, j] = co_await q.async_claim(200ms, nothrow);
            if (ec) continue;
            auto now = steady::now().time_since_epoch().count();
            auto put_at = std::stoll(j.item);
            lat->push_back(static_cast<double>(now - put_at) / 1e6);
            co_await q.async_finish(j, nothrow);
          }
          --*live;
        };
        for (int i = 0; i < 4; ++i)
          asio::co_spawn(ioc, worker(wq, &lat, &stop, &live), asio::detached);
        asio::steady_timer t(ioc);
        t.expires_after(100ms);
        co_await t.async_wait(asio::use_awaitable);
        auto t0 = steady::now();
        const auto step = std::chrono::nanoseconds(1000000000LL / rate);
        for (long i = 0; i < total; ++i) {
          t.expires_at(t0 + step * i);
          co_await t.async_wait(asio::use_awaitable);
          auto stamp = std::to_string(steady::now().time_since_epoch().count());
          // Not awaited one after the other: the pace is the timer's.
          pq.async_put(std::move(stamp), asio::detached);
        }
        r.rate = static_cast<double>(total) / bench::seconds_since(t0);
        t.expires_after(500ms);
        co_await t.async_wait(asio::use_awaitable);
        stop = true;
        while (live > 0) {
          t.expires_after(10ms);
          co_await t.async_wait(asio::use_awaitable);
        }
        co_await drop(prod, name);
      },
      duration + 30s);
  r.samples = static_cast<long>(lat.size());
  r.p50_ms = bench::percentile(lat, 0.50);
  r.p99_ms = bench::percentile(lat, 0.99);
  r.max_ms = lat.empty() ? 0 : lat.back();
  return r;
}

// ---------------------------------------------------------------------------
struct memory_result {
  double default_bytes = 0;
  double published_bytes = 0;
  double contract_uuid_bytes = 0;
};

memory_result memory(const thoonk::config& cfg, long n) {
  memory_result r;
  run_client(
      cfg,
      [&](thoonk::client& c) -> asio::awaitable<void> {
        // Warm up: scripts loaded, buffers grown.
        {
          auto q = co_await new_queue(c, "bench-mem-warm");
          co_await put_thousand(q);
          co_await drop(c, q.name());
        }
        // Nothing is deleted until every figure is taken (a lazily freed
        // queue would shrink used_memory during the next measurement).
        std::vector<std::string> made;
        for (int mode = 0; mode < 2; ++mode) {
          auto name = unique("bench-mem");
          made.push_back(name);
          thoonk::feed_config fc;
          if (mode == 1) fc.emplace_back("published", "1");
          co_await create(c, name, std::move(fc));
          thoonk::job_queue q(c, name);
          auto before = co_await used_memory(c);
          for (long done = 0; done < n; done += 1000) co_await put_thousand(q);
          auto after = co_await used_memory(c);
          (mode == 0 ? r.default_bytes : r.published_bytes) =
              static_cast<double>(after - before) / static_cast<double>(n);
        }
        // The contract's own put (MULTI LPUSH/INCR/HSET/ZADD) with UUID ids.
        {
          auto name = unique("bench-mem-plain");
          made.push_back(name);
          co_await create(c, name, {});
          auto before = co_await used_memory(c);
          std::mt19937_64 rng{42};
          for (long done = 0; done < n; done += 1000) {
            thoonk::request req;
            for (int i = 0; i < 1000; ++i) {
              char id[40];
              std::snprintf(
                  id, sizeof id, "%08llx-%04llx-4%03llx-a%03llx-%012llx",
                  (unsigned long long)(rng() & 0xffffffff), (unsigned long long)(rng() & 0xffff),
                  (unsigned long long)(rng() & 0xfff), (unsigned long long)(rng() & 0xfff),
                  (unsigned long long)(rng() & 0xffffffffffffULL));
              req.push("MULTI");
              req.push("LPUSH", "feed.ids:" + name, id);
              req.push("INCR", "feed.publishes:" + name);
              req.push("HSET", "feed.items:" + name, id, payload70);
              req.push("ZADD", "feed.published:" + name, "1700000000000", id);
              req.push("EXEC");
            }
            co_await c.conn().async_exec(req, asio::use_awaitable);
          }
          auto after = co_await used_memory(c);
          r.contract_uuid_bytes = static_cast<double>(after - before) / static_cast<double>(n);
        }
        for (auto& name : made) co_await drop(c, name);
      },
      120s);
  return r;
}

// ---------------------------------------------------------------------------
struct ceiling_result {
  std::optional<double> set_rps, put1_calls, claim1_calls, claim64_calls;
};

ceiling_result ceilings(const bench::server& srv, const thoonk::config& cfg, bool quick) {
  ceiling_result r;
  r.set_rps = bench::redis_benchmark_rps(
      srv, {"-P", "64", "-c", "1", "-n", quick ? "200000" : "1000000", "-t", "set"});
  const long n_put = quick ? 50000 : 200000;
  const long n_claim64 = quick ? 1000 : 4000;
  auto name = unique("bench-ceiling");
  std::string put_sha, claim_sha;
  run_client(
      cfg,
      [&](thoonk::client& c) -> asio::awaitable<void> {
        co_await create(c, name, {});
        thoonk::request req;
        req.push("SCRIPT", "LOAD", thoonk::detail::scripts::jobs_put().source());
        req.push("SCRIPT", "LOAD", thoonk::detail::scripts::jobs_claim().source());
        auto resp = co_await c.conn().async_exec(req, asio::use_awaitable);
        put_sha = resp[0].str;
        claim_sha = resp[1].str;
      },
      30s);
  const std::string now = "1700000000000";
  auto keys = job_keys(name);
  // put, 1 job per call (this also fills the queue for claim-1).
  // n calls of a job script (sha) with `args` after the keys, pipelined 64
  // deep on one connection.
  auto script_rps = [&](const std::string& sha, long n, std::vector<std::string> args) {
    std::vector<std::string> a{"-P",      "64", "-c",
                               "1",       "-n", std::to_string(n),
                               "EVALSHA", sha,  std::to_string(keys.size())};
    a.insert(a.end(), keys.begin(), keys.end());
    a.insert(a.end(), args.begin(), args.end());
    return bench::redis_benchmark_rps(srv, a);
  };
  r.put1_calls = script_rps(put_sha, n_put, {now, "0", "feed.wake:" + name, payload70});
  // claim, 1 job per call, on the queue just filled.
  r.claim1_calls = script_rps(claim_sha, n_put, {now, "1", "feed.wake:" + name});
  // claim, 64 jobs per call: fill first.
  run_client(
      cfg,
      [&](thoonk::client& c) -> asio::awaitable<void> {
        thoonk::job_queue q(c, name);
        for (long done = 0; done < n_claim64 * 64; done += 1000) {
          std::vector<std::string> items(1000, payload70);
          co_await q.async_put_many(std::move(items), thoonk::priority::normal,
                                    asio::use_awaitable);
        }
      },
      120s);
  r.claim64_calls = script_rps(claim_sha, n_claim64, {now, "64", "feed.wake:" + name});
  run_client(
      cfg, [&](thoonk::client& c) -> asio::awaitable<void> { co_await drop(c, name); }, 30s);
  return r;
}

}  // namespace

using bench::num;

int main(int argc, char** argv) {
  bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  bench::server srv;
  auto cfg = srv.cfg();
  cfg.client_name = "job_bench";
  // --e2e WORKERS JOBS [PREFETCH]: only that end-to-end run (profiling).
  if (argc > 3 && std::strcmp(argv[1], "--e2e") == 0) {
    const std::size_t prefetch = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 0;
    auto r = end_to_end(cfg, std::atoi(argv[2]), std::atol(argv[3]), prefetch);
    std::cout << "{\"workers\": " << r.workers << ", \"jobs\": " << r.jobs
              << ", \"seconds\": " << r.seconds << ", \"jobs_per_s\": " << r.jobs_per_s
              << ", \"server_cpu_us_per_job\": " << r.server_cpu_us_per_job
              << ", \"client_cpu_us_per_job\": " << r.client_cpu_us_per_job << "}\n";
    return 0;
  }

  // --latency SECONDS: only the put -> claim latency phase.
  if (argc > 2 && std::strcmp(argv[1], "--latency") == 0) {
    auto l = latency(cfg, 1000, std::chrono::seconds(std::atoi(argv[2])));
    std::cout << "{\"rate_per_s\": " << l.rate << ", \"samples\": " << l.samples
              << ", \"p50_ms\": " << l.p50_ms << ", \"p99_ms\": " << l.p99_ms
              << ", \"max_ms\": " << l.max_ms << "}\n";
    return 0;
  }
  constexpr std::size_t bench_prefetch = 256;
  std::vector<e2e_result> e2e, e2e_pf;
  for (auto [w, n] : {std::pair{1, quick ? 5000L : 20000L}, std::pair{16, quick ? 20000L : 100000L},
                      std::pair{64, quick ? 50000L : 200000L}}) {
    e2e.push_back(end_to_end(cfg, w, n, 0));
    e2e_pf.push_back(end_to_end(cfg, w, n, bench_prefetch));
  }
  auto enq = enqueue(cfg, quick ? 5000 : 20000, quick ? 20000 : 100000, quick ? 50000 : 200000);
  auto lat = latency(cfg, 1000, quick ? 2s : 5s);
  auto mem = memory(cfg, 100000);
  auto ceil = ceilings(srv, cfg, quick);

  const double e2e64 = e2e.back().jobs_per_s;
  const double e2e64_pf = e2e_pf.back().jobs_per_s;
  std::ostringstream o;
  o.precision(6);
  o << "{\n  \"benchmark\": \"job_bench\",\n  \"server\": \"" << bench::json_escape(srv.host())
    << ":" << srv.port() << "\",\n";
  auto e2e_list = [&](const char* key, const std::vector<e2e_result>& runs) {
    o << "  \"" << key << "\": [";
    for (std::size_t i = 0; i < runs.size(); ++i) {
      const auto& r = runs[i];
      o << (i ? "," : "") << "\n    {\"workers\": " << r.workers << ", \"jobs\": " << r.jobs
        << ", \"seconds\": " << r.seconds << ", \"jobs_per_s\": " << r.jobs_per_s
        << ", \"complete\": " << (r.complete ? "true" : "false")
        << ", \"server_cpu_us_per_job\": " << r.server_cpu_us_per_job
        << ", \"client_cpu_us_per_job\": " << r.client_cpu_us_per_job << "}";
    }
    o << "\n  ],\n";
  };
  e2e_list("end_to_end", e2e);
  o << "  \"prefetch\": " << bench_prefetch << ",\n";
  e2e_list("end_to_end_prefetch", e2e_pf);
  o << "  \"enqueue\": {\"one_by_one_awaited_per_s\": " << enq.sequential_per_s
    << ", \"one_by_one_64_coroutines_per_s\": " << enq.concurrent_per_s
    << ", \"put_many_1000_per_s\": " << enq.batched_per_s << "},\n";
  o << "  \"latency_put_to_claim\": {\"rate_per_s\": " << lat.rate
    << ", \"samples\": " << lat.samples << ", \"p50_ms\": " << lat.p50_ms
    << ", \"p99_ms\": " << lat.p99_ms << ", \"max_ms\": " << lat.max_ms << "},\n";
  o << "  \"memory_bytes_per_waiting_job\": {\"payload_bytes\": 70, \"jobs\": 100000, \"default\": "
    << mem.default_bytes << ", \"published_1\": " << mem.published_bytes
    << ", \"contract_plain_put_uuid_ids\": " << mem.contract_uuid_bytes << "},\n";
  o << "  \"ceiling_redis_benchmark_P64_c1\": {\"set_per_s\": " << num(ceil.set_rps)
    << ", \"put_script_1_job_calls_per_s\": " << num(ceil.put1_calls)
    << ", \"claim_script_1_job_calls_per_s\": " << num(ceil.claim1_calls)
    << ", \"claim_script_64_jobs_calls_per_s\": " << num(ceil.claim64_calls)
    << ", \"claim_script_64_jobs_jobs_per_s\": "
    << num(ceil.claim64_calls ? std::optional<double>(*ceil.claim64_calls * 64) : std::nullopt)
    << "},\n";
  auto ratio = [&](std::optional<double> c) {
    return c && *c > 0 ? num(e2e64 / *c) : std::string("null");
  };
  o << "  \"ratios\": {\"e2e_64_workers_vs_claim_script_1_job_ceiling\": "
    << ratio(ceil.claim1_calls)
    << ", \"e2e_64_workers_vs_put_script_1_job_ceiling\": " << ratio(ceil.put1_calls)
    << ", \"e2e_64_workers_vs_claim_script_64_jobs_ceiling\": "
    << ratio(ceil.claim64_calls ? std::optional<double>(*ceil.claim64_calls * 64) : std::nullopt)
    << ", \"e2e_64_workers_vs_set_P64\": " << ratio(ceil.set_rps)
    << ", \"e2e_prefetch_64_workers_vs_claim_script_1_job_ceiling\": "
    << (ceil.claim1_calls && *ceil.claim1_calls > 0 ? num(e2e64_pf / *ceil.claim1_calls)
                                                    : std::string("null"))
    << "},\n";
  o << "  \"targets\": {\"e2e_64_workers_jobs_per_s\": 40000, \"memory_bytes_per_waiting_job\": "
       "220}\n}\n";
  std::cout << o.str();
  return 0;
}
