// A real redis-server child process for the integration tests.
//
// docs/design.md §9: integration tests never mock Redis; the harness starts a
// throwaway server on a free loopback port without persistence and stops it.
// Setting THOONK_REDIS_URL points the suite at an external server instead
// (see shared_redis_url()).
#pragma once

#include <sys/types.h>
#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace thoonk::test {

/// How to start a private server.
struct redis_server_options {
  /// Appended to the harness's own flags, e.g. {"--requirepass", "secret"}.
  /// A "--unixsocket PATH" here is honoured and reported by unix_socket().
  std::vector<std::string> extra_args{};
  /// Also listen on a unix socket inside the server's temporary directory
  /// (permission 700), so tests need not invent a path.
  bool unix_socket = false;

  /// TLS files for a second, TLS port (redis `--tls-port`). The plain port
  /// stays: the readiness probe and tests that need a plain connection use
  /// it.
  struct tls_files {
    std::string cert_file;  ///< the server's certificate (PEM)
    std::string key_file;   ///< its key
    std::string ca_file;    ///< CAs trusted for client certificates
    /// `--tls-auth-clients yes`: clients must present a certificate
    /// signed by ca_file (mutual TLS). Off: none is asked for.
    bool auth_clients = false;
  };
  /// Set: the server also listens for TLS on tls_port().
  std::optional<tls_files> tls{};
};

/// Owns one redis-server child process and its temporary directory.
///
/// The constructor starts the server and returns once it answers PING (or
/// -NOAUTH when a password is set); failures throw std::runtime_error with the
/// tail of the server's log. A missing redis-server binary is an error, never
/// a skip. The destructor stops the server and removes the directory (set
/// THOONK_KEEP_REDIS_DIR=1 to keep it for post-mortems).
///
/// Not thread-safe: use one object from one thread. Note that the child gets
/// SIGTERM when the *thread* that started it exits (PR_SET_PDEATHSIG is per
/// thread), so start servers from a thread that outlives them, e.g. the test
/// runner's main thread.
class redis_server {
 public:
  redis_server();
  explicit redis_server(std::vector<std::string> extra_args);
  explicit redis_server(redis_server_options options);
  ~redis_server();

  redis_server(const redis_server&) = delete;
  redis_server& operator=(const redis_server&) = delete;

  /// Always "127.0.0.1": the server binds loopback only.
  const std::string& host() const noexcept { return host_; }
  unsigned short port() const noexcept { return port_; }
  /// The child's pid, or -1 after stop().
  pid_t pid() const noexcept { return pid_; }
  /// "redis://127.0.0.1:PORT" (no credentials, even with --requirepass).
  std::string url() const;
  /// The TLS port (redis_server_options::tls), 0 without TLS. Kept by
  /// restart().
  unsigned short tls_port() const noexcept { return tls_port_; }
  /// "rediss://127.0.0.1:TLS_PORT", or empty without TLS.
  std::string tls_url() const;
  /// Path of the unix socket, or empty when the server has none.
  const std::string& unix_socket() const noexcept { return unix_socket_; }
  /// The server's --logfile.
  std::string log_path() const;
  /// The server's temporary --dir.
  const std::string& dir() const noexcept { return dir_; }

  /// SIGTERM, wait up to 5 s, then SIGKILL. Idempotent; never throws.
  void stop() noexcept;
  /// SIGKILL (a crash: nothing is flushed, no goodbye to peers), reaped
  /// at once. Idempotent; never throws.
  void kill() noexcept;
  /// SIGSTOP / SIGCONT: the process stays alive but silent (its sockets
  /// stay open, nothing is read or answered), as a stalled peer or a
  /// replica whose link hangs. A server still suspended at stop() cannot
  /// act on SIGTERM and is killed after the grace period: resume it first.
  void suspend() noexcept;
  void resume() noexcept;
  /// stop() then start again on the same port and unix socket with the same
  /// arguments, returning once the new process answers. Data is gone (no
  /// persistence), which is what server-restart tests want.
  void restart();

 private:
  void start_on_free_port();
  // Returns false when the process exited before becoming ready because the
  // port was taken (so the caller may retry); throws on any other failure.
  bool try_start(unsigned short port);
  std::string failure_report(const std::string& what) const;

  std::string host_ = "127.0.0.1";
  unsigned short port_ = 0;
  pid_t pid_ = -1;
  std::string dir_;
  std::string unix_socket_;
  std::vector<std::string> extra_args_;
  std::string binary_;
  std::optional<redis_server_options::tls_files> tls_;
  unsigned short tls_port_ = 0;
};

/// THOONK_TEST_TOPOLOGY=cluster: the shared test server is a local Redis
/// Cluster (shared_cluster(), support/redis_cluster.hpp) instead of one
/// redis-server. Unset, empty or "single": one server. Any other value
/// throws std::runtime_error.
bool cluster_topology();

/// The server shared by the integration tests: started on first use, stopped
/// at process exit (and killed if the test process gets SIGINT/SIGTERM/SIGHUP).
/// Tests must not stop or restart it; construct a private redis_server for that.
/// Under cluster_topology() it throws std::logic_error: a test that needs
/// the one shared server must be tagged [single] (docs/cluster.md).
redis_server& shared_redis();

/// The URL integration tests should connect to: $THOONK_REDIS_URL when set
/// and non-empty (an external server; shared_redis() is then not started);
/// under cluster_topology() the shared cluster's nodes,
/// "redis://127.0.0.1:P1,...?cluster=yes"; otherwise shared_redis().url().
std::string shared_redis_url();

}  // namespace thoonk::test
