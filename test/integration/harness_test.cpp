// Tests of the test harness itself: the redis-server child process and the
// coroutine deadline helpers. They talk to Redis with raw Asio only, so a bug
// in the library can never make the harness look broken (or fine).
#include "support/redis_server.hpp"
#include "support/run_coro.hpp"

#include <catch2/catch.hpp>

#include <boost/asio.hpp>

#include <sys/stat.h>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

namespace {

using namespace thoonk::test;
using namespace std::chrono_literals;
namespace asio = boost::asio;
using asio::ip::tcp;

// Sends inline commands on one connection and returns the first line of each
// reply (enough for +OK, +PONG, -ERR..., $-1). Runs under a deadline like
// every coroutine test, so a silent server fails the test instead of hanging.
template <typename Protocol>
std::vector<std::string> exchange(typename Protocol::endpoint endpoint,
                                  std::vector<std::string> commands) {
  asio::io_context ioc;
  std::vector<std::string> replies;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        typename Protocol::socket socket(ioc);
        co_await socket.async_connect(endpoint, asio::use_awaitable);
        std::string buffer;
        for (const auto& command : commands) {
          co_await asio::async_write(socket, asio::buffer(command + "\r\n"), asio::use_awaitable);
          const std::size_t n = co_await asio::async_read_until(
              socket, asio::dynamic_buffer(buffer), "\r\n", asio::use_awaitable);
          replies.push_back(buffer.substr(0, n - 2));
          buffer.erase(0, n);
        }
      },
      5s);
  return replies;
}

std::vector<std::string> exchange_tcp(unsigned short port, std::vector<std::string> commands) {
  return exchange<tcp>(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                       std::move(commands));
}

std::string ping(unsigned short port) { return exchange_tcp(port, {"PING"}).at(0); }

// The error a fresh TCP connect to the port gets (success when something listens).
boost::system::error_code connect_error(unsigned short port) {
  asio::io_context ioc;
  boost::system::error_code ec;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        tcp::socket socket(ioc);
        co_await socket.async_connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                                      asio::redirect_error(asio::use_awaitable, ec));
      },
      5s);
  return ec;
}

bool process_exists(pid_t pid) { return ::kill(pid, 0) == 0 || errno != ESRCH; }

// Sets or unsets an environment variable for one test and restores it after.
class env_override {
 public:
  env_override(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    value ? ::setenv(name, value, 1) : ::unsetenv(name);
  }
  ~env_override() { old_ ? ::setenv(name_, old_->c_str(), 1) : ::unsetenv(name_); }
  env_override(const env_override&) = delete;
  env_override& operator=(const env_override&) = delete;

 private:
  const char* name_;
  std::optional<std::string> old_;
};

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

}  // namespace

TEST_CASE("the shared redis-server answers PING on its port", "[harness]") {
  auto& server = shared_redis();
  CHECK(&server == &shared_redis());
  CHECK(server.host() == "127.0.0.1");
  CHECK(server.url() == "redis://127.0.0.1:" + std::to_string(server.port()));
  CHECK(server.port() != 0);
  CHECK(process_exists(server.pid()));
  CHECK(ping(server.port()) == "+PONG");
}

TEST_CASE("shared_redis_url prefers THOONK_REDIS_URL", "[harness]") {
  {
    env_override env("THOONK_REDIS_URL", "redis://example.invalid:6390");
    CHECK(shared_redis_url() == "redis://example.invalid:6390");
  }
  {
    env_override env("THOONK_REDIS_URL", "");
    CHECK(shared_redis_url() == shared_redis().url());
  }
  {
    env_override env("THOONK_REDIS_URL", nullptr);
    CHECK(shared_redis_url() == shared_redis().url());
  }
}

TEST_CASE("a private redis-server starts, answers and stops", "[harness]") {
  redis_server server;
  const pid_t pid = server.pid();
  const unsigned short port = server.port();
  REQUIRE(pid > 0);
  CHECK(port != shared_redis().port());
  CHECK(server.unix_socket().empty());
  CHECK(ping(port) == "+PONG");

  CHECK(read_file(server.log_path()).find("Ready to accept connections") != std::string::npos);

  server.stop();
  CHECK(server.pid() == -1);
  CHECK_FALSE(process_exists(pid));
  CHECK(connect_error(port) == asio::error::connection_refused);
  server.stop();  // idempotent
  CHECK(server.pid() == -1);
}

TEST_CASE("restart keeps the port and starts empty", "[harness]") {
  redis_server server;
  const pid_t old_pid = server.pid();
  const unsigned short port = server.port();
  CHECK(exchange_tcp(port, {"SET harness:key value"}).at(0) == "+OK");

  // A connection open across the restart must see the old server go away.
  asio::io_context ioc;
  tcp::socket survivor(ioc);
  survivor.connect(tcp::endpoint(asio::ip::make_address("127.0.0.1"), port));

  server.restart();
  CHECK(server.port() == port);
  CHECK(server.pid() > 0);
  CHECK(server.pid() != old_pid);
  CHECK_FALSE(process_exists(old_pid));
  CHECK(exchange_tcp(port, {"PING", "GET harness:key"}) ==
        std::vector<std::string>{"+PONG", "$-1"});

  boost::system::error_code ec;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        char byte;
        co_await survivor.async_read_some(asio::buffer(&byte, 1),
                                          asio::redirect_error(asio::use_awaitable, ec));
      },
      5s);
  CHECK((ec == asio::error::eof || ec == asio::error::connection_reset));

  // Restarting twice works too (the log is appended; readiness must look
  // only at the newest start).
  server.restart();
  CHECK(ping(port) == "+PONG");
}

TEST_CASE("a redis-server with --requirepass wants AUTH", "[harness]") {
  redis_server server({"--requirepass", "secret"});
  CHECK(ping(server.port()).starts_with("-NOAUTH"));
  CHECK(exchange_tcp(server.port(), {"AUTH secret", "PING"}) ==
        std::vector<std::string>{"+OK", "+PONG"});
}

TEST_CASE("a redis-server can listen on a unix socket", "[harness]") {
  redis_server server(redis_server_options{.unix_socket = true});
  REQUIRE_FALSE(server.unix_socket().empty());
  struct stat st {};
  REQUIRE(::stat(server.unix_socket().c_str(), &st) == 0);
  CHECK(S_ISSOCK(st.st_mode));
  CHECK((st.st_mode & 0777) == 0700);
  using local = asio::local::stream_protocol;
  CHECK(exchange<local>(local::endpoint(server.unix_socket()), {"PING"}).at(0) == "+PONG");
  // TCP keeps working alongside.
  CHECK(ping(server.port()) == "+PONG");

  server.restart();
  CHECK(exchange<local>(local::endpoint(server.unix_socket()), {"PING"}).at(0) == "+PONG");
}

TEST_CASE("an explicit --unixsocket argument is reported", "[harness]") {
  redis_server first(redis_server_options{.unix_socket = true});
  const std::string path = first.dir() + "/explicit.sock";
  redis_server server({"--unixsocket", path, "--unixsocketperm", "700"});
  CHECK(server.unix_socket() == path);
  using local = asio::local::stream_protocol;
  CHECK(exchange<local>(local::endpoint(path), {"PING"}).at(0) == "+PONG");
}

TEST_CASE("a missing redis-server binary is an error, not a skip", "[harness]") {
  env_override path("PATH", "/nonexistent-thoonk-dir");
  env_override explicit_binary("THOONK_REDIS_SERVER", nullptr);
  CHECK_THROWS_WITH(redis_server{}, Catch::Contains("redis-server not found on PATH") &&
                                        Catch::Contains("scripts/run-tests.sh"));
}

TEST_CASE("a redis-server that cannot start reports its log", "[harness]") {
  CHECK_THROWS_WITH(
      redis_server({"--no-such-directive", "1"}),
      Catch::Contains("exited during startup") && Catch::Contains("no-such-directive"));
}

TEST_CASE("the temporary directory is removed with the server", "[harness]") {
  std::string dir;
  {
    redis_server server;
    dir = server.dir();
    CHECK(std::filesystem::exists(dir));
  }
  CHECK_FALSE(std::filesystem::exists(dir));
}

// ---------------------------------------------------------------------------
// run_coro
// ---------------------------------------------------------------------------

TEST_CASE("run_coro_for reports a finished coroutine", "[harness][run_coro]") {
  asio::io_context ioc;
  bool reached = false;
  CHECK(run_coro_for(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await asio::post(ioc, asio::use_awaitable);  // suspends once
        reached = true;
      },
      5s));
  CHECK(reached);
}

TEST_CASE("run_coro_for reports a coroutine that never finishes", "[harness][run_coro]") {
  asio::io_context ioc;
  const auto started = std::chrono::steady_clock::now();
  // It waits on a timer that never expires.
  CHECK_FALSE(run_coro_for(
      ioc,
      [&]() -> asio::awaitable<void> {
        asio::steady_timer never(ioc, asio::steady_timer::time_point::max());
        co_await never.async_wait(asio::use_awaitable);
      },
      100ms));
  const auto waited = std::chrono::steady_clock::now() - started;
  CHECK(waited >= 100ms);
  CHECK(waited < 5s);
  CHECK(ioc.stopped());
}

TEST_CASE("run_coro_for reports a coroutine whose operation is abandoned", "[harness][run_coro]") {
  // An operation that drops its handler: the io_context runs out of work with
  // the coroutine never completing. Must fail fast, not wait for the deadline.
  asio::io_context ioc;
  const auto started = std::chrono::steady_clock::now();
  CHECK_FALSE(run_coro_for(
      ioc,
      []() -> asio::awaitable<void> {
        co_await asio::async_initiate<decltype(asio::use_awaitable), void()>([](auto&&) {},
                                                                             asio::use_awaitable);
      },
      10s));
  CHECK(std::chrono::steady_clock::now() - started < 5s);
}

TEST_CASE("run_coro rethrows what the coroutine throws", "[harness][run_coro]") {
  asio::io_context ioc;
  CHECK_THROWS_WITH(run_coro(ioc,
                             [&]() -> asio::awaitable<void> {
                               co_await asio::post(ioc, asio::use_awaitable);
                               throw std::runtime_error("boom");
                             }),
                    "boom");
  // Also when the callable throws before producing a coroutine.
  CHECK_THROWS_WITH(
      run_coro(ioc, []() -> asio::awaitable<void> { throw std::runtime_error("early"); }), "early");
}

TEST_CASE("run_coro returns while background work continues", "[harness][run_coro]") {
  asio::io_context ioc;
  int ticks = 0;
  // Something like a client's reconnect loop: never ends on its own.
  auto background = [&]() -> asio::awaitable<void> {
    for (;;) {
      co_await sleep_for(5ms);
      ++ticks;
    }
  };
  const auto started = std::chrono::steady_clock::now();
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        asio::co_spawn(ioc, background, asio::detached);
        auto ticked = co_await wait_until([&] { return ticks > 0; });
        CHECK(ticked);
      },
      10s);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  CHECK(ticks > 0);

  // The same io_context can run the next test coroutine; the background loop
  // resumes meanwhile.
  const int before = ticks;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto ticked = co_await wait_until([&] { return ticks > before; });
        CHECK(ticked);
      },
      10s);
  CHECK(ticks > before);
}

TEST_CASE("stop() kills a server that ignores SIGTERM", "[harness]") {
  redis_server server;
  const pid_t pid = server.pid();
  // A stopped process cannot act on SIGTERM, so stop() must fall back to
  // SIGKILL after its 5 s grace period.
  REQUIRE(::kill(pid, SIGSTOP) == 0);
  const auto started = std::chrono::steady_clock::now();
  server.stop();
  const auto waited = std::chrono::steady_clock::now() - started;
  CHECK(waited >= 4s);
  CHECK(waited < 10s);
  CHECK_FALSE(process_exists(pid));
}
