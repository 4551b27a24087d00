// A worker process for the fault-injection suite (test/faults/
// worker_kill_test.cpp): a raw claim / work / finish loop on one job queue,
// with maintenance running beside it, that the test kills with SIGKILL at
// random moments.
//
//   fault_worker <redis url> <queue> <claimers> <log file> <max seconds>
//                <max work ms> <maintenance interval ms>
//
// Every operation goes to the log file as one line, written with one
// write(2) before the next step, so the log survives a SIGKILL up to the
// last completed step:
//
//   <steady ms> C <id> <token>            claimed
//   <steady ms> F <id> <token>            finished (success)
//   <steady ms> L <id> <token>            finish refused: lost_claim (the lease lapsed)
//   <steady ms> N <id> <token> <error>    finish refused otherwise (job_not_found, ...)
//   <steady ms> U <id> <token>            finish outcome unknown (reply lost)
//   <steady ms> E claim <error>           claim failed (not queue_empty)
//
// Each job is finished with its id as the result, so the test can count
// results per job on the server. Exits 0 on SIGTERM or after max seconds;
// dies with its parent (PR_SET_PDEATHSIG).
#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/job_queue.hpp>

#include "tools/worker_process.hpp"

#include <boost/asio.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

long long steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct worker_log {
  int fd = -1;
  void line(const std::string& text) const {
    const std::string l = std::to_string(steady_ms()) + " " + text + "\n";
    // One write per line: O_APPEND makes it atomic with respect to the
    // other claimers' lines; a SIGKILL cannot cut it in two.
    [[maybe_unused]] auto n = ::write(fd, l.data(), l.size());
  }
};

struct state {
  worker_log log;
  bool stopping = false;
  std::chrono::milliseconds max_work{0};
  std::mt19937 rng{std::random_device{}()};
};

asio::awaitable<void> claimer(thoonk::job_queue q, std::shared_ptr<state> st) {
  asio::steady_timer work(co_await asio::this_coro::executor);
  while (!st->stopping) {
    auto [ec, job] = co_await q.async_claim(200ms, asio::as_tuple(asio::use_awaitable));
    if (ec == thoonk::error::queue_empty) continue;
    if (ec) {
      st->log.line("E claim " + ec.message());
      if (st->stopping) break;
      work.expires_after(20ms);
      co_await work.async_wait(asio::as_tuple(asio::use_awaitable));
      continue;
    }
    const std::string tag = job.id + " " + std::to_string(job.token);
    st->log.line("C " + tag);
    // The "work": a random time, so that kills land in the middle of jobs.
    work.expires_after(std::chrono::milliseconds(
        std::uniform_int_distribution<long>(0, st->max_work.count())(st->rng)));
    co_await work.async_wait(asio::as_tuple(asio::use_awaitable));
    auto [fec] = co_await q.async_finish(job, job.id, asio::as_tuple(asio::use_awaitable));
    if (!fec) st->log.line("F " + tag);
    else if (fec == thoonk::error::lost_claim) st->log.line("L " + tag);
    else if (fec == thoonk::error::unknown_outcome) st->log.line("U " + tag);
    else st->log.line("N " + tag + " " + fec.message());
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = thoonk::test::parse_worker_args(
      argc, argv, 5, "<claimers> <log file> <max seconds> <max work ms> <maintenance interval ms>");
  if (!args) return 2;
  const auto claimers = args->number(0, "claimers", 1, 100);
  const auto max_seconds = args->number(2, "max seconds", 1, 900);
  const auto max_work = args->number(3, "max work ms", 0, 10000);
  const auto maintenance_ms = args->number(4, "maintenance interval ms", 1, LONG_MAX);
  if (!claimers || !max_seconds || !max_work || !maintenance_ms) return 2;
  const std::string& log_file = args->rest[1];
  auto st = std::make_shared<state>();
  st->max_work = std::chrono::milliseconds(*max_work);
  st->log.fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (st->log.fd < 0) {
    std::perror(log_file.c_str());
    return 2;
  }
  auto cfg = args->cfg;
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 200ms;

  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), cfg);
  asio::cancellation_signal stop_maintenance;
  std::function<void()> stop;
  thoonk::test::stop_trigger trigger(ioc, std::chrono::seconds(*max_seconds), [&] { stop(); });
  stop = [&] {
    st->stopping = true;
    trigger.cancel();
    stop_maintenance.emit(asio::cancellation_type::terminal);
    client.stop();
    // Everything pending completes with client_stopped; whatever still
    // holds the loop after that must not keep the process alive.
    asio::post(ioc, [&] { ioc.stop(); });
  };
  int exit_code = 0;
  thoonk::test::start_worker(
      ioc, client, args->queue, exit_code, [&] { stop(); },
      [&](thoonk::job_queue& q) {
        thoonk::maintenance_options mo;
        mo.publish_stats = false;
        mo.check_unaccounted = false;
        // A worker killed while it holds the lock delays the next run by
        // this much at most.
        mo.lock_ttl = 1s;
        q.async_run_maintenance(std::chrono::milliseconds(*maintenance_ms), mo,
                                asio::bind_cancellation_slot(stop_maintenance.slot(),
                                                             [](boost::system::error_code) {}));
        for (long i = 0; i < *claimers; ++i) asio::co_spawn(ioc, claimer(q, st), asio::detached);
      });
  ioc.run();
  ::close(st->log.fd);
  return exit_code;
}
