#include "fault_support.hpp"

#include "support/forked_child.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>
#include <boost/system/system_error.hpp>

#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace thoonk::faults {

const profile& current_profile() {
  static const profile p = [] {
    const char* env = std::getenv("THOONK_FAULTS_PROFILE");
    const std::string_view name = env && *env ? env : "ci";
    using namespace std::chrono_literals;
    if (name == "ci") return profile{"ci", 2000, 6, 2, 5, 3, 1000ms, 90s};
    if (name == "full") return profile{"full", 10000, 30, 5, 20, 10, 5000ms, 300s};
    throw std::invalid_argument("THOONK_FAULTS_PROFILE=" + std::string(name) +
                                ": use ci (the default) or full");
  }();
  return p;
}

thoonk::config fault_config(const std::string& url) {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url(url, ec);
  if (ec) throw boost::system::system_error(ec, url);
  using namespace std::chrono_literals;
  cfg.connect_timeout = 2s;
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 200ms;
  return cfg;
}

thoonk::job_queue::settings requeue_on_lapse(std::chrono::milliseconds claim_timeout) {
  thoonk::job_queue::settings s;
  s.claim_timeout = claim_timeout;
  s.retry.max_stalls = 1000000;
  return s;
}

outcome classify(const boost::system::error_code& ec) {
  if (!ec) return outcome::ok;
  if (ec == thoonk::error::unknown_outcome || ec == thoonk::error::request_timeout ||
      ec == boost::asio::error::operation_aborted)
    return outcome::unknown;
  return outcome::failed;
}

void tally::add(outcome o) {
  switch (o) {
    case outcome::ok: ++ok; break;
    case outcome::failed: ++failed; break;
    case outcome::unknown: ++unknown; break;
  }
}

result_audit audit_results(const std::vector<std::int64_t>& stored) {
  result_audit a;
  for (auto n : stored) {
    a.lost += n == 0;
    a.twice += n > 1;
  }
  return a;
}

namespace {

// The rows live in the object that prints them at exit, so they are still
// there when it runs (after Catch2 printed its own summary).
struct summary_printer {
  std::mutex m;
  std::vector<summary_row> rows;
  ~summary_printer() {
    if (rows.empty()) return;
    const std::string table = summary_table_locked();
    std::cout << "\nFault-injection summary (profile " << current_profile().name << ")\n"
              << table << std::flush;
    if (const char* path = std::getenv("THOONK_FAULTS_REPORT"); path && *path) {
      std::ofstream out(path, std::ios::trunc);
      out << table;
    }
  }
  std::string summary_table_locked() const {
    std::ostringstream out;
    out << "| scenario | operations | lost | duplicates | unknown | recovery time |\n"
        << "|---|---:|---:|---:|---:|---|\n";
    for (const auto& r : rows)
      out << "| " << r.scenario << " | " << r.operations << " | " << r.lost << " | " << r.duplicates
          << " | " << r.unknown << " | " << r.recovery << " |\n";
    return out.str();
  }
};

summary_printer& printer() {
  static summary_printer p;
  return p;
}

}  // namespace

void report(summary_row row) {
  auto& p = printer();
  std::lock_guard lock(p.m);
  p.rows.push_back(std::move(row));
}

std::string summary_table() {
  auto& p = printer();
  std::lock_guard lock(p.m);
  return p.summary_table_locked();
}

std::int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------------------
// logged_process
// ---------------------------------------------------------------------------

logged_process::logged_process(std::vector<std::string> argv_in, const std::string& output_file) {
  // Everything the child needs is made before fork(): after it, only
  // async-signal-safe calls until exec.
  std::vector<char*> argv;
  for (auto& a : argv_in) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int out = ::open(output_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (out < 0) throw std::system_error(errno, std::generic_category(), "open " + output_file);
  const pid_t parent = ::getpid();
  const pid_t child = ::fork();
  if (child < 0) {
    const int err = errno;
    ::close(out);
    throw std::system_error(err, std::generic_category(), "fork");
  }
  if (child == 0) {
    thoonk::test::set_up_forked_child(parent, SIGKILL, ::open("/dev/null", O_RDONLY), out);
    // The test's sockets (Asio opens them without CLOEXEC) must not stay
    // open in the child, or a server would not see them close.
    ::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(out);
  pid_ = child;
}

logged_process::~logged_process() { kill_now(); }

void logged_process::signal(int sig) noexcept {
  if (pid_ > 0) ::kill(pid_, sig);
}

bool logged_process::wait_for(std::chrono::milliseconds limit) noexcept {
  if (pid_ <= 0) return true;
  const auto end = std::chrono::steady_clock::now() + limit;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_ || (r < 0 && errno == ECHILD)) {
      status_ = status;
      pid_ = -1;
      return true;
    }
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

void logged_process::kill_now() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  int status = 0;
  while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
  }
  status_ = status;
  pid_ = -1;
}

io_thread::io_thread(boost::asio::io_context& ioc, std::chrono::milliseconds limit)
    : ioc_(ioc), guard_(ioc.get_executor()) {
  // run_coro leaves the io_context stopped after each coroutine.
  ioc_.restart();
  thread_ = std::thread([this, limit] { ioc_.run_for(limit); });
}

void io_thread::join() {
  guard_.reset();
  if (thread_.joinable()) thread_.join();
}

void io_thread::stop() {
  guard_.reset();
  ioc_.stop();
  if (thread_.joinable()) thread_.join();
}

}  // namespace thoonk::faults
