// The `thoonk` command-line tool as a user runs it: the built binary
// ($THOONK_CLI, set by the ctest entry `cli`) started as a child process
// against a real redis-server on a free loopback port, its stdout, stderr
// and exit code checked for every subcommand, including a wrong password,
// an unreachable server and missing names (docs/operations.md,
// "Command-line tool").
#include "admin/admin_fixture.hpp"
#include "support/redis_server.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/version.hpp>

#include <catch2/catch.hpp>

#include <boost/asio/ip/tcp.hpp>
#include <boost/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

extern char** environ;

namespace {

namespace asio = boost::asio;
namespace json = boost::json;
using namespace std::chrono_literals;

std::string cli_binary() {
  const char* p = std::getenv("THOONK_CLI");
  if (!p || !*p) throw std::runtime_error("THOONK_CLI is not set: run this test through ctest");
  return p;
}

/// A run of the binary: started at construction, collected by wait().
class cli_run {
 public:
  /// `url` is passed as THOONK_REDIS_URL (empty: the variable is removed).
  cli_run(const std::vector<std::string>& args, const std::string& url)
      : cli_run(cli_binary(), args, url) {}
  /// Another program (`script`, to give the tool a terminal).
  cli_run(const std::string& bin, const std::vector<std::string>& args, const std::string& url) {
    int out[2], err[2];
    if (::pipe(out) != 0 || ::pipe(err) != 0) throw std::runtime_error("pipe failed");
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, out[1], 1);
    posix_spawn_file_actions_adddup2(&fa, err[1], 2);
    posix_spawn_file_actions_addclose(&fa, out[0]);
    posix_spawn_file_actions_addclose(&fa, err[0]);
    posix_spawn_file_actions_addclose(&fa, out[1]);
    posix_spawn_file_actions_addclose(&fa, err[1]);
    std::vector<std::string> env;
    for (char** e = environ; *e; ++e)
      if (std::strncmp(*e, "THOONK_REDIS_URL=", 17) != 0 &&
          std::strncmp(*e, "THOONK_ADMIN_TOKEN=", 19) != 0)
        env.emplace_back(*e);
    if (!url.empty()) env.push_back("THOONK_REDIS_URL=" + url);
    std::vector<char*> envp;
    for (auto& e : env) envp.push_back(e.data());
    envp.push_back(nullptr);
    std::vector<std::string> argv_s{bin};
    argv_s.insert(argv_s.end(), args.begin(), args.end());
    std::vector<char*> argv;
    for (auto& a : argv_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    int rc = posix_spawn(&pid_, bin.c_str(), &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    ::close(out[1]);
    ::close(err[1]);
    out_fd_ = out[0];
    err_fd_ = err[0];
    if (rc != 0) {
      pid_ = -1;
      throw std::runtime_error("cannot start " + bin + ": " + std::strerror(rc));
    }
  }
  ~cli_run() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
    if (err_fd_ >= 0) ::close(err_fd_);
  }
  cli_run(const cli_run&) = delete;
  cli_run& operator=(const cli_run&) = delete;

  /// Reads what is available within `d` (returns early at end of output).
  void pump(std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      if (left.count() <= 0) return;
      pollfd fds[2] = {{out_fd_, POLLIN, 0}, {err_fd_, POLLIN, 0}};
      if (::poll(fds, 2, static_cast<int>(left.count())) <= 0) return;
      read_one(fds[0], out_fd_, out);
      read_one(fds[1], err_fd_, err);
    }
  }
  /// Reads until stdout holds `text` or `d` passed; true when it does.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds d) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (out.find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() >= until || (out_fd_ < 0 && err_fd_ < 0)) break;
      pump(50ms);
    }
    return out.find(text) != std::string::npos;
  }
  void signal(int sig) {
    if (pid_ > 0) ::kill(pid_, sig);
  }
  /// Collects the output and the exit code (128 + n: killed by signal n;
  /// -1: still running after `d`, then killed).
  int wait(std::chrono::milliseconds d = 20s) {
    const auto until = std::chrono::steady_clock::now() + d;
    while (out_fd_ >= 0 || err_fd_ >= 0) {
      if (std::chrono::steady_clock::now() >= until) break;
      pump(100ms);
    }
    int status = 0;
    while (true) {
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) break;
      if (std::chrono::steady_clock::now() >= until) {
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        pid_ = -1;
        return -1;
      }
      std::this_thread::sleep_for(10ms);
    }
    pid_ = -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return -1;
  }

  std::string out, err;

 private:
  static void read_one(const pollfd& p, int& fd, std::string& to) {
    if (fd < 0 || !(p.revents & (POLLIN | POLLHUP | POLLERR))) return;
    char buf[4096];
    auto n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      to.append(buf, static_cast<std::size_t>(n));
    } else {
      ::close(fd);
      fd = -1;
    }
  }
  pid_t pid_ = -1;
  int out_fd_ = -1;
  int err_fd_ = -1;
};

struct result {
  int code = -1;
  std::string out, err;
};

result run(const std::vector<std::string>& args, const std::string& url) {
  cli_run r(args, url);
  result res;
  res.code = r.wait();
  res.out = std::move(r.out);
  res.err = std::move(r.err);
  std::string cmdline;
  for (const auto& a : args) cmdline += a + " ";
  UNSCOPED_INFO("thoonk " << cmdline << "-> " << res.code << "\nstdout:\n"
                          << res.out << "stderr:\n"
                          << res.err);
  return res;
}

bool has(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

json::object parse_object(const std::string& s) { return json::parse(s).as_object(); }

/// A loopback port nothing listens on: bound, then closed.
unsigned short closed_port() {
  asio::io_context ioc;
  asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  auto p = a.local_endpoint().port();
  a.close();
  return p;
}

/// A private server seeded with jobs in every state, a plain queue, a feed
/// and a sorted feed (test/admin/admin_fixture.hpp).
struct seeded_server {
  thoonk::test::redis_server srv;
  thoonk::test::admin::seeded names;
  seeded_server() {
    asio::io_context ioc;
    boost::system::error_code ec;
    auto cfg = thoonk::config::from_url(srv.url(), ec);
    REQUIRE_FALSE(ec);
    thoonk::client c(ioc.get_executor(), cfg);
    thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
      co_await c.async_connect(asio::use_awaitable);
      names = co_await thoonk::test::admin::seed(c);
    });
  }
  std::string url() const { return srv.url(); }

  /// Puts jobs `ids` on the job queue and makes each a dead letter.
  void make_dead(const std::vector<std::string>& ids) {
    asio::io_context ioc;
    boost::system::error_code ec;
    thoonk::client c(ioc.get_executor(), thoonk::config::from_url(srv.url(), ec));
    thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
      co_await c.async_connect(asio::use_awaitable);
      thoonk::job_queue q(c, names.jobs);
      for (const auto& id : ids) {
        thoonk::put_options o;
        o.id = id;
        o.high_priority = true;  // claimed next, before the seed's waiting jobs
        co_await q.async_put("to die", o, asio::use_awaitable);
        auto claim = co_await q.async_claim(std::chrono::seconds(1), asio::use_awaitable);
        REQUIRE(claim.id == id);
        thoonk::fail_options perm;
        perm.permanent = true;
        co_await q.async_fail(claim, "made dead", perm, asio::use_awaitable);
      }
    });
  }
};

}  // namespace

TEST_CASE("cli: usage errors exit 2 and --help works for every command", "[cli]") {
  const std::string url = "redis://127.0.0.1:" + std::to_string(closed_port());
  auto r = run({}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "no command given"));
  r = run({"frobnicate"}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "unknown command 'frobnicate'"));
  r = run({"jobs"}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "usage: thoonk jobs Q"));
  r = run({"put", "q", "x", "--delay", "soon"}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "--delay takes a duration"));
  r = run({"retry", "q"}, url);
  CHECK(r.code == 2);
  r = run({"queues", "--bogus"}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "unknown option --bogus"));
  r = run({"--version"}, url);
  CHECK(r.code == 0);
  CHECK(r.out.rfind("thoonk " THOONK_VERSION_STRING " (library ", 0) == 0);
  r = run({"--help"}, url);
  CHECK(r.code == 0);
  CHECK(has(r.out, "Commands:"));
  CHECK(has(r.out, "Exit codes"));
  for (const char* cmd : {"queues", "jobs", "job", "put", "retry", "abort", "pause", "resume",
                          "workers", "feeds", "create", "top", "dashboard"}) {
    r = run({cmd, "--help"}, url);
    CHECK(r.code == 0);
    CHECK(has(r.out, std::string("usage: thoonk ") + cmd));
  }
  r = run({"feed", "tail", "--help"}, url);
  CHECK(r.code == 0);
  CHECK(has(r.out, "usage: thoonk feed tail F"));
  r = run({"feed", "publish", "--help"}, url);
  CHECK(r.code == 0);
  CHECK(has(r.out, "usage: thoonk feed publish F ITEM"));
  r = run({"queues", "--url", "http://nope"}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "invalid --url"));
}

TEST_CASE("cli: an unreachable server exits 3", "[cli]") {
  const std::string url = "redis://127.0.0.1:" + std::to_string(closed_port());
  for (std::vector<std::string> args :
       {std::vector<std::string>{"queues"}, {"jobs", "q"}, {"feed", "publish", "f", "x"}}) {
    auto r = run(args, url);
    CHECK(r.code == 3);
    CHECK(has(r.err, "cannot use the Redis server at " + url));
    CHECK(has(r.err, "refused"));
    CHECK(r.out.empty());
  }
  // --url wins over THOONK_REDIS_URL.
  thoonk::test::redis_server srv;
  auto r = run({"queues", "--url", srv.url()}, url);
  CHECK(r.code == 0);
}

TEST_CASE("cli: a wrong password exits 3 with the server's words", "[cli]") {
  thoonk::test::redis_server srv(std::vector<std::string>{"--requirepass", "right-one"});
  const std::string base = "redis://:wrong-one@127.0.0.1:" + std::to_string(srv.port());
  auto r = run({"queues"}, base);
  CHECK(r.code == 3);
  CHECK(has(r.err, "WRONGPASS"));
  CHECK_FALSE(has(r.err, "wrong-one"));  // the password is not printed
  r = run({"queues"}, "redis://127.0.0.1:" + std::to_string(srv.port()));
  CHECK(r.code == 3);
  r = run({"queues", "--json"}, "redis://:right-one@127.0.0.1:" + std::to_string(srv.port()));
  CHECK(r.code == 0);
  CHECK(parse_object(r.out).at("queues").as_array().empty());
}

TEST_CASE("cli: an ACL refusal exits 3 with the server's words", "[cli]") {
  thoonk::test::redis_server srv;
  {
    auto r = run({"create", "acl-q"}, srv.url());
    REQUIRE(r.code == 0);
  }
  // A user that may connect but not read the keys.
  asio::io_context ioc;
  boost::system::error_code ec;
  thoonk::client c(ioc.get_executor(), thoonk::config::from_url(srv.url(), ec));
  thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    co_await thoonk::test::cmd(c.conn(), "ACL", "SETUSER", "weak", "on", ">weakpass",
                               "+@connection", "+client", "+subscribe", "&*");
  });
  const std::string url = "redis://weak:weakpass@127.0.0.1:" + std::to_string(srv.port());
  auto r = run({"queues"}, url);
  CHECK(r.code == 3);
  CHECK(has(r.err, "NOPERM"));
  r = run({"put", "acl-q", "x"}, url);
  CHECK(r.code == 3);
}

TEST_CASE("cli: reads of queues, jobs, workers and feeds", "[cli]") {
  seeded_server s;
  const auto url = s.url();
  const auto& q = s.names.jobs;

  auto r = run({"queues"}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "NAME"));
  CHECK(has(r.out, "WAITING"));
  CHECK(has(r.out, q));
  CHECK(has(r.out, s.names.plain));
  CHECK_FALSE(has(r.out, s.names.feed));
  r = run({"queues", "--json"}, url);
  REQUIRE(r.code == 0);
  bool found = false;
  const auto listing1 = parse_object(r.out);
  for (const auto& e : listing1.at("queues").as_array()) {
    if (e.at("name").as_string() != q) continue;
    found = true;
    const auto& c = e.at("counts").as_object();
    CHECK(c.at("waiting").as_int64() == 3);
    CHECK(c.at("claimed").as_int64() == 1);
    CHECK(c.at("scheduled").as_int64() == 1);
    CHECK(c.at("dead").as_int64() == 1);
    CHECK(c.at("held").as_int64() == 1);
  }
  CHECK(found);

  r = run({"jobs", q}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "w1"));
  CHECK(has(r.out, "first waiting"));
  CHECK(has(r.out, "<img src=x onerror=alert(1)>"));
  CHECK_FALSE(has(r.out, "(more:"));
  r = run({"jobs", q, "--state", "dead"}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "d1"));
  CHECK(has(r.out, "boom"));
  r = run({"jobs", q, "--state", "scheduled", "--json"}, url);
  REQUIRE(r.code == 0);
  CHECK(parse_object(r.out).at("jobs").as_array().at(0).at("id").as_string() == "s1");
  // Paging: one job a page, the cursor of the first page gives the second.
  r = run({"jobs", q, "--count", "1", "--json"}, url);
  REQUIRE(r.code == 0);
  auto page = parse_object(r.out);
  REQUIRE(page.at("jobs").as_array().size() == 1);
  const std::string first(page.at("jobs").as_array().at(0).at("id").as_string());
  const std::string next(page.at("next").as_string());
  REQUIRE_FALSE(next.empty());
  r = run({"jobs", q, "--count", "1"}, url);
  CHECK(has(r.out, "(more: thoonk jobs " + q + " --state waiting --cursor " + next + ")"));
  r = run({"jobs", q, "--count", "1", "--cursor", next, "--json"}, url);
  REQUIRE(r.code == 0);
  CHECK(parse_object(r.out).at("jobs").as_array().at(0).at("id").as_string() != first);
  r = run({"jobs", q, "--state", "bogus"}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "state must be one of"));
  r = run({"jobs", "no-such-queue"}, url);
  CHECK(r.code == 1);
  CHECK(has(r.err, "no feed or queue named 'no-such-queue'"));
  r = run({"jobs", s.names.plain, "--json"}, url);
  CHECK(r.code == 0);
  CHECK(parse_object(r.out).at("jobs").as_array().size() == 2);

  r = run({"job", q, "d1"}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "state:"));
  CHECK(has(r.out, "dead"));
  CHECK(has(r.out, "boom"));
  r = run({"job", q, "c1", "--json"}, url);
  REQUIRE(r.code == 0);
  CHECK(parse_object(r.out).at("state").as_string() == "claimed");
  CHECK(parse_object(r.out).at("held").as_bool());
  r = run({"job", q, "nope"}, url);
  CHECK(r.code == 1);
  CHECK(has(r.err, "no job 'nope'"));
  r = run({"job", s.names.feed, "n1"}, url);
  CHECK(r.code == 4);

  r = run({"workers", q}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "LAST HEARTBEAT"));
  r = run({"workers", q, "--json"}, url);
  REQUIRE(r.code == 0);
  CHECK(parse_object(r.out).at("workers").is_array());
  r = run({"workers", "no-such-queue"}, url);
  CHECK(r.code == 1);

  r = run({"feeds"}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, s.names.feed));
  CHECK(has(r.out, s.names.sorted));
  CHECK_FALSE(has(r.out, q));
  r = run({"feeds", "--json"}, url);
  REQUIRE(r.code == 0);
  const auto listing2 = parse_object(r.out);
  for (const auto& f : listing2.at("feeds").as_array())
    if (f.at("name").as_string() == s.names.feed) CHECK(f.at("length").as_int64() == 3);
}

TEST_CASE("cli: writes: put, retry, abort, pause, resume, create", "[cli]") {
  seeded_server s;
  const auto url = s.url();
  const auto& q = s.names.jobs;

  auto r = run({"put", q, "made by the cli", "--id", "p1"}, url);
  REQUIRE(r.code == 0);
  CHECK(r.out == "p1\n");
  r = run({"job", q, "p1", "--json"}, url);
  CHECK(parse_object(r.out).at("state").as_string() == "waiting");
  r = run({"put", q, "later", "--delay", "1h", "--json"}, url);
  REQUIRE(r.code == 0);
  const std::string later(parse_object(r.out).at("id").as_string());
  r = run({"job", q, later, "--json"}, url);
  CHECK(parse_object(r.out).at("state").as_string() == "scheduled");
  // An item with a terminal escape sequence is shown escaped.
  r = run({"put", q, "\x1b[2Jgotcha", "--id", "esc"}, url);
  REQUIRE(r.code == 0);
  r = run({"job", q, "esc"}, url);
  CHECK(has(r.out, "\\x1b[2Jgotcha"));
  CHECK_FALSE(has(r.out, "\x1b"));
  r = run({"put", "no-such-queue", "x"}, url);
  CHECK(r.code == 1);
  r = run({"put", s.names.plain, "x"}, url);
  CHECK(r.code == 4);
  CHECK(has(r.err, "plain queue"));
  r = run({"put", q, "x", "--id", std::string(2000, 'i')}, url);
  CHECK(r.code == 2);

  r = run({"retry", q, "w1"}, url);
  CHECK(r.code == 4);
  CHECK_FALSE(r.err.empty());
  r = run({"retry", q, "d1"}, url);
  CHECK(r.code == 0);
  CHECK(r.out == "retried\n");
  r = run({"retry", q, "d1"}, url);
  CHECK(r.code == 4);

  r = run({"abort", q, "w1"}, url);
  CHECK(r.code == 4);
  r = run({"abort", q, "c1", "--failed", "--permanent", "--error", "stuck"}, url);
  CHECK(r.code == 0);
  CHECK(r.out == "aborted\n");
  r = run({"job", q, "c1", "--json"}, url);
  CHECK(parse_object(r.out).at("state").as_string() != "claimed");
  r = run({"abort", q, "gone"}, url);
  CHECK(r.code == 1);
  // Every dead letter there is, then none.
  s.make_dead({"x1", "x2", "x3"});
  r = run({"jobs", q, "--state", "dead", "--json"}, url);
  const auto dead_before = parse_object(r.out).at("jobs").as_array().size();
  REQUIRE(dead_before >= 3);
  r = run({"retry", q, "--all-dead"}, url);
  CHECK(r.code == 0);
  CHECK(r.out == "retried " + std::to_string(dead_before) + "\n");
  r = run({"jobs", q, "--state", "dead", "--json"}, url);
  CHECK(parse_object(r.out).at("jobs").as_array().empty());
  r = run({"retry", q, "--all-dead", "--json"}, url);
  CHECK(r.code == 0);
  CHECK(parse_object(r.out).at("retried").as_int64() == 0);
  r = run({"retry", "no-such-queue", "--all-dead"}, url);
  CHECK(r.code == 1);

  r = run({"pause", q}, url);
  CHECK(r.code == 0);
  CHECK(r.out == "paused\n");
  r = run({"queues", "--json"}, url);
  const auto listing3 = parse_object(r.out);
  for (const auto& e : listing3.at("queues").as_array())
    if (e.at("name").as_string() == q) CHECK(e.at("paused").as_bool());
  r = run({"resume", q, "--json"}, url);
  CHECK(r.code == 0);
  CHECK(parse_object(r.out).at("done").as_string() == "resumed");
  r = run({"pause", "no-such-queue"}, url);
  CHECK(r.code == 1);

  r = run({"create", "cli-made", "--type", "feed"}, url);
  CHECK(r.code == 0);
  r = run({"create", "cli-made"}, url);
  CHECK(r.code == 4);
  CHECK(has(r.err, "cannot create 'cli-made'"));
  r = run({"create", "bad", "--type", "list"}, url);
  CHECK(r.code == 2);
}

TEST_CASE("cli: feed publish and feed tail", "[cli]") {
  seeded_server s;
  const auto url = s.url();
  const auto& f = s.names.feed;

  auto r = run({"feed", "publish", f, "fresh", "--id", "n4"}, url);
  REQUIRE(r.code == 0);
  CHECK(r.out == "n4\n");
  r = run({"feed", "publish", f, "fresher", "--id", "n4", "--json"}, url);
  CHECK(parse_object(r.out).at("edited").as_bool());
  r = run({"feed", "publish", s.names.sorted, "third"}, url);
  CHECK(r.code == 0);
  r = run({"feed", "publish", "no-such-feed", "x"}, url);
  CHECK(r.code == 1);
  r = run({"feed", "publish", s.names.jobs, "x"}, url);
  CHECK(r.code == 4);

  // Catch-up from the start, bounded by --count.
  r = run({"feed", "tail", f, "--from", "0", "--count", "3"}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "publish  n1  oldest news"));
  CHECK(has(r.out, "middle news"));
  r = run({"feed", "tail", f, "--from", "0", "--count", "1", "--json"}, url);
  REQUIRE(r.code == 0);
  auto ev = parse_object(r.out);
  CHECK(ev.at("event").as_string() == "publish");
  CHECK(ev.at("replayed").as_bool());

  // Live: follow from the feed's current cursor (so nothing published
  // while it subscribes is missed), then publish.
  r = run({"feeds", "--json"}, url);
  std::int64_t cursor = -1;
  const auto listing4 = parse_object(r.out);
  for (const auto& e : listing4.at("feeds").as_array())
    if (e.at("name").as_string() == f) cursor = e.at("publishes").as_int64();
  REQUIRE(cursor > 0);
  {
    cli_run tail({"feed", "tail", f, "--from", std::to_string(cursor), "--count", "1"}, url);
    r = run({"feed", "publish", f, "breaking", "--id", "live"}, url);
    REQUIRE(r.code == 0);
    CHECK(tail.wait() == 0);
    CHECK(tail.out == "publish  live  breaking\n");
  }
  // Until SIGTERM.
  {
    // The replay shows that it runs (its signal handler is set before it
    // connects): then SIGTERM.
    cli_run tail({"feed", "tail", f, "--from", "0"}, url);
    REQUIRE(tail.wait_for_output("oldest news", 10s));
    tail.signal(SIGTERM);
    CHECK(tail.wait() == 0);
  }
  r = run({"feed", "tail", "no-such-feed"}, url);
  CHECK(r.code == 1);
  r = run({"feed", "tail", s.names.jobs}, url);
  CHECK(r.code == 4);
}

TEST_CASE("cli: top", "[cli]") {
  seeded_server s;
  const auto url = s.url();
  auto r = run({"top", "--once"}, url);
  REQUIRE(r.code == 0);
  CHECK(has(r.out, "thoonk top"));
  CHECK(has(r.out, "PUTS/S"));
  CHECK(has(r.out, s.names.jobs));
  CHECK_FALSE(has(r.out, "\x1b["));  // not a terminal: no escape sequences
  r = run({"top", "--iterations", "2", "--interval", "100ms", "--json"}, url);
  REQUIRE(r.code == 0);
  std::size_t frames = 0;
  std::size_t start = 0;
  while (start < r.out.size()) {
    auto end = r.out.find('\n', start);
    auto frame = parse_object(r.out.substr(start, end - start));
    CHECK(frame.at("queues").as_array().size() == 2);
    CHECK(frame.at("queues").as_array().at(0).as_object().contains("puts_per_second"));
    ++frames;
    start = end + 1;
  }
  CHECK(frames == 2);
  {
    cli_run t({"top", "--interval", "100ms"}, url);
    CHECK(t.wait_for_output("thoonk top", 5s));
    t.signal(SIGINT);
    CHECK(t.wait() == 0);
  }
  r = run({"top", "--interval", "0s"}, url);
  CHECK(r.code == 2);
  // On a terminal (a pseudo-terminal from util-linux's `script`, which
  // Debian always installs) each frame starts with cursor-home and clear.
  REQUIRE(::access("/usr/bin/script", X_OK) == 0);
  {
    cli_run t("/usr/bin/script",
              {"-qec", cli_binary() + " top --iterations 2 --interval 100ms", "/dev/null"}, url);
    CHECK(t.wait() == 0);
    std::size_t clears = 0;
    for (auto at = t.out.find("\x1b[H\x1b[2J"); at != std::string::npos;
         at = t.out.find("\x1b[H\x1b[2J", at + 1))
      ++clears;
    CHECK(clears == 2);
    CHECK(has(t.out, "PUTS/S"));
  }
}

TEST_CASE("cli: dashboard", "[cli]") {
  seeded_server s;
  const auto url = s.url();
  {
    cli_run d({"dashboard", "--listen", "127.0.0.1:0", "--read-only"}, url);
    REQUIRE(d.wait_for_output("/\n", 10s));
    const std::string prefix = "dashboard: http://127.0.0.1:";
    REQUIRE(has(d.out, prefix));
    const auto port =
        static_cast<unsigned short>(std::stoi(d.out.substr(d.out.find(prefix) + prefix.size())));
    asio::io_context ioc;
    thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
      auto got = co_await thoonk::test::admin::get(port, "/api/queues");
      CHECK(got.status == 200);
      CHECK(has(got.body, s.names.jobs));
      auto posted =
          co_await thoonk::test::admin::post(port, "/api/queues/" + s.names.jobs + "/pause");
      CHECK(posted.status == 405);
    });
    d.signal(SIGTERM);
    CHECK(d.wait() == 0);
  }
  auto r = run({"dashboard", "--listen", "0.0.0.0:0"}, url);
  CHECK(r.code == 2);
  CHECK(has(r.err, "token"));
  r = run({"dashboard", "--listen", "nonsense:port"}, url);
  CHECK(r.code == 2);
}
