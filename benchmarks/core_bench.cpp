// Pipelined throughput of one thoonk::connection, as a ratio of the
// server's own single-connection pipelined ceiling measured in the same run.
//
//   core_bench [--requests N] [--coroutines 1,16,256,1024] [--no-ceiling] [--op set|evalsha|both]
//
// Prints one JSON document. With --no-ceiling and a fixed --requests it is
// also the workload for instruction counts (scripts/callgrind-core.sh).
#include "support/bench_support.hpp"

#include <thoonk/client.hpp>
#include <thoonk/connection.hpp>

#include <boost/asio.hpp>

#include <cstdio>
#include <iostream>
#include <sstream>

namespace asio = boost::asio;

namespace {

// A small script over three keys: one write, one read of two keys.
const char* const script_source =
    "redis.call('SET', KEYS[1], ARGV[1]) return redis.call('EXISTS', KEYS[2], KEYS[3])";

struct run_result {
  std::string op;
  int coroutines;
  long requests;
  double seconds;
  double rps;
  std::uint64_t writes;
};

run_result run_load(const thoonk::config& cfg, const std::string& op, int coroutines,
                    long requests) {
  asio::io_context ioc(1);
  thoonk::client c(ioc.get_executor(), cfg);
  thoonk::script s(script_source);
  long issued = 0;
  double seconds = 0;
  std::uint64_t writes = 0;
  auto worker = [&](int id) -> asio::awaitable<void> {
    thoonk::request req;
    const std::string k1 = "bench:k1:" + std::to_string(id), k2 = "bench:k2", k3 = "bench:k3";
    while (issued < requests) {
      ++issued;
      req.clear();
      if (op == "set") {
        req.push("SET", k1, "xxx");
      } else {
        req.push("EVALSHA", s.sha1(), 3, k1, k2, k3, "xxx");
      }
      co_await c.conn().async_exec(req, asio::use_awaitable);
    }
  };
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await c.async_connect(asio::use_awaitable);
        thoonk::request load;
        load.push("SCRIPT", "LOAD", s.source());
        co_await c.conn().async_exec(load, asio::use_awaitable);
        auto w0 = c.conn().stats().writes;
        auto start = std::chrono::steady_clock::now();
        int remaining = coroutines;
        asio::steady_timer done(ioc, asio::steady_timer::time_point::max());
        for (int i = 0; i < coroutines; ++i)
          asio::co_spawn(ioc, worker(i), [&](std::exception_ptr e) {
            if (e) std::rethrow_exception(e);
            if (--remaining == 0) done.cancel();
          });
        co_await done.async_wait(asio::as_tuple(asio::use_awaitable));
        seconds = thoonk::bench::seconds_since(start);
        writes = c.conn().stats().writes - w0;
        c.stop();
      },
      asio::detached);
  ioc.run();
  return {op, coroutines, requests, seconds, static_cast<double>(requests) / seconds, writes};
}

std::vector<int> parse_list(const std::string& s) {
  std::vector<int> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) out.push_back(std::stoi(item));
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  long requests = 200000;
  std::vector<int> coroutine_counts{1, 16, 256, 1024};
  bool ceiling = true;
  std::vector<std::string> ops{"set", "evalsha"};
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--requests" && i + 1 < argc) requests = std::stol(argv[++i]);
    else if (a == "--coroutines" && i + 1 < argc) coroutine_counts = parse_list(argv[++i]);
    else if (a == "--no-ceiling") ceiling = false;
    else if (a == "--op" && i + 1 < argc) {
      std::string o = argv[++i];
      ops = o == "both" ? std::vector<std::string>{"set", "evalsha"} : std::vector<std::string>{o};
    } else {
      std::cerr << "usage: core_bench [--requests N] [--coroutines 1,16,256,1024] [--no-ceiling] "
                   "[--op set|evalsha|both]\n";
      return 2;
    }
  }

  thoonk::bench::server srv;
  std::optional<double> set_ceiling, eval_ceiling;
  if (ceiling) {
    const std::string n = std::to_string(std::max<long>(requests * 5, 1000000));
    set_ceiling =
        thoonk::bench::redis_benchmark_rps(srv, {"-P", "64", "-c", "1", "-n", n, "-t", "set"});
    thoonk::script s(script_source);
    // redis-benchmark needs the script loaded: run it once through EVAL.
    thoonk::bench::redis_benchmark_rps(srv,
                                       {"-n", "1", "EVAL", script_source, "3", "a", "b", "c", "x"});
    eval_ceiling = thoonk::bench::redis_benchmark_rps(
        srv, {"-P", "64", "-c", "1", "-n", n, "EVALSHA", s.sha1(), "3", "bench:k1:rb", "bench:k2",
              "bench:k3", "xxx"});
  }

  std::vector<run_result> results;
  for (const auto& op : ops)
    for (int c : coroutine_counts) {
      long n = c == 1 ? std::min<long>(requests, 20000) : requests;
      results.push_back(run_load(srv.cfg(), op, c, n));
    }

  auto fmt = [](std::optional<double> v) { return v ? std::to_string(*v) : std::string("null"); };
  std::cout << "{\n  \"benchmark\": \"core\",\n";
  std::cout << "  \"server_ceiling\": {\"command\": \"redis-benchmark -P 64 -c 1\", \"set_rps\": "
            << fmt(set_ceiling) << ", \"evalsha_rps\": " << fmt(eval_ceiling) << "},\n";
  std::cout << "  \"results\": [\n";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const auto& r = results[i];
    auto ceil = r.op == "set" ? set_ceiling : eval_ceiling;
    std::cout << "    {\"op\": \"" << r.op << "\", \"coroutines\": " << r.coroutines
              << ", \"requests\": " << r.requests << ", \"seconds\": " << r.seconds
              << ", \"rps\": " << static_cast<long>(r.rps) << ", \"socket_writes\": " << r.writes
              << ", \"requests_per_write\": "
              << (r.writes ? static_cast<double>(r.requests) / static_cast<double>(r.writes) : 0.0)
              << ", \"ratio_to_server\": " << (ceil ? std::to_string(r.rps / *ceil) : "null") << "}"
              << (i + 1 < results.size() ? "," : "") << "\n";
  }
  std::cout << "  ]\n}\n";
  return 0;
}
