// pending<T>: one waiting coroutine's slot (a get_result, a maintenance
// loop, a wait for a wake-up). Used on the client's executor only.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <utility>

namespace thoonk::detail::jobs {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// pending: one waiting coroutine's slot. The timer is the wake-up signal
// (cancel() completes the wait) and, for waiters with a deadline, the
// deadline too.
// ---------------------------------------------------------------------------
template <class T>
struct pending {
  explicit pending(const asio::any_io_executor& ex) : timer(ex, clock_type::time_point::max()) {}
  asio::steady_timer timer;
  bool done = false;       // a result (or error) was delivered
  bool abandoned = false;  // the waiter gave up (timeout, cancellation, close)
  error_code ec;
  T value{};

  bool live() const noexcept { return !done && !abandoned; }
  void complete(error_code e, T v) {
    if (!live()) return;
    done = true;
    ec = e;
    value = std::move(v);
    timer.cancel();
  }
};

}  // namespace thoonk::detail::jobs
