// The first steps of a worker process that a test starts and stops by pid
// (tools/job_control_worker.cpp, faults/worker/fault_worker.cpp).
#pragma once

#include <thoonk/config.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <sys/prctl.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <exception>
#include <functional>
#include <optional>
#include <utility>

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

}  // namespace thoonk::test
