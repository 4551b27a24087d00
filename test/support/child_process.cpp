#include "support/child_process.hpp"

#include <catch2/catch.hpp>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char** environ;

namespace thoonk::test {

using namespace std::chrono_literals;

child_process::child_process(std::string program, const std::vector<std::string>& args) {
  int fds[2];
  REQUIRE(::pipe2(fds, O_CLOEXEC) == 0);
  posix_spawn_file_actions_t fa;
  ::posix_spawn_file_actions_init(&fa);
  ::posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  std::vector<std::string> all{program};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const int rc = ::posix_spawn(&pid_, program.c_str(), &fa, nullptr, argv.data(), environ);
  ::posix_spawn_file_actions_destroy(&fa);
  ::close(fds[1]);
  out_ = fds[0];
  ::fcntl(out_, F_SETFL, ::fcntl(out_, F_GETFL) | O_NONBLOCK);
  if (rc != 0) pid_ = -1;
  INFO("starting " << program);
  REQUIRE(rc == 0);
}

child_process::~child_process() {
  kill();
  if (out_ >= 0) ::close(out_);
}

const std::string& child_process::output() {
  char buf[512];
  for (;;) {
    const auto n = ::read(out_, buf, sizeof buf);
    if (n <= 0) break;
    text_.append(buf, static_cast<std::size_t>(n));
  }
  return text_;
}

boost::asio::awaitable<int> child_process::stop(std::chrono::milliseconds max) {
  // Never kill() a pid <= 0: -1 would signal every process of the user.
  if (pid_ <= 0) co_return -1;
  ::kill(pid_, SIGTERM);
  int status = 0;
  const auto until = std::chrono::steady_clock::now() + max;
  while (std::chrono::steady_clock::now() < until) {
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      output();
      co_return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    }
    co_await sleep_for(10ms);
  }
  kill();
  co_return -1;
}

void child_process::kill() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
  output();
}

std::int64_t child_process::number_after(const std::string& word) {
  const auto at = text_.find(word + " ");
  if (at == std::string::npos) return -1;
  return std::stoll(text_.substr(at + word.size() + 1));
}

}  // namespace thoonk::test
