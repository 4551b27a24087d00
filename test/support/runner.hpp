// Helpers for the tests of job_queue::async_run: a run in the background that the
// test stops (through the operation's cancellation, the graceful stop) and
// whose outcome it reads.
#pragma once

#include "support/helpers.hpp"

#include <thoonk/job_queue.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>

#include <memory>

namespace thoonk::test {

struct background_run {
  asio::cancellation_signal stop_signal;
  bool done = false;
  boost::system::error_code ec;
  thoonk::run_report report;
};

/// Starts q.run(handler, o) in the background (either handler form).
template <class Handler>
std::shared_ptr<background_run> start_run(thoonk::job_queue q, Handler handler,
                                          thoonk::run_options o) {
  auto br = std::make_shared<background_run>();
  q.async_run(std::move(handler), std::move(o),
              asio::bind_cancellation_slot(
                  br->stop_signal.slot(), [br](boost::system::error_code ec, thoonk::run_report r) {
                    br->done = true;
                    br->ec = ec;
                    br->report = std::move(r);
                  }));
  return br;
}

/// Asks for the graceful stop and waits until the run completed (at most
/// `max`); returns whether it did.
inline asio::awaitable<bool> stop_run(background_run& br, std::chrono::milliseconds max = 15s) {
  br.stop_signal.emit(asio::cancellation_type::terminal);
  co_return co_await wait_until([&] { return br.done; }, max);
}

/// stop_run, which must complete, then the run's outcome, which must be
/// no error.
inline asio::awaitable<void> stop_run_cleanly(background_run& br) {
  auto stopped = co_await stop_run(br);
  REQUIRE(stopped);
  INFO(br.ec.message());
  CHECK(!br.ec);
}

/// The queue's counts.
inline asio::awaitable<thoonk::job_counts> counts_of(thoonk::job_queue& q) {
  auto c = co_await q.async_counts(asio::use_awaitable);
  co_return c;
}

/// Checks that no job of the queue waits or is claimed.
inline asio::awaitable<void> check_drained(thoonk::job_queue& q) {
  auto c = co_await counts_of(q);
  CHECK(c.claimed == 0);
  CHECK(c.waiting == 0);
}

/// Waits until the queue's finish counter reaches `n` (at most `max`).
inline asio::awaitable<bool> wait_finishes(thoonk::job_queue& q, std::int64_t n,
                                           std::chrono::milliseconds max = 20s) {
  const auto until = std::chrono::steady_clock::now() + max;
  for (;;) {
    auto c = co_await counts_of(q);
    if (c.finishes >= n) co_return true;
    if (std::chrono::steady_clock::now() >= until) co_return false;
    co_await sleep_for(20ms);
  }
}

/// How many claim records of runners are left on f's queue: the fields of
/// feed.worker_jobs:[name] but one, its encoding keeper (docs/jobs.md).
inline asio::awaitable<std::int64_t> claim_records_left(fixture& f) {
  auto fields = co_await cmd(f.c.conn(), "HLEN", key("worker_jobs", f.name));
  co_return fields.integer - 1;
}

/// Checks that no claim record of a runner is left on f's queue.
inline asio::awaitable<void> check_no_claim_records_left(fixture& f) {
  auto left = co_await claim_records_left(f);
  CHECK(left == 0);
}

}  // namespace thoonk::test
