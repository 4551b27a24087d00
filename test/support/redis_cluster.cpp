#include "support/redis_cluster.hpp"

#include <cerrno>
#include <csignal>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <thread>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

namespace thoonk::test {

using namespace std::chrono_literals;

namespace {

// A port nobody listens on, for a node's cluster bus (`--cluster-port`:
// the default, port + 10000, may lie beyond 65535 for an ephemeral port).
unsigned short free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error("socket: " + std::string(std::strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    throw std::runtime_error("bind 127.0.0.1:0: " + std::string(std::strerror(errno)));
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

// Runs `argv` with its stdout and stderr captured, at most `max`; SIGKILL
// and an exception after that.
std::string run(const std::vector<std::string>& args, std::chrono::milliseconds max, int& status) {
  int pipefd[2];
  if (::pipe2(pipefd, O_CLOEXEC) != 0) throw std::runtime_error("pipe2 failed");
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  pid_t pid = ::fork();
  if (pid < 0) {
    ::close(pipefd[0]);
    ::close(pipefd[1]);
    throw std::runtime_error("fork failed");
  }
  if (pid == 0) {
    ::dup2(pipefd[1], 1);
    ::dup2(pipefd[1], 2);
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(pipefd[1]);
  std::string out;
  const auto deadline = std::chrono::steady_clock::now() + max;
  char buf[4096];
  bool timed_out = false;
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left <= 0ms) {
      timed_out = true;
      break;
    }
    pollfd p{pipefd[0], POLLIN, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) continue;
    ssize_t n = ::read(pipefd[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    out.append(buf, static_cast<std::size_t>(n));
  }
  ::close(pipefd[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  if (timed_out) throw std::runtime_error(args[0] + " " + args[1] + " timed out:\n" + out);
  status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  return out;
}

std::string tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  auto s = ss.str();
  return s.size() > 1500 ? s.substr(s.size() - 1500) : s;
}

}  // namespace

redis_cluster::redis_cluster(int primaries, int replicas, std::chrono::milliseconds node_timeout) {
  const int total = primaries * (1 + replicas);
  for (int i = 0; i < total; ++i) {
    redis_server_options o;
    o.extra_args = {"--cluster-enabled",
                    "yes",
                    "--cluster-port",
                    std::to_string(free_port()),
                    "--cluster-node-timeout",
                    std::to_string(node_timeout.count()),
                    "--cluster-replica-validity-factor",
                    "0",
                    "--repl-ping-replica-period",
                    "1"};
    servers_.push_back(std::make_unique<redis_server>(std::move(o)));
  }
  std::vector<std::string> args = {"redis-cli", "--cluster", "create"};
  for (auto& s : servers_) args.push_back(s->host() + ":" + std::to_string(s->port()));
  args.insert(args.end(), {"--cluster-replicas", std::to_string(replicas), "--cluster-yes"});
  int status = 0;
  auto out = run(args, 60s, status);
  if (status != 0 || out.find("[OK] All 16384 slots covered") == std::string::npos)
    throw std::runtime_error("redis-cli --cluster create failed:\n" + out);
  if (!wait_ok(60s)) {
    std::string logs;
    for (auto& s : servers_) logs += "\n--- " + s->log_path() + "\n" + tail(s->log_path());
    throw std::runtime_error("the cluster did not become ok within 60 s" + logs);
  }
  // Replicas synced: a failover test needs a replica that can take over.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  for (auto& s : servers_) {
    for (;;) {
      auto info = cli(s->port(), {"INFO", "replication"});
      if (info.find("role:master") != std::string::npos ||
          info.find("master_link_status:up") != std::string::npos)
        break;
      if (std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("a replica did not sync within 30 s:\n" + info);
      std::this_thread::sleep_for(50ms);
    }
  }
}

redis_cluster::~redis_cluster() {
  // Stopped by their pids (redis_server's destructor), replicas first so
  // that no failover starts while the primaries go.
  for (auto it = servers_.rbegin(); it != servers_.rend(); ++it) (*it)->stop();
}

redis_server* redis_cluster::server_on(unsigned short port) const {
  for (auto& s : servers_)
    if (s->port() == port) return s.get();
  return nullptr;
}

thoonk::config redis_cluster::client_config() const {
  thoonk::config cfg;
  cfg.cluster = true;
  for (auto& s : servers_) cfg.endpoints.push_back({s->host(), s->port()});
  cfg.host = servers_.front()->host();
  cfg.port = servers_.front()->port();
  cfg.client_name = "thoonk-cluster-test";
  cfg.connect_timeout = 2s;
  cfg.reconnect_min_delay = 20ms;
  cfg.reconnect_max_delay = 500ms;
  cfg.unavailable_retries = 30;
  return cfg;
}

std::string redis_cluster::cli(unsigned short port, const std::vector<std::string>& args) const {
  std::vector<std::string> a = {"redis-cli", "-h", "127.0.0.1", "-p", std::to_string(port)};
  a.insert(a.end(), args.begin(), args.end());
  int status = 0;
  auto out = run(a, 10s, status);
  if (status != 0)
    throw std::runtime_error("redis-cli failed (" + std::to_string(status) + "): " + out);
  return out;
}

std::vector<cluster_node_info> redis_cluster::nodes(unsigned short port) const {
  std::vector<cluster_node_info> out;
  std::istringstream lines(cli(port, {"CLUSTER", "NODES"}));
  std::string line;
  while (std::getline(lines, line)) {
    std::istringstream f(line);
    std::vector<std::string> w;
    std::string x;
    while (f >> x) w.push_back(x);
    if (w.size() < 8) continue;
    cluster_node_info n;
    n.id = w[0];
    auto colon = w[1].rfind(':');
    auto at = w[1].find('@');
    if (colon == std::string::npos) continue;
    n.port = static_cast<unsigned short>(std::stoi(w[1].substr(colon + 1, at - colon - 1)));
    n.primary = w[2].find("master") != std::string::npos;
    n.failed = w[2].find("fail") != std::string::npos;
    n.primary_id = w[3];
    for (std::size_t i = 8; i < w.size(); ++i) {
      if (w[i].front() == '[') continue;  // a migration in progress
      auto dash = w[i].find('-');
      int a = std::stoi(w[i].substr(0, dash));
      int b = dash == std::string::npos ? a : std::stoi(w[i].substr(dash + 1));
      n.slots.emplace_back(a, b);
    }
    out.push_back(std::move(n));
  }
  return out;
}

unsigned short redis_cluster::primary_of(std::uint16_t slot, unsigned short port) const {
  for (auto& n : nodes(port)) {
    if (!n.primary || n.failed) continue;
    for (auto [a, b] : n.slots)
      if (slot >= a && slot <= b) return n.port;
  }
  return 0;
}

unsigned short redis_cluster::any_live_port() const {
  for (auto& s : servers_)
    if (s->pid() > 0) return s->port();
  throw std::runtime_error("no live server in the cluster");
}

bool redis_cluster::wait_ok(std::chrono::milliseconds max) const {
  const auto deadline = std::chrono::steady_clock::now() + max;
  for (;;) {
    bool ok = true;
    std::string first_view;
    for (auto& s : servers_) {
      if (s->pid() <= 0) continue;
      auto info = cli(s->port(), {"CLUSTER", "INFO"});
      if (info.find("cluster_state:ok") == std::string::npos ||
          info.find("cluster_slots_assigned:16384") == std::string::npos) {
        ok = false;
        break;
      }
      // Every live node names the same primary for a few slots.
      std::string view;
      for (std::uint16_t slot : {0, 5000, 5461, 10000, 10923, 16383})
        view += std::to_string(primary_of(slot, s->port())) + ",";
      if (view.find(",0,") != std::string::npos || view.starts_with("0,")) ok = false;
      if (first_view.empty()) first_view = view;
      else if (view != first_view) ok = false;
      if (!ok) break;
    }
    if (ok) return true;
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(100ms);
  }
}

void redis_cluster::migrate_slot(std::uint16_t slot, unsigned short to_port, int batch,
                                 std::chrono::milliseconds pause) const {
  const auto from_port = primary_of(slot, to_port);
  if (from_port == 0 || from_port == to_port)
    throw std::runtime_error("migrate_slot: no other primary serves slot " + std::to_string(slot));
  auto id_of = [&](unsigned short port) {
    auto s = cli(port, {"CLUSTER", "MYID"});
    return s.substr(0, s.find_first_of("\r\n"));
  };
  const auto from_id = id_of(from_port), to_id = id_of(to_port);
  const auto slot_s = std::to_string(slot);
  auto expect_ok = [](const std::string& out, const char* what) {
    if (out.find("OK") == std::string::npos)
      throw std::runtime_error(std::string("migrate_slot: ") + what + ": " + out);
  };
  expect_ok(cli(to_port, {"CLUSTER", "SETSLOT", slot_s, "IMPORTING", from_id}), "IMPORTING");
  expect_ok(cli(from_port, {"CLUSTER", "SETSLOT", slot_s, "MIGRATING", to_id}), "MIGRATING");
  // Keys a load keeps writing into the slot move with the next batches; a
  // slot that never empties is a failure, not a wait without end.
  const auto deadline = std::chrono::steady_clock::now() + 120s;
  for (;;) {
    std::this_thread::sleep_for(pause);
    if (std::chrono::steady_clock::now() > deadline)
      throw std::runtime_error("migrate_slot: slot " + slot_s + " still holds keys after 120 s");
    auto keys_text = cli(from_port, {"CLUSTER", "GETKEYSINSLOT", slot_s, std::to_string(batch)});
    std::vector<std::string> keys;
    std::istringstream in(keys_text);
    std::string k;
    while (std::getline(in, k))
      if (!k.empty()) keys.push_back(k);
    if (keys.empty()) break;
    std::vector<std::string> args = {
        "MIGRATE", "127.0.0.1", std::to_string(to_port), "", "0", "5000", "REPLACE", "KEYS"};
    args.insert(args.end(), keys.begin(), keys.end());
    auto out = cli(from_port, args);
    if (out.find("OK") == std::string::npos && out.find("NOKEY") == std::string::npos)
      throw std::runtime_error("migrate_slot: MIGRATE: " + out);
  }
  // The target first, then the source, then every other primary.
  expect_ok(cli(to_port, {"CLUSTER", "SETSLOT", slot_s, "NODE", to_id}), "NODE (target)");
  expect_ok(cli(from_port, {"CLUSTER", "SETSLOT", slot_s, "NODE", to_id}), "NODE (source)");
  for (auto& n : nodes(to_port))
    if (n.primary && !n.failed && n.port != to_port && n.port != from_port)
      cli(n.port, {"CLUSTER", "SETSLOT", slot_s, "NODE", to_id});
}

namespace {

struct shared_cluster_state {
  redis_cluster cluster{3, 1, std::chrono::seconds(60)};
  std::vector<unsigned short> owner;  // slot -> primary port
  shared_cluster_state() : owner(16384, 0) {
    for (const auto& n : cluster.nodes(cluster.servers().front()->port())) {
      if (!n.primary || n.failed) continue;
      for (auto [a, b] : n.slots)
        for (int slot = a; slot <= b; ++slot) owner[static_cast<std::size_t>(slot)] = n.port;
    }
    for (auto port : owner)
      if (port == 0) throw std::runtime_error("the shared cluster's map leaves a slot unserved");
  }
};

shared_cluster_state& shared_state() {
  // A function-local static: started on first use, its servers stopped by
  // the destructor at exit. If starting throws, the next call tries again.
  static shared_cluster_state state;
  return state;
}

}  // namespace

redis_cluster& shared_cluster() { return shared_state().cluster; }

unsigned short shared_slot_owner(std::uint16_t slot) { return shared_state().owner.at(slot); }

}  // namespace thoonk::test
