// A program the integration tests start as a child process (a worker in its
// own process, to be stopped or killed), stopped by its pid: SIGTERM then,
// if it has not exited, SIGKILL; the destructor SIGKILLs one still running.
// Its stdout comes through a pipe. Never signals a pid <= 0.
#pragma once

#include "support/run_coro.hpp"

#include <boost/asio/awaitable.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace thoonk::test {

class child_process {
 public:
  /// Starts `program` with `args` (REQUIREs that it started).
  child_process(std::string program, const std::vector<std::string>& args);
  ~child_process();
  child_process(const child_process&) = delete;
  child_process& operator=(const child_process&) = delete;

  pid_t pid() const { return pid_; }

  /// What it printed so far.
  const std::string& output();

  /// SIGTERM; waits (polling, at most `max`, then SIGKILL) and returns its
  /// exit status (128 + n: killed by signal n; -1: it had not exited in time).
  boost::asio::awaitable<int> stop(std::chrono::milliseconds max = std::chrono::seconds(20));

  /// SIGKILL, and reaps it. Returns at once.
  void kill();

  /// The number after the first `word ` in its output, or -1.
  std::int64_t number_after(const std::string& word);

 private:
  pid_t pid_ = -1;
  int out_ = -1;
  std::string text_;
};

}  // namespace thoonk::test
