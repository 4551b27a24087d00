#include "support/run_coro.hpp"

#include <exception>
#include <memory>
#include <string>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

namespace thoonk::test {

namespace {
// Shared with the completion handler: after a timeout the handler may still
// run later (if ioc is run again) and must not touch a dead stack frame.
struct coro_state {
  bool done = false;
  std::exception_ptr error;
};
}  // namespace

bool run_coro_for(boost::asio::io_context& ioc, coro_fn f, std::chrono::milliseconds deadline) {
  if (ioc.stopped()) ioc.restart();
  auto state = std::make_shared<coro_state>();

  // Calling f inside a coroutine turns a synchronous throw from f itself into
  // the same exception_ptr path as a throw after the first suspension.
  boost::asio::co_spawn(
      ioc, [f = std::move(f)]() -> boost::asio::awaitable<void> { co_await f(); },
      [state, &ioc](std::exception_ptr e) {
        state->done = true;
        state->error = e;
        // Don't wait for unrelated background work to drain: the test is over.
        ioc.stop();
      });

  const auto end = std::chrono::steady_clock::now() + deadline;
  while (!state->done) {
    const auto now = std::chrono::steady_clock::now();
    if (now >= end) break;
    ioc.run_for(end - now);
    // run_for also returns when ioc ran out of work or someone stopped it. The
    // coroutine cannot make progress then, so spinning until the deadline
    // would only waste the test's time.
    if (!state->done && ioc.stopped()) break;
  }

  if (!state->done) {
    ioc.stop();
    return false;
  }
  if (state->error) std::rethrow_exception(state->error);
  return true;
}

void run_coro(boost::asio::io_context& ioc, coro_fn f, std::chrono::milliseconds deadline) {
  const auto started = std::chrono::steady_clock::now();
  if (run_coro_for(ioc, std::move(f), deadline)) return;
  const auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      std::chrono::steady_clock::now() - started);
  std::string message =
      "coroutine test did not finish within " + std::to_string(deadline.count()) + " ms";
  if (waited < deadline)
    message += " (the io_context ran out of work or was stopped after " +
               std::to_string(waited.count()) +
               " ms: the coroutine waits for something nothing will complete)";
  FAIL(message);
}

boost::asio::awaitable<void> sleep_for(std::chrono::milliseconds d) {
  boost::asio::steady_timer timer(co_await boost::asio::this_coro::executor, d);
  co_await timer.async_wait(boost::asio::use_awaitable);
}

}  // namespace thoonk::test
