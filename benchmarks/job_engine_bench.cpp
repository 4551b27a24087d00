// The job engine's costs (docs/jobs.md §9): scheduled puts, promotion of
// due jobs, fail-and-retry throughput, and Redis memory per job by kind,
// with the server's ceiling (redis-benchmark) in the same run.
//
//   job_engine_bench [--quick]
//
// Uses THOONK_REDIS_URL, or starts a throwaway redis-server on a free
// 127.0.0.1 port and stops it (by pid) at the end. Prints one JSON document:
//   scheduled_put       puts/s of put(item, {run_at}) from 64 coroutines
//                       (one script call per put: puts with options are
//                       not batched) and, in the same run, plain put()
//   promotion           N jobs due at once: maintain() promotion rate, and
//                       the slowest script call (SLOWLOG) while it ran
//   claim_due           N due scheduled jobs claimed and finished by 64
//                       workers (promoted by the claims), jobs/s, beside a
//                       plain backlog of N claimed and finished the same way
//   fail_retry          64 workers: claim, fail (retry at once), claim
//                       again, finish: jobs/s, beside claim + finish
//   memory              Redis bytes per job, 100,000 jobs with a 70-byte
//                       payload: plain put, put with options and no id or
//                       run_at, scheduled, explicit id, and a held put
//   ceiling             redis-benchmark -P 64 -c 1: SET, EVALSHA of the
//                       put-with-options script for one job
// Bounded: every phase has a job count and a time limit.
#include "support/bench_names.hpp"
#include "support/bench_support.hpp"
#include "support/job_bench_support.hpp"

#include "thoonk_lua_scripts.hpp"

#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>

#include <cstring>
#include <iostream>
#include <sstream>

namespace {

const std::string payload70(70, 'p');

// Waits until the server has freed what deleted queues held (DEL of a
// big key may free it in the background), so a memory figure taken next
// is not lowered by it.
asio::awaitable<void> settle_memory(thoonk::client& c) {
  for (int i = 0; i < 500; ++i) {
    if (co_await bench::info_field(c, "memory", "lazyfree_pending_objects") == 0) break;
    asio::steady_timer t(c.get_executor(), std::chrono::milliseconds(10));
    co_await t.async_wait(asio::use_awaitable);
  }
}

// Makes every scheduled job of queue `name` due at once (its score 1).
asio::awaitable<void> make_due(thoonk::client& c, const std::string& name) {
  thoonk::request req;
  const std::string lua =
      "local m = redis.call('ZRANGE', KEYS[1], 0, -1) "
      "for i = 1, #m do redis.call('ZADD', KEYS[1], 1, m[i]) end return #m";
  req.push("EVAL", lua, 1, "feed.scheduled:" + name);
  co_await c.conn().async_exec(req, asio::use_awaitable);
}

// Waits on `c`'s executor.
asio::awaitable<void> pause(thoonk::client& c, std::chrono::milliseconds d) {
  asio::steady_timer t(c.get_executor(), d);
  co_await t.async_wait(asio::use_awaitable);
}

// Runs `body(i)` for i in [0, n) from `width` coroutines; returns seconds.
template <class Body>
asio::awaitable<double> spread(thoonk::client& c, long n, int width, Body body) {
  long next = 0;
  int live = width;
  const auto t0 = steady::now();
  for (int w = 0; w < width; ++w)
    asio::co_spawn(
        c.get_executor(),
        [&]() -> asio::awaitable<void> {
          while (next < n) co_await body(next++);
          --live;
        },
        asio::detached);
  while (live > 0) co_await pause(c, 1ms);
  co_return bench::seconds_since(t0);
}

// Claims and finishes `n` jobs with 64 workers; with `fail_first`, each job
// is failed once (retry at once) before it is finished. Returns jobs/s.
asio::awaitable<double> work(thoonk::client& c, thoonk::job_queue& q, long n, bool fail_first) {
  long finished = 0;
  int live = 64;
  const auto t0 = steady::now();
  for (int w = 0; w < 64; ++w)
    asio::co_spawn(
        c.get_executor(),
        [&]() -> asio::awaitable<void> {
          while (finished < n) {
            auto [ec, j] = co_await q.async_claim(200ms, nothrow);
            if (ec) continue;
            if (fail_first && j.failures == 0) {
              thoonk::fail_options o;
              o.retry_at = thoonk::now_epoch_ms() - 1;
              co_await q.async_fail(j, "once", o, asio::use_awaitable);
              continue;
            }
            auto [fec] = co_await q.async_finish(j, nothrow);
            if (!fec) ++finished;
          }
          --live;
        },
        asio::detached);
  while (live > 0) co_await pause(c, 1ms);
  co_return static_cast<double>(n) / bench::seconds_since(t0);
}

asio::awaitable<thoonk::job_queue> fresh(thoonk::client& c, const std::string& prefix,
                                         std::vector<std::string>& made) {
  auto name = bench::unique(prefix);
  made.push_back(name);
  auto q = co_await thoonk::job_queue::async_create_or_open(c, name, asio::use_awaitable);
  co_return q;
}

struct results {
  double scheduled_put_per_s = 0, plain_put_per_s = 0;
  double promoted_per_s = 0;
  long long slowest_script_us = 0;
  double claim_due_per_s = 0, claim_plain_per_s = 0;
  double fail_retry_per_s = 0, claim_finish_per_s = 0;
  double mem_plain = 0, mem_options = 0, mem_scheduled = 0, mem_explicit_id = 0, mem_held = 0;
  std::optional<double> set_rps, put_options_calls;
};

asio::awaitable<void> measure(thoonk::client& c, long n, results& r) {
  std::vector<std::string> made;
  // Warm up: scripts loaded, buffers grown.
  {
    auto q = co_await fresh(c, "bench-engine-warm", made);
    thoonk::put_options o;
    o.delay = 1h;
    for (int i = 0; i < 1000; ++i) co_await q.async_put(payload70, o, asio::use_awaitable);
  }

  // ---- scheduled puts, and the promotion of them all at once ----------------
  {
    auto q = co_await fresh(c, "bench-engine-sched", made);
    const auto due = thoonk::now_epoch_ms() + 3600000;
    const double s = co_await spread(c, n, 64, [&](long) -> asio::awaitable<void> {
      thoonk::put_options o;
      o.run_at = due;
      co_await q.async_put(payload70, o, asio::use_awaitable);
    });
    r.scheduled_put_per_s = static_cast<double>(n) / s;
    co_await make_due(c, q.name());
    thoonk::request slow;
    slow.push("CONFIG", "SET", "slowlog-log-slower-than", "0");
    slow.push("CONFIG", "SET", "slowlog-max-len", "100000");
    slow.push("SLOWLOG", "RESET");
    co_await c.conn().async_exec(slow, asio::use_awaitable);
    thoonk::maintenance_options mo;
    mo.publish_stats = false;
    mo.check_unaccounted = false;
    const auto t0 = steady::now();
    auto rep = co_await q.async_maintain(mo, asio::use_awaitable);
    r.promoted_per_s = static_cast<double>(rep.promoted) / bench::seconds_since(t0);
    thoonk::request get;
    get.push("SLOWLOG", "GET", "100000");
    get.push("CONFIG", "SET", "slowlog-log-slower-than", "10000");
    auto resp = co_await c.conn().async_exec(get, asio::use_awaitable);
    for (const auto& e : resp[0].elements)
      if (e.elements.size() > 3 && !e.elements[3].elements.empty() &&
          e.elements[3].elements[0].str == "EVALSHA")
        r.slowest_script_us = std::max<long long>(r.slowest_script_us, e.elements[2].integer);
  }

  // ---- plain puts, for scale ---------------------------------------------------
  {
    auto q = co_await fresh(c, "bench-engine-plain", made);
    const double s = co_await spread(c, n, 64, [&](long) -> asio::awaitable<void> {
      co_await q.async_put(payload70, asio::use_awaitable);
    });
    r.plain_put_per_s = static_cast<double>(n) / s;
    r.claim_plain_per_s = co_await work(c, q, n, false);
  }

  // ---- due scheduled jobs claimed (promoted by the claims) ---------------------
  {
    auto q = co_await fresh(c, "bench-engine-due", made);
    const auto later = thoonk::now_epoch_ms() + 3600000;
    co_await spread(c, n, 64, [&](long) -> asio::awaitable<void> {
      thoonk::put_options o;
      o.run_at = later;
      co_await q.async_put(payload70, o, asio::use_awaitable);
    });
    co_await make_due(c, q.name());
    r.claim_due_per_s = co_await work(c, q, n, false);
  }

  // ---- fail and retry -------------------------------------------------------
  {
    auto q = co_await fresh(c, "bench-engine-fail", made);
    for (long done = 0; done < n; done += 1000) {
      std::vector<std::string> items(1000, payload70);
      co_await q.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
    }
    r.fail_retry_per_s = co_await work(c, q, n, true);
    auto q2 = co_await fresh(c, "bench-engine-finish", made);
    for (long done = 0; done < n; done += 1000) {
      std::vector<std::string> items(1000, payload70);
      co_await q2.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
    }
    r.claim_finish_per_s = co_await work(c, q2, n, false);
  }
  for (auto& name : made) co_await bench::drop(c, name);
  made.clear();
  co_await settle_memory(c);

  // ---- memory per job ----------------------------------------------------------
  // Nothing is deleted until every figure is taken (a lazily freed queue
  // would shrink used_memory during the next measurement).
  constexpr long m = 100000;
  auto per_job = [&](long long before, long long after) {
    return static_cast<double>(after - before) / static_cast<double>(m);
  };
  {
    auto q = co_await fresh(c, "bench-engine-mem", made);
    auto b = co_await bench::used_memory(c);
    for (long done = 0; done < m; done += 1000) {
      std::vector<std::string> items(1000, payload70);
      co_await q.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
    }
    r.mem_plain = per_job(b, co_await bench::used_memory(c));
  }
  auto put_kind = [&](const char* prefix, int kind) -> asio::awaitable<double> {
    auto q = co_await fresh(c, prefix, made);
    auto b = co_await bench::used_memory(c);
    const auto later = thoonk::now_epoch_ms() + 3600000;
    co_await spread(c, m, 64, [&](long i) -> asio::awaitable<void> {
      thoonk::put_options o;
      if (kind == 1) o.run_at = later;
      if (kind == 2) o.id = "job-" + std::to_string(i);
      co_await q.async_put(payload70, o, asio::use_awaitable);
    });
    co_return per_job(b, co_await bench::used_memory(c));
  };
  r.mem_options = co_await put_kind("bench-engine-mem-opt", 0);
  r.mem_scheduled = co_await put_kind("bench-engine-mem-sched", 1);
  r.mem_explicit_id = co_await put_kind("bench-engine-mem-id", 2);
  {
    // Held puts: m claimed jobs, then one held put for each (the figure is
    // the held puts' own cost).
    auto q = co_await fresh(c, "bench-engine-mem-held", made);
    co_await spread(c, m, 64, [&](long i) -> asio::awaitable<void> {
      thoonk::put_options o;
      o.id = "h-" + std::to_string(i);
      co_await q.async_put(payload70, o, asio::use_awaitable);
    });
    co_await spread(c, m, 64, [&](long) -> asio::awaitable<void> {
      co_await q.async_claim(1s, asio::use_awaitable);
    });
    auto b = co_await bench::used_memory(c);
    co_await spread(c, m, 64, [&](long i) -> asio::awaitable<void> {
      thoonk::put_options o;
      o.id = "h-" + std::to_string(i);
      co_await q.async_put(payload70, o, asio::use_awaitable);
    });
    r.mem_held = per_job(b, co_await bench::used_memory(c));
  }
  for (auto& name : made) co_await bench::drop(c, name);
}

}  // namespace

using bench::num;

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::strcmp(argv[1], "--quick") == 0;
  bench::server srv;
  auto cfg = srv.cfg();
  cfg.client_name = "job_engine_bench";
  results r;
  const long n = quick ? 10000 : 100000;
  const bool done = bench::run_client(
      cfg, [&](thoonk::client& c) { return measure(c, n, r); }, std::chrono::seconds(600));

  // Ceilings: SET, and the put-with-options script for one scheduled job.
  r.set_rps = bench::redis_benchmark_rps(
      srv, {"-P", "64", "-c", "1", "-n", quick ? "200000" : "1000000", "-t", "set"});
  const auto name = bench::unique("bench-engine-ceiling");
  std::string sha;
  bench::run_client(
      cfg,
      [&](thoonk::client& c) -> asio::awaitable<void> {
        co_await bench::create(c, name, {});
        thoonk::request req;
        req.push("SCRIPT", "LOAD", thoonk::detail::scripts::jobs_put_with_options().source());
        auto resp = co_await c.conn().async_exec(req, asio::use_awaitable);
        sha = resp[0].str;
      },
      std::chrono::seconds(30));
  auto keys = bench::job_keys(name);
  std::vector<std::string> a{"-P",      "64", "-c",
                             "1",       "-n", quick ? "50000" : "200000",
                             "EVALSHA", sha,  std::to_string(keys.size())};
  a.insert(a.end(), keys.begin(), keys.end());
  const std::string now = std::to_string(thoonk::now_epoch_ms());
  for (const std::string& arg :
       {now, "feed.wake:" + name, std::string(), payload70,
        std::to_string(thoonk::now_epoch_ms() + 3600000), std::string("rark"), std::string("0"),
        std::string("0"), std::string(), std::string(), std::string(), std::string()})
    a.push_back(arg);
  r.put_options_calls = bench::redis_benchmark_rps(srv, a);
  bench::run_client(
      cfg, [&](thoonk::client& c) -> asio::awaitable<void> { co_await bench::drop(c, name); },
      std::chrono::seconds(30));

  std::ostringstream o;
  o.precision(6);
  o << "{\n  \"benchmark\": \"job_engine_bench\",\n  \"complete\": " << (done ? "true" : "false")
    << ",\n  \"jobs\": " << n << ",\n";
  o << "  \"scheduled_put\": {\"scheduled_puts_per_s_64_coroutines\": " << r.scheduled_put_per_s
    << ", \"plain_puts_per_s_64_coroutines\": " << r.plain_put_per_s << "},\n";
  o << "  \"promotion\": {\"maintain_promoted_per_s\": " << r.promoted_per_s
    << ", \"slowest_script_call_us\": " << r.slowest_script_us << "},\n";
  o << "  \"claim_due\": {\"due_scheduled_claimed_finished_per_s_64_workers\": "
    << r.claim_due_per_s
    << ", \"plain_backlog_claimed_finished_per_s_64_workers\": " << r.claim_plain_per_s << "},\n";
  o << "  \"fail_retry\": {\"fail_once_then_finish_jobs_per_s_64_workers\": " << r.fail_retry_per_s
    << ", \"claim_finish_jobs_per_s_64_workers\": " << r.claim_finish_per_s << "},\n";
  o << "  \"memory_bytes_per_job\": {\"payload_bytes\": 70, \"jobs\": 100000, \"plain_put\": "
    << r.mem_plain << ", \"put_with_options_no_id_no_run_at\": " << r.mem_options
    << ", \"scheduled\": " << r.mem_scheduled << ", \"explicit_id\": " << r.mem_explicit_id
    << ", \"held_put\": " << r.mem_held << "},\n";
  o << "  \"ceiling_redis_benchmark_P64_c1\": {\"set_per_s\": " << num(r.set_rps)
    << ", \"put_with_options_scheduled_calls_per_s\": " << num(r.put_options_calls) << "},\n";
  o << "  \"ratios\": {\"scheduled_put_vs_put_with_options_ceiling\": "
    << (r.put_options_calls && *r.put_options_calls > 0
            ? num(r.scheduled_put_per_s / *r.put_options_calls)
            : std::string("null"))
    << "}\n}\n";
  std::cout << o.str();
  return 0;
}
