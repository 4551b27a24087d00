// A worker process for the rate-limit test (test/integration/
// job_control_rate_test.cpp): claims and finishes jobs of one job queue
// with a number of concurrent claimers until SIGTERM (or SIGINT) or its own
// time limit, then prints how many jobs it finished and exits 0.
//
//   job_control_worker <redis url> <queue name> <claimers> <max seconds>
//
// It dies with its parent (PR_SET_PDEATHSIG), so a test that fails never
// leaves it behind; the test stops it by its pid.
#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/job_queue.hpp>

#include "tools/worker_process.hpp"

#include <boost/asio.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <memory>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

struct state {
  std::uint64_t finished = 0;
  int claimers = 0;  // still running
  bool stopping = false;
  std::function<void()> all_done;  // called when the last claimer ends
};

asio::awaitable<void> claimer(thoonk::job_queue q, std::shared_ptr<state> st) {
  struct leave {
    std::shared_ptr<state> st;
    ~leave() {
      if (--st->claimers == 0 && st->all_done) st->all_done();
    }
  } on_exit{st};
  while (!st->stopping) {
    auto [ec, job] = co_await q.async_claim(200ms, asio::as_tuple(asio::use_awaitable));
    if (ec == thoonk::error::queue_empty) continue;
    if (ec) co_return;
    auto [fec] = co_await q.async_finish(job, asio::as_tuple(asio::use_awaitable));
    if (!fec) ++st->finished;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const auto args = thoonk::test::parse_worker_args(argc, argv, 2, "<claimers> <max seconds>");
  if (!args) return 2;
  const auto claimers = args->number(0, "claimers", 1, 1000);
  const auto max_seconds = args->number(1, "max seconds", 1, 600);
  if (!claimers || !max_seconds) return 2;

  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), args->cfg);
  auto st = std::make_shared<state>();
  asio::steady_timer grace(ioc);
  std::function<void()> stop;
  thoonk::test::stop_trigger trigger(ioc, std::chrono::seconds(*max_seconds), [&] { stop(); });
  stop = [&] {
    st->stopping = true;
    trigger.cancel();
    client.stop();
    if (st->claimers == 0) ioc.stop();
    // A claimer whose claim never completes would hold the run forever:
    // leave after a grace period anyway, and say so.
    grace.expires_after(std::chrono::seconds(2));
    grace.async_wait([&](boost::system::error_code e) {
      if (e) return;
      std::fprintf(stderr, "worker: operations still pending 2 s after stop; leaving\n");
      ioc.stop();
    });
  };
  // Once every claimer has ended after a stop, the count is final: end
  // the run even if the client still holds work (observed: after
  // client.stop() with rate-limited claims in flight, three operations
  // stayed pending and run() never returned).
  st->all_done = [&] {
    if (st->stopping) ioc.stop();
  };
  int exit_code = 0;
  thoonk::test::start_worker(
      ioc, client, args->queue, exit_code, [&] { stop(); },
      [&](thoonk::job_queue& q) {
        st->claimers = static_cast<int>(*claimers);
        for (long i = 0; i < *claimers; ++i) asio::co_spawn(ioc, claimer(q, st), asio::detached);
        // Ready: the test waits for this line before it measures.
        std::printf("ready\n");
        std::fflush(stdout);
      });
  ioc.run();
  std::printf("finished %llu\n", static_cast<unsigned long long>(st->finished));
  return exit_code;
}
