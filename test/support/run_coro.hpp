// Running coroutine tests under a deadline.
//
// docs/design.md §9: every coroutine test runs under io_context::run_for so a hang
// fails that one test instead of the whole CI run.
#pragma once

#include <chrono>
#include <functional>
#include <type_traits>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>

namespace thoonk::test {

using coro_fn = std::function<boost::asio::awaitable<void>()>;

/// co_spawns f() on ioc and runs ioc until the coroutine finishes or
/// `deadline` passes. Returns true when it finished, false when it did not
/// (deadline reached, or ioc ran out of work / was stopped while the coroutine
/// was still suspended). On false the io_context has been stopped.
///
/// The io_context is stopped as soon as the coroutine finishes, even if other
/// work (a client's reconnect loop, a detached timer) is still pending; that
/// work resumes the next time someone runs ioc. A stopped ioc is restarted
/// first, so several calls may share one io_context.
///
/// An exception escaping the coroutine (including a failed Catch2 REQUIRE) is
/// rethrown here. f is kept alive until the coroutine completes or ioc is
/// destroyed, so lambdas may capture by value.
bool run_coro_for(boost::asio::io_context& ioc, coro_fn f, std::chrono::milliseconds deadline);

/// run_coro_for, then Catch2 FAIL("coroutine test did not finish within N ms")
/// when the coroutine did not finish. Meant to be called directly in a
/// TEST_CASE / SECTION body.
void run_coro(boost::asio::io_context& ioc, coro_fn f,
              std::chrono::milliseconds deadline = std::chrono::seconds(20));

/// Suspends the calling coroutine for d on its executor: the pause between
/// two polls (wait_until), never a wait for an event by itself.
boost::asio::awaitable<void> sleep_for(std::chrono::milliseconds d);

/// Polls `pred` until it holds or `max` passes; returns whether it held.
/// `pred` returns bool (checked every 2 ms: a flag or a count a callback
/// sets) or boost::asio::awaitable<bool> (checked every 5 ms: a server condition,
/// e.g. `[&]() -> boost::asio::awaitable<bool> { co_return co_await llen(c, k) == 0; }`).
template <class Pred>
boost::asio::awaitable<bool> wait_until(Pred pred,
                                        std::chrono::milliseconds max = std::chrono::seconds(10)) {
  constexpr bool awaited =
      std::is_same_v<std::invoke_result_t<Pred&>, boost::asio::awaitable<bool>>;
  const auto until = std::chrono::steady_clock::now() + max;
  for (;;) {
    bool held = false;
    if constexpr (awaited) held = co_await pred();
    else held = pred();
    if (held) co_return true;
    if (std::chrono::steady_clock::now() >= until) co_return false;
    co_await sleep_for(std::chrono::milliseconds(awaited ? 5 : 2));
  }
}

}  // namespace thoonk::test
