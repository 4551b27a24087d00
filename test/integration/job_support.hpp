// Helpers of the queue and job queue integration tests: creating queues
// with the contract's plain commands, raw key snapshots, small awaitables.
#pragma once

#include "support/redis_server.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/client.hpp>
#include <thoonk/job_queue.hpp>
#include <thoonk/queue.hpp>

#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <algorithm>
#include <chrono>
#include <string>
#include <utility>
#include <vector>

namespace jobs_test {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using boost::system::error_code;
inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
using thoonk::test::cmd;

using fields = std::vector<std::pair<std::string, std::string>>;

/// Creates a queue/job feed the way the contract does (SADD feeds + config).
inline asio::awaitable<void> create_feed(thoonk::connection& c, std::string name, std::string type,
                                         fields extra = {}) {
  thoonk::request r;
  r.push("SADD", "feeds", name);
  r.push("HSET", "feed.config:" + name, "type", type);
  for (auto& [f, v] : extra) r.push("HSET", "feed.config:" + name, f, v);
  co_await c.exec(r, asio::use_awaitable);
}

inline std::string key(const std::string& what, const std::string& name) {
  return "feed." + what + ":" + name;
}

/// Every raw key of a job queue, rendered deterministically.
inline asio::awaitable<std::string> snapshot(thoonk::connection& c, std::string name) {
  thoonk::request r;
  r.push("LRANGE", key("ids", name), 0, -1);
  r.push("HGETALL", key("items", name));
  r.push("ZRANGE", key("claimed", name), 0, -1, "WITHSCORES");
  r.push("ZRANGE", key("published", name), 0, -1, "WITHSCORES");
  r.push("HGETALL", key("cancelled", name));
  r.push("SMEMBERS", key("stalled", name));
  r.push("GET", key("publishes", name));
  r.push("GET", key("finishes", name));
  r.push("HGETALL", key("attempts", name));
  r.push("SMEMBERS", key("unaccounted", name));
  auto resp = co_await c.exec(r, asio::use_awaitable);
  std::string out;
  const char* names[] = {"ids",     "items",     "claimed",  "published", "cancelled",
                         "stalled", "publishes", "finishes", "attempts",  "unaccounted"};
  for (std::size_t i = 0; i < resp.size(); ++i) {
    auto& v = resp[i];
    // Hashes and sets: order-independent rendering.
    if (v.type == thoonk::resp3::type::map || v.type == thoonk::resp3::type::set ||
        (v.type == thoonk::resp3::type::array &&
         (i == 1 || i == 4 || i == 5 || i == 8 || i == 9))) {
      std::vector<std::string> parts;
      auto& e = v.elements;
      bool pairs = i == 1 || i == 4 || i == 8;
      for (std::size_t j = 0; j < e.size(); j += pairs ? 2 : 1) {
        // feed.attempts keeps one field, "\0encoding", for its encoding
        // (docs/jobs.md); it is no job's.
        if (i == 8 && !e[j].str.empty() && e[j].str[0] == '\0') continue;
        parts.push_back(pairs && j + 1 < e.size() ? e[j].str + "=" + e[j + 1].str : e[j].str);
      }
      std::sort(parts.begin(), parts.end());
      out += std::string(names[i]) + ":{";
      for (auto& p : parts) out += p + ",";
      out += "}\n";
    } else {
      out += std::string(names[i]) + ":" + thoonk::resp3::debug_string(v) + "\n";
    }
  }
  co_return out;
}

inline asio::awaitable<std::int64_t> llen(thoonk::connection& c, std::string k) {
  auto v = co_await cmd(c, "LLEN", k);
  co_return v.integer;
}

/// A connected client on the shared test server with a unique client name.
inline thoonk::config job_config(std::string client_name = "thoonk-jobs-test") {
  auto cfg = thoonk::test::test_config();
  cfg.client_name = std::move(client_name);
  return cfg;
}

/// Per test case: an io_context, a client on the shared test server, and a
/// fresh queue name starting with `prefix`.
struct job_fixture {
  explicit job_fixture(const char* prefix) : name(thoonk::test::unique_name(prefix)) {}
  asio::io_context ioc;
  thoonk::client c{ioc.get_executor(), job_config()};
  std::string name;
};

/// Milliseconds since the epoch, as the contract's timestamps.
inline std::string now_ms() {
  return std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count());
}

inline std::int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace jobs_test
