// What every fault scenario shares: the profile (how long and how hard),
// how an operation's outcome is classified, the summary table the suite
// prints at the end, and child processes started and stopped by pid.
#pragma once

#include "support/temp_dir.hpp"

#include <thoonk/config.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/system/error_code.hpp>

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

namespace thoonk::faults {

/// The size of every scenario, from THOONK_FAULTS_PROFILE: `ci` (the
/// default: a short run for CI on two cores) or `full` (the figures in
/// docs/reliability.md). Any other value is refused with an exception that
/// names the allowed ones.
struct profile {
  std::string name;
  int jobs;                                ///< worker kills: jobs run
  int worker_kills;                        ///< worker kills: SIGKILLs sent
  int server_kills;                        ///< redis-server SIGKILLs (each followed by a restart)
  int proxy_resets;                        ///< resets of every proxied connection
  int proxy_cuts;                          ///< large replies cut in the middle
  std::chrono::milliseconds trickle_time;  ///< one-byte-at-a-time phase
  std::chrono::seconds scenario_limit;     ///< the bound on one scenario's run
};
const profile& current_profile();

/// A config for `url` that notices faults quickly: reconnects start after
/// 10 ms (at most 200 ms apart), connects give up after 2 s.
thoonk::config fault_config(const std::string& url);

/// Job queue settings for the fault scenarios: claims lapse after
/// `claim_timeout`, and a lapse never makes a dead letter (faults may
/// lapse one job many times; every lapse must requeue it).
thoonk::job_queue::settings requeue_on_lapse(std::chrono::milliseconds claim_timeout);

/// What the client learnt about one operation.
enum class outcome {
  ok,       ///< it completed and its reply says so
  failed,   ///< it did not run (refused before it was sent, or the server said no)
  unknown,  ///< it was sent and no reply came: it may or may not have run
};

/// The library's errors that mean "sent, no reply": unknown_outcome (the
/// connection died), request_timeout and operation_aborted (abandoned after
/// it was written). Any other error is a definite failure.
outcome classify(const boost::system::error_code& ec);

/// Counts of outcomes.
struct tally {
  std::uint64_t ok = 0, failed = 0, unknown = 0;
  void add(outcome o);
  std::uint64_t total() const { return ok + failed + unknown; }
};

/// Jobs that stored no result (lost) and jobs that stored more than one
/// (twice), from each job's count of stored results (the durable result
/// feed.jobfinished lists): both 0 when every job finished exactly once.
struct result_audit {
  std::uint64_t lost = 0, twice = 0;
};
result_audit audit_results(const std::vector<std::int64_t>& stored);

/// One line of the summary table.
struct summary_row {
  std::string scenario;
  std::uint64_t operations = 0;
  std::uint64_t lost = 0;
  std::uint64_t duplicates = 0;
  std::uint64_t unknown = 0;
  std::string recovery;  ///< what was timed and the figure, e.g. "reconnect 120 ms"
};

/// Adds a row to the table printed when the run ends (and written, as
/// Markdown, to $THOONK_FAULTS_REPORT when set).
void report(summary_row row);

/// The table so far, as Markdown.
std::string summary_table();

/// Milliseconds on the steady clock (CLOCK_MONOTONIC: the same in every
/// process of the machine, so the worker processes' logs compare with the
/// test's own times).
std::int64_t now_ms();

/// A child process started with execv, its stdout and stderr appended to
/// a file, waited for synchronously (the fault scenarios run their clients
/// on io_threads; support/child_process.hpp is the coroutine-side kind,
/// with its output read through a pipe). It gets SIGKILL if the test process dies
/// (PR_SET_PDEATHSIG, so start children from a thread that outlives them). The destructor kills
/// (SIGKILL) and reaps a child still running. Not thread-safe.
class logged_process {
 public:
  logged_process(std::vector<std::string> argv, const std::string& output_file);
  ~logged_process();
  logged_process(const logged_process&) = delete;
  logged_process& operator=(const logged_process&) = delete;

  pid_t pid() const noexcept { return pid_; }
  bool running() const noexcept { return pid_ > 0; }
  /// Sends `sig` to the child (never to a pid <= 0: a reaped child is a no-op).
  void signal(int sig) noexcept;
  /// Waits up to `limit` for the child to exit and reaps it; true when it
  /// exited. exit_status() is then its status (waitpid's).
  bool wait_for(std::chrono::milliseconds limit) noexcept;
  /// SIGKILL, then reap.
  void kill_now() noexcept;
  int exit_status() const noexcept { return status_; }

 private:
  pid_t pid_ = -1;
  int status_ = 0;
};

/// Runs `ioc` on a thread of its own for at most `limit` (kept busy by a
/// work guard until join() or stop()). The destructor stops the io_context
/// and waits for the thread, so a scenario that fails half-way (an
/// exception on the test's thread) still ends it.
class io_thread {
 public:
  io_thread(boost::asio::io_context& ioc, std::chrono::milliseconds limit);
  ~io_thread() { stop(); }
  io_thread(const io_thread&) = delete;
  io_thread& operator=(const io_thread&) = delete;
  /// Waits until the io_context runs out of work or is stopped (or the
  /// limit passes).
  void join();
  /// Stops the io_context and waits for the thread.
  void stop();

 private:
  boost::asio::io_context& ioc_;
  boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_;
  std::thread thread_;
};

using thoonk::test::temp_dir;

}  // namespace thoonk::faults
