// The first steps of a child process just forked from a test (a
// redis-server, a worker), before it execs its program. Only
// async-signal-safe calls: the parent may have other threads.
#pragma once

#include <csignal>

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

namespace thoonk::test {

/// In the child of `parent`: makes it get `death_signal` when the parent
/// dies, even by SIGKILL or a crash, so that nothing is left behind (and
/// exits at once if the parent died before that took effect); unblocks
/// every signal; makes `in` its stdin (when >= 0) and `out` its stdout and
/// stderr.
inline void set_up_forked_child(pid_t parent, int death_signal, int in, int out) noexcept {
  ::prctl(PR_SET_PDEATHSIG, death_signal);
  if (::getppid() != parent) ::_exit(127);
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  if (in >= 0) ::dup2(in, STDIN_FILENO);
  ::dup2(out, STDOUT_FILENO);
  ::dup2(out, STDERR_FILENO);
}

}  // namespace thoonk::test
