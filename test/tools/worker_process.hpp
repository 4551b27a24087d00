// The first steps of a worker process that a test starts and stops by pid
// (tools/job_control_worker.cpp, tools/job_runner_worker.cpp,
// faults/worker/fault_worker.cpp).
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/config.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <sys/prctl.h>

#include <chrono>
#include <csignal>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thoonk::test {

/// Makes the process die with its parent (PR_SET_PDEATHSIG: a test that
/// fails or is killed never leaves it behind) and parses its Redis URL;
/// prints why and returns nullopt when the URL does not parse.
inline std::optional<thoonk::config> worker_config(const char* url) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url(url, ec);
  if (ec) {
    std::fprintf(stderr, "bad url %s: %s\n", url, ec.message().c_str());
    return std::nullopt;
  }
  return cfg;
}

/// A worker's command line, `<redis url> <queue>` and then its own
/// arguments (`rest`), with the config worker_config made of the URL.
struct worker_args {
  thoonk::config cfg;
  std::string queue;
  std::vector<std::string> rest;

  /// rest[i] as a whole number within min..max; prints why and returns
  /// nullopt when it is not one.
  std::optional<long> number(std::size_t i, const char* what, long min, long max) const {
    const std::string& text = rest.at(i);
    char* end = nullptr;
    const long v = std::strtol(text.c_str(), &end, 10);
    if (text.empty() || *end != '\0' || v < min || v > max) {
      std::fprintf(stderr, "%s: '%s' is not a number from %ld to %ld\n", what, text.c_str(), min,
                   max);
      return std::nullopt;
    }
    return v;
  }
};

/// Parses the command line of a worker whose arguments after `<redis url>
/// <queue>` are the `count` that `usage` names (worker_config for the URL);
/// prints the usage, or why the URL does not parse, and returns nullopt
/// when they do not fit.
inline std::optional<worker_args> parse_worker_args(int argc, char** argv, std::size_t count,
                                                    const char* usage) {
  if (argc < 1 || static_cast<std::size_t>(argc) != count + 3) {
    std::fprintf(stderr, "usage: %s <redis url> <queue> %s\n", argc > 0 ? argv[0] : "worker",
                 usage);
    return std::nullopt;
  }
  auto cfg = worker_config(argv[1]);
  if (!cfg) return std::nullopt;
  return worker_args{std::move(*cfg), argv[2], std::vector<std::string>(argv + 3, argv + argc)};
}

/// Calls `on_stop` on SIGTERM or SIGINT, or once `limit` has passed,
/// whichever comes first; cancel() (call it from on_stop) drops the other
/// wait. Keep it alive while the io_context runs.
class stop_trigger {
 public:
  stop_trigger(boost::asio::io_context& ioc, std::chrono::seconds limit,
               std::function<void()> on_stop)
      : signals_(ioc, SIGTERM, SIGINT), limit_(ioc, limit), on_stop_(std::move(on_stop)) {
    signals_.async_wait([this](boost::system::error_code e, int) {
      if (!e) on_stop_();
    });
    limit_.async_wait([this](boost::system::error_code e) {
      if (!e) on_stop_();
    });
  }
  void cancel() {
    signals_.cancel();
    limit_.cancel();
  }

 private:
  boost::asio::signal_set signals_;
  boost::asio::steady_timer limit_;
  std::function<void()> on_stop_;
};

/// The completion handler of a worker's setup coroutine (co_spawn): an
/// exception is printed, `exit_code` becomes 1 and `stop` is called.
inline auto on_setup_failure(int& exit_code, std::function<void()> stop) {
  return [&exit_code, stop = std::move(stop)](std::exception_ptr e) {
    if (!e) return;
    try {
      std::rethrow_exception(e);
    } catch (const std::exception& x) {
      std::fprintf(stderr, "worker failed: %s\n", x.what());
    }
    exit_code = 1;
    stop();
  };
}

/// Connects `client`, opens the job queue `name` and calls `setup(q)`.
template <class Setup>
boost::asio::awaitable<void> open_queue_then(thoonk::client& client, std::string name,
                                             Setup setup) {
  co_await client.async_connect(boost::asio::use_awaitable);
  auto q =
      co_await thoonk::job_queue::async_open(client, std::move(name), boost::asio::use_awaitable);
  setup(q);
}

/// Starts a worker on `ioc`: connects `client`, opens the job queue `name`
/// and hands it to `setup` (a plain function of thoonk::job_queue&); a
/// failure on the way ends the worker (on_setup_failure).
template <class Setup>
void start_worker(boost::asio::io_context& ioc, thoonk::client& client, std::string name,
                  int& exit_code, std::function<void()> stop, Setup setup) {
  boost::asio::co_spawn(ioc, open_queue_then(client, std::move(name), std::move(setup)),
                        on_setup_failure(exit_code, std::move(stop)));
}

}  // namespace thoonk::test
