#include "support/redis_server.hpp"

#include "support/forked_child.hpp"
#include "support/redis_cluster.hpp"
#include "support/temp_dir.hpp"

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <system_error>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace thoonk::test {
namespace {

using namespace std::chrono_literals;
namespace fs = std::filesystem;

constexpr auto ready_timeout = 10s;
constexpr auto stop_timeout = 5s;
constexpr int port_attempts = 5;
// What redis-server writes to its log once it listens (7.0: "... connections",
// 7.2+: "... connections tcp"). Checking it proves the process answering PING
// on our port is *our* child and not a stranger that won a port race.
constexpr std::string_view ready_marker = "Ready to accept connections";
constexpr std::string_view port_taken_marker = "Address already in use";

// ---------------------------------------------------------------------------
// Children to kill if the test process is interrupted.
//
// A signal handler may only touch lock-free atomics, so live pids sit in a
// fixed table rather than a container. 64 concurrent servers is far more than
// any test needs; beyond that a server is simply not covered by the handler
// (PR_SET_PDEATHSIG still covers it).
// ---------------------------------------------------------------------------
std::array<std::atomic<pid_t>, 64> live_children{};
static_assert(std::atomic<pid_t>::is_always_lock_free);

void register_child(pid_t pid) noexcept {
  for (auto& slot : live_children) {
    pid_t expected = 0;
    if (slot.compare_exchange_strong(expected, pid)) return;
  }
}

void unregister_child(pid_t pid) noexcept {
  for (auto& slot : live_children) {
    pid_t expected = pid;
    if (slot.compare_exchange_strong(expected, 0)) return;
  }
}

constexpr std::array<int, 3> forwarded_signals{SIGINT, SIGTERM, SIGHUP};
std::array<struct sigaction, forwarded_signals.size()> previous_actions{};

extern "C" void kill_children_then_reraise(int sig) {
  // Only async-signal-safe calls here: kill, sigaction, raise.
  for (auto& slot : live_children) {
    const pid_t pid = slot.load();
    if (pid > 0) ::kill(pid, SIGTERM);
  }
  // Hand the signal to whoever was there before us (normally SIG_DFL, which
  // terminates). The signal is blocked while we run, so raise() delivers it
  // right after we return, to the restored disposition.
  for (std::size_t i = 0; i < forwarded_signals.size(); ++i) {
    if (forwarded_signals[i] == sig) ::sigaction(sig, &previous_actions[i], nullptr);
  }
  ::raise(sig);
}

void install_signal_handlers_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    for (std::size_t i = 0; i < forwarded_signals.size(); ++i) {
      struct sigaction action {};
      action.sa_handler = &kill_children_then_reraise;
      sigemptyset(&action.sa_mask);
      action.sa_flags = SA_RESTART;
      ::sigaction(forwarded_signals[i], &action, &previous_actions[i]);
      // A shell that started us in the background made SIGINT ignored on
      // purpose; respect that instead of turning it into a killer.
      if (previous_actions[i].sa_handler == SIG_IGN)
        ::sigaction(forwarded_signals[i], &previous_actions[i], nullptr);
    }
  });
}

// Install before main(): Catch2 saves the handlers present when each test case
// starts and restores them afterwards, so installing ours lazily from inside
// a test would be undone at the end of that test. Installed early, Catch's
// own handler reports the failure, restores ours and re-raises into it.
const bool signal_handlers_installed = (install_signal_handlers_once(), true);

// ---------------------------------------------------------------------------
// Small POSIX helpers
// ---------------------------------------------------------------------------

[[noreturn]] void throw_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

struct fd_guard {
  int fd = -1;
  explicit fd_guard(int f) noexcept : fd(f) {}
  ~fd_guard() {
    if (fd >= 0) ::close(fd);
  }
  fd_guard(const fd_guard&) = delete;
  fd_guard& operator=(const fd_guard&) = delete;
};

// Binding port 0 lets the kernel choose a port nobody is listening on. We
// must close the socket before redis-server can bind it, so another process
// may grab it in between: try_start() detects that and the caller retries.
unsigned short pick_free_port() {
  fd_guard s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) throw_errno("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
    throw_errno("bind 127.0.0.1:0");
  socklen_t len = sizeof addr;
  if (::getsockname(s.fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw_errno("getsockname");
  return ntohs(addr.sin_port);
}

// One readiness probe with a raw blocking socket: the library under test must
// not be used to decide whether the server it is tested against is up.
bool answers_ping(unsigned short port) {
  fd_guard s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (s.fd < 0) return false;
  timeval tv{0, 500'000};
  ::setsockopt(s.fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(s.fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (::connect(s.fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) return false;
  constexpr std::string_view ping = "PING\r\n";
  // MSG_NOSIGNAL: a server dying mid-probe must not SIGPIPE the test binary.
  if (::send(s.fd, ping.data(), ping.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(ping.size()))
    return false;
  std::string reply;
  char buf[128];
  while (reply.find("\r\n") == std::string::npos && reply.size() < 512) {
    const ssize_t n = ::recv(s.fd, buf, sizeof buf, 0);
    if (n <= 0) return false;
    reply.append(buf, static_cast<std::size_t>(n));
  }
  // -NOAUTH: a server with --requirepass is up, it just wants a password.
  return reply.starts_with("+PONG") || reply.starts_with("-NOAUTH");
}

std::string find_redis_server() {
  // Escape hatch for machines with redis-server outside PATH.
  if (const char* explicit_path = std::getenv("THOONK_REDIS_SERVER");
      explicit_path && *explicit_path) {
    if (::access(explicit_path, X_OK) == 0) return explicit_path;
    throw std::runtime_error(std::string("THOONK_REDIS_SERVER=") + explicit_path +
                             " is not an executable file");
  }
  const char* path_env = std::getenv("PATH");
  std::string_view path = path_env ? path_env : "";
  while (true) {
    const auto colon = path.find(':');
    std::string dir(path.substr(0, colon));
    if (dir.empty()) dir = ".";
    const std::string candidate = dir + "/redis-server";
    struct stat st {};
    if (::stat(candidate.c_str(), &st) == 0 && S_ISREG(st.st_mode) &&
        ::access(candidate.c_str(), X_OK) == 0)
      return candidate;
    if (colon == std::string_view::npos) break;
    path.remove_prefix(colon + 1);
  }
  throw std::runtime_error(
      "redis-server not found on PATH: run scripts/run-tests.sh, which installs it");
}

std::uintmax_t file_size_or_zero(const std::string& path) {
  std::error_code ec;
  const auto size = fs::file_size(path, ec);
  return ec ? 0 : size;
}

std::string read_from(const std::string& path, std::uintmax_t offset) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return {};
  in.seekg(static_cast<std::streamoff>(offset));
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

std::string last_lines(const std::string& text, std::size_t n) {
  std::vector<std::string_view> lines;
  std::string_view rest = text;
  while (!rest.empty()) {
    const auto nl = rest.find('\n');
    lines.push_back(rest.substr(0, nl));
    if (nl == std::string_view::npos) break;
    rest.remove_prefix(nl + 1);
  }
  std::string out;
  for (std::size_t i = lines.size() > n ? lines.size() - n : 0; i < lines.size(); ++i)
    out.append(lines[i]).append("\n");
  return out;
}

// Whether the child has exited, without reaping it: a zombie keeps its pid, so
// the signal handler's table can be cleared before the pid may be reused by
// an unrelated process. block=true waits for the exit.
bool has_exited(pid_t pid, bool block) noexcept {
  while (true) {
    siginfo_t info{};
    const int r =
        ::waitid(P_PID, static_cast<id_t>(pid), &info, WEXITED | WNOWAIT | (block ? 0 : WNOHANG));
    if (r == 0) return info.si_pid == pid;
    if (errno == EINTR) continue;
    return true;  // ECHILD: not ours any more, treat as gone.
  }
}

// Forgets and reaps a child that has exited (has_exited() returned true).
void forget_child(pid_t pid) noexcept {
  unregister_child(pid);
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

}  // namespace

// ---------------------------------------------------------------------------
// redis_server
// ---------------------------------------------------------------------------

redis_server::redis_server() : redis_server(redis_server_options{}) {}

redis_server::redis_server(std::vector<std::string> extra_args)
    : redis_server(redis_server_options{std::move(extra_args), false}) {}

redis_server::redis_server(redis_server_options options)
    : extra_args_(std::move(options.extra_args)), tls_(std::move(options.tls)) {
  // Fail before creating anything when the binary is missing.
  binary_ = find_redis_server();
  dir_ = make_temp_dir("thoonk-redis");
  try {
    for (std::size_t i = 0; i + 1 < extra_args_.size(); ++i)
      if (extra_args_[i] == "--unixsocket") unix_socket_ = extra_args_[i + 1];
    if (options.unix_socket && unix_socket_.empty()) {
      unix_socket_ = dir_ + "/redis.sock";
      // sockaddr_un::sun_path is 108 bytes including the terminator.
      if (unix_socket_.size() >= 108)
        throw std::runtime_error("unix socket path too long (set a shorter TMPDIR): " +
                                 unix_socket_);
      extra_args_.insert(extra_args_.end(),
                         {"--unixsocket", unix_socket_, "--unixsocketperm", "700"});
    }
    start_on_free_port();
  } catch (...) {
    stop();
    remove_temp_dir(dir_);
    throw;
  }
}

redis_server::~redis_server() {
  stop();
  remove_temp_dir(dir_);
}

std::string redis_server::url() const { return "redis://" + host_ + ":" + std::to_string(port_); }

std::string redis_server::log_path() const { return dir_ + "/redis.log"; }

std::string redis_server::tls_url() const {
  return tls_ ? "rediss://" + host_ + ":" + std::to_string(tls_port_) : std::string();
}

void redis_server::start_on_free_port() {
  for (int attempt = 1; attempt <= port_attempts; ++attempt) {
    const unsigned short port = pick_free_port();
    if (tls_) {
      // Two ports, both free a moment ago; a race for either is seen as
      // "Address already in use" and retried like the plain one.
      do {
        tls_port_ = pick_free_port();
      } while (tls_port_ == port);
    }
    if (try_start(port)) return;
  }
  throw std::runtime_error(failure_report("redis-server could not bind a free port in " +
                                          std::to_string(port_attempts) + " attempts"));
}

void redis_server::restart() {
  stop();
  // Same port so clients reconnecting to the old address find the new server.
  // Redis sets SO_REUSEADDR, so TIME_WAIT leftovers do not block the bind; a
  // brief retry covers the rare case of someone else briefly holding it.
  for (int attempt = 1; attempt <= port_attempts; ++attempt) {
    if (try_start(port_)) return;
    std::this_thread::sleep_for(200ms);
  }
  throw std::runtime_error(failure_report("redis-server could not be restarted on port " +
                                          std::to_string(port_) + ": the port is taken"));
}

bool redis_server::try_start(unsigned short port) {
  install_signal_handlers_once();
  port_ = port;
  const std::string log = log_path();
  // The log file is appended across restarts; look only at this start's part.
  const auto log_offset = file_size_or_zero(log);

  std::vector<std::string> args = {
      binary_, "--bind", host_, "--port", std::to_string(port), "--save", "", "--appendonly", "no",
      "--daemonize", "no", "--protected-mode", "yes", "--dir", dir_, "--logfile", log,
      // Fault tests use DEBUG SLEEP to make the server go silent; Redis 7
      // refuses DEBUG unless enabled (local: only from loopback).
      "--enable-debug-command", "local"};
  if (tls_) {
    args.insert(args.end(),
                {"--tls-port", std::to_string(tls_port_), "--tls-cert-file", tls_->cert_file,
                 "--tls-key-file", tls_->key_file, "--tls-ca-cert-file", tls_->ca_file,
                 "--tls-auth-clients", tls_->auth_clients ? "yes" : "no"});
  }
  args.insert(args.end(), extra_args_.begin(), extra_args_.end());

  // Everything the child needs is prepared before fork(): in a multi-threaded
  // parent the child may only call async-signal-safe functions until exec.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  // Early startup errors (bad flags) go to stderr before the logfile is used.
  fd_guard output(
      ::open((dir_ + "/redis.stderr").c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600));
  if (output.fd < 0) throw_errno("open " + dir_ + "/redis.stderr");
  fd_guard devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  if (devnull.fd < 0) throw_errno("open /dev/null");
  // The child reports a failed exec through this pipe; a successful exec
  // closes it (O_CLOEXEC) and the parent reads EOF.
  int exec_pipe[2];
  if (::pipe2(exec_pipe, O_CLOEXEC) != 0) throw_errno("pipe2");
  fd_guard exec_read(exec_pipe[0]);
  fd_guard exec_write(exec_pipe[1]);
  const long open_max = std::min(::sysconf(_SC_OPEN_MAX), 65536L);
  const pid_t parent = ::getpid();

  const pid_t child = ::fork();
  if (child < 0) throw_errno("fork");
  if (child == 0) {
    // Dies with the parent, so no server is left behind on a CI machine.
    set_up_forked_child(parent, SIGTERM, devnull.fd, output.fd);
    // Do not let the server inherit the test's sockets: a client socket kept
    // open by the child would hide disconnects from restart tests. Asio does
    // not open sockets with CLOEXEC, so mark every other fd now.
    if (::close_range(3, ~0U, CLOSE_RANGE_CLOEXEC) != 0) {
      for (int fd = 3; fd < open_max; ++fd)
        if (fd != exec_write.fd) ::close(fd);
    }
    ::execv(argv[0], argv.data());
    const int err = errno;
    [[maybe_unused]] auto ignored = ::write(exec_write.fd, &err, sizeof err);
    ::_exit(127);
  }

  pid_ = child;
  register_child(child);
  ::close(exec_write.fd);
  exec_write.fd = -1;
  int exec_errno = 0;
  ssize_t n;
  do {
    n = ::read(exec_read.fd, &exec_errno, sizeof exec_errno);
  } while (n < 0 && errno == EINTR);
  if (n > 0) {
    has_exited(pid_, true);
    forget_child(pid_);
    pid_ = -1;
    throw std::runtime_error("cannot execute " + binary_ + ": " + std::strerror(exec_errno));
  }

  const auto deadline = std::chrono::steady_clock::now() + ready_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (has_exited(pid_, false)) {
      forget_child(pid_);
      pid_ = -1;
      if (read_from(log, log_offset).find(port_taken_marker) != std::string::npos) return false;
      throw std::runtime_error(failure_report("redis-server exited during startup"));
    }
    if (read_from(log, log_offset).find(ready_marker) != std::string::npos && answers_ping(port))
      return true;
    std::this_thread::sleep_for(20ms);
  }
  stop();
  throw std::runtime_error(failure_report(
      "redis-server did not answer PING on 127.0.0.1:" + std::to_string(port) + " within 10 s"));
}

void redis_server::suspend() noexcept {
  if (pid_ > 0) ::kill(pid_, SIGSTOP);
}

void redis_server::resume() noexcept {
  if (pid_ > 0) ::kill(pid_, SIGCONT);
}

void redis_server::kill() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  has_exited(pid_, true);
  forget_child(pid_);
  pid_ = -1;
}

void redis_server::stop() noexcept {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGTERM);
  bool gone = false;
  const auto deadline = std::chrono::steady_clock::now() + stop_timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (has_exited(pid_, false)) {
      gone = true;
      break;
    }
    std::this_thread::sleep_for(10ms);
  }
  if (!gone) {
    ::kill(pid_, SIGKILL);
    has_exited(pid_, true);
  }
  forget_child(pid_);
  pid_ = -1;
}

std::string redis_server::failure_report(const std::string& what) const {
  std::ostringstream out;
  out << what << "\n  binary: " << binary_ << "\n  dir: " << dir_ << "\n  extra args:";
  for (const auto& a : extra_args_) out << " '" << a << "'";
  const std::string log = last_lines(read_from(log_path(), 0), 30);
  const std::string err = last_lines(read_from(dir_ + "/redis.stderr", 0), 30);
  out << "\n--- tail of " << log_path() << " ---\n" << (log.empty() ? "(empty)\n" : log);
  if (!err.empty()) out << "--- tail of redis-server stderr ---\n" << err;
  return out.str();
}

// ---------------------------------------------------------------------------
// The shared server
// ---------------------------------------------------------------------------

bool cluster_topology() {
  static const bool cluster = [] {
    const char* v = std::getenv("THOONK_TEST_TOPOLOGY");
    const std::string_view topology = v ? v : "";
    if (topology.empty() || topology == "single") return false;
    if (topology == "cluster") return true;
    throw std::runtime_error("THOONK_TEST_TOPOLOGY=" + std::string(topology) +
                             ": say \"single\" (or nothing) or \"cluster\"");
  }();
  return cluster;
}

redis_server& shared_redis() {
  if (cluster_topology())
    throw std::logic_error(
        "the shared test server is a cluster (THOONK_TEST_TOPOLOGY=cluster): a test that "
        "needs one server must be tagged [single]");
  // A function-local static: started on first use, stopped by its destructor
  // at exit. If starting throws, the next call tries again.
  static redis_server server;
  return server;
}

std::string shared_redis_url() {
  if (const char* url = std::getenv("THOONK_REDIS_URL"); url && *url) return url;
  if (cluster_topology()) {
    std::string url = "redis://";
    for (const auto& s : shared_cluster().servers()) {
      if (url.size() > 8) url += ",";
      url += s->host() + ":" + std::to_string(s->port());
    }
    return url + "?cluster=yes";
  }
  return shared_redis().url();
}

}  // namespace thoonk::test
