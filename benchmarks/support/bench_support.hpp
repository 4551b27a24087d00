// What every benchmark needs: a server, the server's own ceiling from
// redis-benchmark, and JSON output. Benchmarks measure; they never assert.
#pragma once

#include <thoonk/config.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace thoonk::test {
class redis_server;
}

namespace thoonk::bench {

/// The server to measure against: THOONK_REDIS_URL when set, otherwise a
/// throwaway redis-server on a free 127.0.0.1 port, stopped (by its pid)
/// when this object goes.
class server {
 public:
  server();
  ~server();
  const thoonk::config& cfg() const noexcept { return cfg_; }
  std::string host() const { return cfg_.host; }
  unsigned port() const { return cfg_.port; }
  bool external() const noexcept { return !own_; }

 private:
  std::unique_ptr<thoonk::test::redis_server> own_;
  thoonk::config cfg_;
};

/// Runs `redis-benchmark -h H -p P -q <args...>` and returns the requests
/// per second it reports (the first figure), or nullopt when it is missing
/// or failed. Example args: {"-P", "64", "-c", "1", "-n", "1000000", "-t", "set"}.
std::optional<double> redis_benchmark_rps(const server& s, const std::vector<std::string>& args);

/// Seconds since `start` as a double.
inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// p in [0,1] of a sample (sorted in place).
double percentile(std::vector<double>& v, double p);

/// JSON string escaping for names.
std::string json_escape(const std::string& s);

/// A JSON number with 6 significant digits, or `null` for a figure that
/// was not measured.
std::string num(std::optional<double> v);

}  // namespace thoonk::bench
