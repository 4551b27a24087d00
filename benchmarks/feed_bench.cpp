// Feed benchmark: prints one JSON document.
//
//   * publish throughput with 1 and 64 publishing coroutines (one client),
//   * publish -> callback latency p50/p99 at 1,000 and 10,000 items/s with 1
//     and 16 subscriber clients (open-loop publisher, one thread),
//   * the server's ceiling in the same run, from redis-benchmark with
//     pipelining: PUBLISH, and EVALSHA of the library's own feed publish
//     script on the same feed (SCRIPT LOAD first), and the ratios.
//
// Server: $THOONK_REDIS_URL when set, otherwise a redis-server started here
// on a free loopback port (no persistence) and stopped by pid at the end.
// Bounded: every phase has a count and a time limit.
//
// Usage: feed_bench [--quick]   (--quick: smaller counts, for smoke tests)
#include "support/bench_support.hpp"

#include <thoonk/client.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_events.hpp>

#include "../src/feeds/bench_access.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;
using clock_type = std::chrono::steady_clock;

namespace {

struct limits {
  int throughput_1 = 30000;    // publishes with 1 coroutine
  int throughput_64 = 180000;  // publishes with 64 coroutines (3 rounds)
  std::chrono::seconds throughput_time{15};
  std::chrono::milliseconds latency_time_1k{3000};
  std::chrono::milliseconds latency_time_10k{2000};
  int rb_publish_n = 1000000;  // redis-benchmark requests
  int rb_evalsha_n = 60000;    // per round
};

// Runs a shell command (redis-cli / redis-benchmark) and returns its stdout.
std::string run_command(const std::string& cmd) {
  std::string out;
  if (FILE* p = ::popen(cmd.c_str(), "r")) {
    char buf[4096];
    std::size_t n;
    while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
    ::pclose(p);
  }
  return out;
}

std::string shell_quote(const std::string& s) {
  std::string q = "'";
  for (char ch : s) {
    if (ch == '\'') q += "'\\''";
    else q += ch;
  }
  return q + "'";
}

// Requests per second of the last CSV line of redis-benchmark --csv.
double rb_rps(const std::string& out) {
  double rps = 0;
  std::size_t pos = 0;
  while (true) {
    auto line_end = out.find('\n', pos);
    std::string line =
        out.substr(pos, line_end == std::string::npos ? std::string::npos : line_end - pos);
    // "name","rps",...
    auto a = line.find("\",\"");
    if (a != std::string::npos && line.rfind("\"test\"", 0) != 0) {
      auto b = line.find('"', a + 3);
      if (b != std::string::npos) rps = std::atof(line.substr(a + 3, b - a - 3).c_str());
    }
    if (line_end == std::string::npos) break;
    pos = line_end + 1;
  }
  return rps;
}

// ---- helpers ------------------------------------------------------------------

// The 1-minute load average: the machine may be shared, and the figures
// mean little when it is busy.
double loadavg() {
  double l[1] = {0};
  return ::getloadavg(l, 1) == 1 ? l[0] : -1.0;
}

template <class T>
T run_sync(asio::io_context& ioc, asio::awaitable<T> a) {
  std::optional<T> result;
  std::exception_ptr error;
  asio::co_spawn(ioc, std::move(a), [&](std::exception_ptr e, T v) {
    error = e;
    if (!e) result = std::move(v);
    ioc.stop();
  });
  ioc.restart();
  ioc.run();
  if (error) std::rethrow_exception(error);
  return std::move(*result);
}

double percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

std::string item_with_stamp(std::size_t size) {
  std::string s(size, 'x');
  auto ns = clock_type::now().time_since_epoch().count();
  std::memcpy(s.data(), &ns, sizeof ns);
  return s;
}

asio::awaitable<void> sleep_until(clock_type::time_point t) {
  asio::steady_timer timer(co_await asio::this_coro::executor, t);
  co_await timer.async_wait(asio::as_tuple(asio::use_awaitable));
}

// ---- phases -------------------------------------------------------------------

asio::awaitable<json::object> throughput(thoonk::client& c, std::string feed_name, int workers,
                                         int total, std::chrono::seconds max_time,
                                         std::size_t item_size) {
  thoonk::feed f(c, feed_name);
  static int call = 0;  // ids never repeat across calls: every publish is new
  const std::string tag = "t" + std::to_string(++call) + "-";
  int issued = 0, done = 0, failed = 0, finished = 0;
  const auto start = clock_type::now();
  const auto deadline = start + max_time;
  const std::string item(item_size, 'x');
  auto ex = co_await asio::this_coro::executor;
  for (int w = 0; w < workers; ++w) {
    asio::co_spawn(
        ex,
        [&]() -> asio::awaitable<void> {
          while (issued < total && clock_type::now() < deadline) {
            std::string id = tag + std::to_string(issued++);
            auto [ec, r] = co_await f.async_publish(thoonk::item_id(std::move(id)), item,
                                                    asio::as_tuple(asio::use_awaitable));
            if (ec) ++failed;
            ++done;
          }
          ++finished;
        },
        asio::detached);
  }
  asio::steady_timer t(ex);
  while (finished < workers) {
    t.expires_after(1ms);
    co_await t.async_wait(asio::as_tuple(asio::use_awaitable));
  }
  double secs = std::chrono::duration<double>(clock_type::now() - start).count();
  json::object o;
  o["coroutines"] = workers;
  o["publishes"] = done;
  o["errors"] = failed;
  o["seconds"] = secs;
  o["publishes_per_s"] = done / secs;
  co_return o;
}

asio::awaitable<json::object> latency(asio::io_context& ioc, const thoonk::config& cfg,
                                      thoonk::client& pub, std::string feed_name, int rate,
                                      int subscribers, std::chrono::milliseconds duration,
                                      std::size_t item_size) {
  std::vector<std::unique_ptr<thoonk::client>> subs;
  std::vector<thoonk::feed_subscription> handles;
  auto samples = std::make_shared<std::vector<double>>();
  int expected = static_cast<int>(rate * duration.count() / 1000);
  samples->reserve(static_cast<std::size_t>(expected) * static_cast<std::size_t>(subscribers));
  for (int i = 0; i < subscribers; ++i) {
    subs.push_back(std::make_unique<thoonk::client>(ioc.get_executor(), cfg));
    co_await subs.back()->async_connect(asio::use_awaitable);
    thoonk::feed f(*subs.back(), feed_name);
    // A named callback: g++ 12 mishandles a lambda temporary with owning
    // captures inside a co_await expression (one capture copy too few).
    thoonk::feed_callback cb = [samples](const thoonk::feed_event& e) {
      if (e.kind == thoonk::feed_event::retract || e.item.size() < 8) return;
      clock_type::rep sent;
      std::memcpy(&sent, e.item.data(), sizeof sent);
      auto now = clock_type::now().time_since_epoch().count();
      samples->push_back(static_cast<double>(now - sent) / 1000.0);  // us
    };
    auto h = co_await f.async_subscribe(cb, asio::use_awaitable);
    handles.push_back(std::move(h));
  }
  thoonk::feed f(pub, feed_name);
  struct counters {
    int failed = 0, completed = 0;
  };
  auto cnt = std::make_shared<counters>();  // outlives this frame if publishes lag
  int sent = 0;
  const auto start = clock_type::now();
  const auto period = std::chrono::nanoseconds(1000000000LL / rate);
  for (int i = 0; i < expected; ++i) {
    co_await sleep_until(start + i * period);
    ++sent;
    // Open loop: each publish runs on its own; the schedule does not wait.
    asio::co_spawn(
        ioc,
        [f, cnt, item_size, i,
         tag = std::to_string(rate) + "-" +
               std::to_string(subscribers)]() mutable -> asio::awaitable<void> {
          // New ids every phase: each publish is a publish, not an edit.
          auto [ec, r] = co_await f.async_publish(
              thoonk::item_id("l" + tag + "-" + std::to_string(i)), item_with_stamp(item_size),
              asio::as_tuple(asio::use_awaitable));
          if (ec) ++cnt->failed;
          ++cnt->completed;
        },
        asio::detached);
  }
  const double achieved = sent / std::chrono::duration<double>(clock_type::now() - start).count();
  // Let the last events arrive (bounded).
  auto until = clock_type::now() + 3s;
  while ((cnt->completed < sent || samples->size() < static_cast<std::size_t>(sent) *
                                                         static_cast<std::size_t>(subscribers)) &&
         clock_type::now() < until)
    co_await sleep_until(clock_type::now() + 1ms);
  json::object o;
  o["rate_target"] = rate;
  o["rate_achieved"] = achieved;
  o["subscriber_clients"] = subscribers;
  o["published"] = sent;
  o["errors"] = cnt->failed;
  o["callbacks"] = samples->size();
  o["p50_us"] = percentile(*samples, 0.50);
  o["p99_us"] = percentile(*samples, 0.99);
  o["max_us"] = samples->empty() ? 0.0 : samples->back();
  handles.clear();
  for (auto& s : subs) s->stop();
  co_return o;
}

}  // namespace

int main(int argc, char** argv) {
  limits lim;
  bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  if (quick) {
    lim.throughput_1 = 2000;
    lim.throughput_64 = 9000;
    lim.latency_time_1k = 500ms;
    lim.latency_time_10k = 300ms;
    lim.rb_publish_n = 50000;
    lim.rb_evalsha_n = 3000;
  }
  const std::size_t item_size = 100;
  const int max_length = 10000;

  // $THOONK_REDIS_URL, or a throwaway redis-server on a free loopback port
  // (the test harness's launcher), stopped by its pid at the end.
  thoonk::bench::server server;
  const thoonk::config cfg = server.cfg();
  const std::string rb_target = cfg.unix_socket.empty()
                                    ? "-h " + cfg.host + " -p " + std::to_string(cfg.port)
                                    : "-s " + shell_quote(cfg.unix_socket);
  const std::string rb_auth = cfg.password.empty() ? "" : " -a " + shell_quote(cfg.password);

  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), cfg);
  json::object out;
  out["benchmark"] = "feed";
  out["cpu_cores"] = std::thread::hardware_concurrency();
  out["loadavg_at_start"] = loadavg();
  out["item_bytes"] = item_size;
  out["feed_max_length"] = max_length;
  try {
    std::string feed_name = "bench.feed." + c.instance_id().substr(0, 8);
    run_sync(ioc, [&]() -> asio::awaitable<int> {
      co_await c.async_connect(asio::use_awaitable);
      thoonk::feed::settings settings;
      settings.max_length = max_length;
      co_await thoonk::feed::async_create_or_open(c, feed_name, settings, asio::use_awaitable);
      co_return 0;
    }());

    // ---- the server's ceiling: redis-benchmark with the library's script ----
    const auto& script = thoonk::detail::scripts::feeds_publish();
    std::string load = "redis-cli " + rb_target + rb_auth + " SCRIPT LOAD " +
                       shell_quote(script.source()) + " 2>/dev/null";
    std::string sha = run_command(load);
    sha.erase(
        std::remove_if(sha.begin(), sha.end(),
                       [](char ch) { return !std::isxdigit(static_cast<unsigned char>(ch)); }),
        sha.end());
    if (sha != script.sha1()) throw std::runtime_error("SCRIPT LOAD returned " + sha);
    auto keys = thoonk::detail::feed_script_keys(feed_name);
    std::string evalsha = "EVALSHA " + sha + " " + std::to_string(keys.size());
    for (auto& k : keys) evalsha += " " + shell_quote(k);
    // Same feed, same item size, a random new id each time (so, once the
    // feed is full, every call evicts one item, like the library's runs).
    evalsha += " rb:__rand_int__ " + std::string(item_size, 'x') + " 1700000000000 " +
               shell_quote("feed.publish:" + feed_name) + " " +
               shell_quote("feed.edit:" + feed_name) + " " +
               shell_quote("feed.retract:" + feed_name);
    const std::string rb = "redis-benchmark " + rb_target + rb_auth + " --csv ";
    const std::string publish_cmd = rb + "-P 64 -c 1 -n " + std::to_string(lim.rb_publish_n) +
                                    " PUBLISH " + shell_quote("bench.ch." + feed_name) + " " +
                                    std::string(item_size, 'x') + " 2>/dev/null";
    const std::string evalsha_cmd = rb + "-P 64 -c 1 -r 100000000 -n " +
                                    std::to_string(lim.rb_evalsha_n) + " " + evalsha +
                                    " 2>/dev/null";

    // ---- library throughput, alternating with the ceiling ----
    // Fill the feed to max_length first: every measured publish evicts.
    run_sync(ioc, throughput(c, feed_name, 64, max_length, lim.throughput_time, item_size));
    json::array tp;
    tp.push_back(run_sync(
        ioc, throughput(c, feed_name, 1, lim.throughput_1, lim.throughput_time, item_size)));
    // The machine may be shared: measure library and ceiling back to back,
    // three times, and use the median ratio.
    json::array rounds;
    std::vector<double> ratio64;
    double lib64_sum = 0, evalsha_sum = 0;
    for (int round = 0; round < 3; ++round) {
      auto lib = run_sync(
          ioc, throughput(c, feed_name, 64, lim.throughput_64 / 3, lim.throughput_time, item_size));
      double evalsha_rps = rb_rps(run_command(evalsha_cmd));
      double lib_rps = lib.at("publishes_per_s").to_number<double>();
      json::object r;
      r["library_64_coroutines_per_s"] = lib_rps;
      r["evalsha_ceiling_per_s"] = evalsha_rps;
      r["ratio"] = evalsha_rps > 0 ? lib_rps / evalsha_rps : 0.0;
      ratio64.push_back(r["ratio"].as_double());
      lib64_sum += lib_rps;
      evalsha_sum += evalsha_rps;
      rounds.push_back(r);
      if (round == 0) tp.push_back(lib);
    }
    out["publish_throughput"] = tp;
    out["publish_64_vs_ceiling_rounds"] = rounds;
    double publish_rps = rb_rps(run_command(publish_cmd));

    // ---- latency ----
    json::array lat;
    struct point {
      int rate;
      int subs;
      std::chrono::milliseconds time;
    };
    std::vector<point> points{{1000, 1, lim.latency_time_1k},
                              {1000, 16, lim.latency_time_1k},
                              {10000, 1, lim.latency_time_10k},
                              {10000, 16, lim.latency_time_10k}};
    for (auto p : points)
      lat.push_back(
          run_sync(ioc, latency(ioc, cfg, c, feed_name, p.rate, p.subs, p.time, item_size)));
    out["publish_to_callback_latency"] = lat;

    json::object ceiling;
    ceiling["publish_per_s"] = publish_rps;
    ceiling["evalsha_feed_publish_per_s_mean"] = evalsha_sum / 3;
    ceiling["command_publish"] = "redis-benchmark -P 64 -c 1 -n " +
                                 std::to_string(lim.rb_publish_n) + " --csv PUBLISH <ch> <100 B>";
    ceiling["command_evalsha"] = "redis-benchmark -P 64 -c 1 -r 100000000 -n " +
                                 std::to_string(lim.rb_evalsha_n) +
                                 " --csv EVALSHA <sha of the feed publish script> 8 <feed keys> "
                                 "rb:__rand_int__ <100 B> <ms> <3 channels>";
    out["server_ceiling"] = ceiling;

    json::object ratios;
    std::sort(ratio64.begin(), ratio64.end());
    double lib1 = tp[0].as_object().at("publishes_per_s").to_number<double>();
    ratios["publish_64_vs_evalsha_ceiling_median"] = ratio64[1];
    ratios["publish_1_vs_evalsha_ceiling"] = evalsha_sum > 0 ? lib1 / (evalsha_sum / 3) : 0.0;
    ratios["evalsha_ceiling_vs_publish_ceiling"] =
        publish_rps > 0 ? (evalsha_sum / 3) / publish_rps : 0.0;
    out["ratios"] = ratios;
    json::object targets;
    targets["publish_64_at_least_60pct_of_evalsha"] = ratio64[1] >= 0.6;
    double p99_1k = lat[0].as_object().at("p99_us").to_number<double>();
    targets["p99_under_1ms_at_1k_per_s_1_subscriber"] = p99_1k < 1000.0;
    out["targets"] = targets;

    run_sync(ioc, [&]() -> asio::awaitable<int> {
      co_await c.async_delete_feed(feed_name, asio::use_awaitable);
      co_return 0;
    }());
  } catch (const std::exception& e) {
    out["error"] = e.what();
  }
  c.stop();
  out["loadavg_at_end"] = loadavg();
  std::cout << json::serialize(out) << std::endl;
  return out.contains("error") ? 1 : 0;
}
