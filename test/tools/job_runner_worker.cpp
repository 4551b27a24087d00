// A worker process running job_queue::run, for the runner's integration
// tests (test/integration/job_runner_process_test.cpp): a test kills it
// with SIGKILL in the middle of its jobs, or stops it with SIGTERM (the
// runner's graceful stop, through run_options::stop_signals).
//
//   job_runner_worker <redis url> <queue> <concurrency> <handler ms> <worker ttl ms> <max seconds>
//
// Each handler prints "start <id>", waits <handler ms> (cancellable) and
// finishes its job with the result "done". At the end it prints
// "finished N" (jobs the server accepted as finished) and exits 0. It dies
// with its parent (PR_SET_PDEATHSIG), so a failed test never leaves it
// behind; the test stops it by its pid.
#include "tools/worker_process.hpp"

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/job_queue.hpp>

#include <boost/asio.hpp>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace asio = boost::asio;

int main(int argc, char** argv) {
  if (argc != 7) {
    std::fprintf(stderr,
                 "usage: %s <redis url> <queue> <concurrency> <handler ms> <worker ttl ms> "
                 "<max seconds>\n",
                 argv[0]);
    return 2;
  }
  auto cfg = thoonk::test::worker_config(argv[1]);
  if (!cfg) return 2;
  const std::string name = argv[2];
  const long concurrency = std::atol(argv[3]);
  const long handler_ms = std::atol(argv[4]);
  const long ttl_ms = std::atol(argv[5]);
  const long max_seconds = std::atol(argv[6]);
  if (concurrency < 1 || concurrency > 1000 || handler_ms < 0 || ttl_ms < 100 || max_seconds < 1 ||
      max_seconds > 600) {
    std::fprintf(stderr, "concurrency 1..1000, handler ms >= 0, ttl ms >= 100, seconds 1..600\n");
    return 2;
  }

  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), *cfg);
  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  asio::steady_timer limit(ioc, std::chrono::seconds(max_seconds));
  limit.async_wait([](boost::system::error_code e) {
    if (!e) std::raise(SIGTERM);
  });
  int rc = 1;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await client.connect(asio::use_awaitable);
        thoonk::job_queue q(client, name);
        thoonk::run_options o;
        o.concurrency = static_cast<std::size_t>(concurrency);
        o.worker_ttl = std::chrono::milliseconds(ttl_ms);
        o.stop_signals = &signals;
        o.stop_timeout = std::chrono::seconds(2);
        auto handler =
            [handler_ms](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
          std::printf("start %s\n", ctx.job().id.c_str());
          std::fflush(stdout);
          asio::steady_timer t(co_await asio::this_coro::executor,
                               std::chrono::milliseconds(handler_ms));
          co_await t.async_wait(asio::use_awaitable);
          co_return std::string("done");
        };
        auto [rec, report] =
            co_await q.run(thoonk::job_coroutine(handler), o, asio::as_tuple(asio::use_awaitable));
        std::printf("finished %llu\n", static_cast<unsigned long long>(report.finished));
        if (rec) std::printf("error %s\n", rec.message().c_str());
        std::fflush(stdout);
        rc = rec ? 1 : 0;
        limit.cancel();
        client.stop();
      },
      asio::detached);
  ioc.run();
  return rc;
}
