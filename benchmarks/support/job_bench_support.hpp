// What the job benchmarks share (job_bench, job_engine_bench): running a
// coroutine with a client under a time limit, throwaway queue names, and
// the server's and this process's CPU and memory figures.
#pragma once

#include "jobs/job_keys.hpp"

#include <thoonk/job_queue.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

#include <thoonk/client.hpp>

#include <boost/asio.hpp>

#include <chrono>
#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include <sys/resource.h>

namespace thoonk::bench {

/// `prefix-<random number>`: a queue name no other run uses.
inline std::string unique(const std::string& prefix) {
  static std::mt19937_64 rng{std::random_device{}()};
  return prefix + "-" + std::to_string(rng() % 1000000000);
}

/// Runs `f(ioc)` on a fresh io_context until it finishes or `limit`
/// passes; false when it did not finish.
template <class F>
bool run(F f, std::chrono::seconds limit) {
  boost::asio::io_context ioc(1);
  bool done = false;
  boost::asio::co_spawn(ioc, f(ioc), [&](std::exception_ptr e) {
    done = true;
    ioc.stop();
    if (e) std::rethrow_exception(e);
  });
  ioc.run_for(limit);
  return done;
}

/// run() with a client on `cfg`, connected, handed to `f`.
template <class F>
bool run_client(const thoonk::config& cfg, F f, std::chrono::seconds limit) {
  return run(
      [&](boost::asio::io_context& ioc) -> boost::asio::awaitable<void> {
        thoonk::client c(ioc.get_executor(), cfg);
        co_await c.async_connect(boost::asio::use_awaitable);
        co_await f(c);
      },
      limit);
}

/// Creates job queue `name` with config `cfg`.
inline boost::asio::awaitable<void> create(thoonk::client& c, std::string name,
                                           thoonk::feed_config cfg) {
  co_await c.async_create_feed(name, thoonk::feed_type::job, std::move(cfg),
                               boost::asio::use_awaitable);
}

/// Deletes `name`, ignoring errors.
inline boost::asio::awaitable<void> drop(thoonk::client& c, std::string name) {
  auto [ec] = co_await c.async_delete_feed(name, boost::asio::as_tuple(boost::asio::use_awaitable));
  (void)ec;
}

/// A field of `INFO <section>` as a number.
inline boost::asio::awaitable<double> info_field(thoonk::client& c, const char* section,
                                                 const char* field) {
  thoonk::request r;
  r.push("INFO", section);
  auto resp = co_await c.conn().async_exec(r, boost::asio::use_awaitable);
  const auto& s = resp[0].str;
  const auto p = s.find(std::string(field) + ":");
  co_return p == std::string::npos ? 0.0 : std::stod(s.substr(p + std::strlen(field) + 1));
}

/// CPU seconds the server has used (used_cpu_user + used_cpu_sys).
inline boost::asio::awaitable<double> server_cpu(thoonk::client& c) {
  const double user = co_await info_field(c, "cpu", "used_cpu_user");
  const double sys = co_await info_field(c, "cpu", "used_cpu_sys");
  co_return user + sys;
}

/// The server's count of EVALSHA calls and the microseconds it spent
/// executing them (INFO commandstats): the time inside scripts, without
/// reading, parsing and writing.
struct script_time {
  double calls = 0, usec = 0;
};
inline boost::asio::awaitable<script_time> evalsha_stats(thoonk::client& c) {
  thoonk::request r;
  r.push("INFO", "commandstats");
  auto resp = co_await c.conn().async_exec(r, boost::asio::use_awaitable);
  const auto& s = resp[0].str;
  script_time t;
  const auto p = s.find("cmdstat_evalsha:");
  if (p == std::string::npos) co_return t;
  auto field = [&](const char* name) {
    const auto f = s.find(name, p);
    return f == std::string::npos ? 0.0 : std::stod(s.substr(f + std::strlen(name)));
  };
  t.calls = field("calls=");
  t.usec = field("usec=");
  co_return t;
}

/// The server's used_memory in bytes.
inline boost::asio::awaitable<long long> used_memory(thoonk::client& c) {
  co_return static_cast<long long>(co_await info_field(c, "memory", "used_memory"));
}

/// The KEYS of the job scripts' layout for queue `name`, in order
/// (src/lua/layouts/job.lua), for redis-benchmark EVALSHA ceilings: the
/// library's own list (src/jobs/job_keys.hpp).
inline std::vector<std::string> job_keys(const std::string& name) {
  return thoonk::detail::jobs::job_keys(thoonk::detail::feed_names(thoonk::config{}, name)).keys;
}

/// Puts `n` copies of `payload` with put_many, 1000 a call (the producer of
/// the end-to-end runs).
inline boost::asio::awaitable<void> put_in_chunks(thoonk::job_queue q, long n,
                                                  std::string payload) {
  for (long done = 0; done < n;) {
    const long k = std::min<long>(1000, n - done);
    std::vector<std::string> items(static_cast<std::size_t>(k), payload);
    co_await q.async_put_many(std::move(items), thoonk::priority::normal,
                              boost::asio::use_awaitable);
    done += k;
  }
}

/// One raw worker of the end-to-end runs: claim, then finish, until
/// `*finished` reaches `total`; decrements `*live` when it leaves.
inline boost::asio::awaitable<void> claim_finish_loop(thoonk::job_queue q, long* finished,
                                                      long total, int* live) {
  using namespace std::chrono_literals;
  constexpr auto nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);
  while (*finished < total) {
    auto [ec, j] = co_await q.async_claim(500ms, nothrow);
    if (ec) continue;
    auto [fec] = co_await q.async_finish(j, nothrow);
    if (!fec) ++*finished;
  }
  --*live;
}

/// CPU seconds this process has used.
inline double own_cpu() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

}  // namespace thoonk::bench
