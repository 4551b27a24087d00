// A worker: runs a job queue's jobs with the runner (job_queue::async_run)
// until SIGTERM or SIGINT, then stops gracefully.
//
//   THOONK_REDIS_URL=redis://127.0.0.1:6379 ./worker [queue] [concurrency]
//
// Each job's item is "processed" (a short timer stands in for real work) and
// the job is finished with the result "done: <item>". On SIGTERM the runner
// stops claiming, lets the jobs in flight finish (run_options::stop_timeout),
// gives back any it could not finish, deregisters and completes; the program
// then prints its report and exits with status 0.
#include <thoonk/thoonk.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <optional>
#include <stop_token>
#include <string>

namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

// The job handler: a coroutine on the client's executor.
asio::awaitable<std::optional<std::string>> handle(thoonk::job_context ctx) {
  const auto& job = ctx.job();
  std::cout << "worker: processing " << job.id << " \"" << job.item << "\"" << std::endl;
  asio::steady_timer work(co_await asio::this_coro::executor, 50ms);
  co_await work.async_wait(asio::use_awaitable);  // a stop cancels this wait after stop_timeout
  std::cout << "worker: finished " << job.id << std::endl;
  co_return "done: " + job.item;
}

asio::awaitable<void> work(thoonk::client& client, std::string name, std::size_t concurrency,
                           std::stop_token stop) {
  co_await client.async_connect();
  auto jobs = co_await thoonk::job_queue::async_create_or_open(client, name);
  thoonk::run_options options;
  options.concurrency = concurrency;
  options.stop = std::move(stop);
  options.stop_timeout = 5s;
  std::cout << "worker: running on " << name << " (concurrency " << concurrency << ")" << std::endl;
  auto report = co_await jobs.async_run(handle, options);
  std::cout << "worker: stopped gracefully as " << report.worker_name << ": " << report.finished
            << " finished, " << report.failed << " failed, " << report.released << " given back"
            << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "examples.jobs";
  const int concurrency = argc > 2 ? std::atoi(argv[2]) : 4;
  if (concurrency < 1) {
    std::cerr << "worker: concurrency must be a positive number\n";
    return 2;
  }
  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), thoonk::config::from_env());

  // SIGTERM (a service manager's stop) and SIGINT (^C) ask the runner to stop.
  std::stop_source stop;
  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;  // cancelled below, after the run
    std::cout << "worker: signal " << signo << ", stopping" << std::endl;
    stop.request_stop();
  });

  int status = 1;
  asio::co_spawn(ioc, work(client, name, static_cast<std::size_t>(concurrency), stop.get_token()),
                 [&](std::exception_ptr e) {
                   if (e) {
                     try {
                       std::rethrow_exception(e);
                     } catch (const std::exception& ex) {
                       std::cerr << "worker: " << ex.what() << "\n";
                     }
                   } else {
                     status = 0;
                   }
                   signals.cancel();
                   client.stop();
                 });
  ioc.run();
  return status;
}
