// A worker process running job_queue::run, for the runner's integration
// tests (test/integration/job_runner_process_test.cpp): a test kills it
// with SIGKILL in the middle of its jobs, or stops it with SIGTERM (the
// runner's graceful stop, through run_options::stop).
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

#include <climits>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <stop_token>
#include <string>

namespace asio = boost::asio;

int main(int argc, char** argv) {
  const auto args = thoonk::test::parse_worker_args(
      argc, argv, 4, "<concurrency> <handler ms> <worker ttl ms> <max seconds>");
  if (!args) return 2;
  const auto concurrency = args->number(0, "concurrency", 1, 1000);
  const auto handler_ms = args->number(1, "handler ms", 0, LONG_MAX);
  const auto ttl_ms = args->number(2, "worker ttl ms", 100, LONG_MAX);
  const auto max_seconds = args->number(3, "max seconds", 1, 600);
  if (!concurrency || !handler_ms || !ttl_ms || !max_seconds) return 2;

  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), args->cfg);
  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  std::stop_source stop;
  signals.async_wait([&stop](boost::system::error_code e, int) {
    if (!e) stop.request_stop();
  });
  asio::steady_timer limit(ioc, std::chrono::seconds(*max_seconds));
  limit.async_wait([](boost::system::error_code e) {
    if (!e) std::raise(SIGTERM);
  });
  int rc = 1;
  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await client.async_connect(asio::use_awaitable);
        thoonk::job_queue q(client, args->queue);
        thoonk::run_options o;
        o.concurrency = static_cast<std::size_t>(*concurrency);
        o.worker_ttl = std::chrono::milliseconds(*ttl_ms);
        o.stop = stop.get_token();
        o.stop_timeout = std::chrono::seconds(2);
        auto handler = [wait = *handler_ms](
                           thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
          std::printf("start %s\n", ctx.job().id.c_str());
          std::fflush(stdout);
          asio::steady_timer t(co_await asio::this_coro::executor, std::chrono::milliseconds(wait));
          co_await t.async_wait(asio::use_awaitable);
          co_return std::string("done");
        };
        auto [rec, report] = co_await q.async_run(thoonk::job_coroutine(handler), o,
                                                  asio::as_tuple(asio::use_awaitable));
        std::printf("finished %llu\n", static_cast<unsigned long long>(report.finished));
        if (rec) std::printf("error %s\n", rec.message().c_str());
        std::fflush(stdout);
        rc = rec ? 1 : 0;
        limit.cancel();
        signals.cancel();
        client.stop();
      },
      asio::detached);
  ioc.run();
  return rc;
}
