// jobs::batcher without a server: the calls behind finish, put and
// finish_and_claim. Its call function here is a coroutine the test holds
// open, so each case decides when a call's reply comes: requests of one tick
// share a call, a cancelled request is never sent (or, once sent, its result
// goes to the orphan function instead of being dropped), a failed call fails
// every request of it, and requests wait while max_in_flight calls are out.
#include "jobs/common.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>

#include <memory>
#include <optional>
#include <vector>

namespace asio = boost::asio;
using boost::system::error_code;
using thoonk::detail::op_result;
using thoonk::detail::op_status;
using int_batcher = thoonk::detail::jobs::batcher<int, int>;

namespace {

// The calls the batcher made: each call's requests, and the gate that
// holds its reply until the test opens it (with an error, or success:
// every request's result is its value times ten).
struct calls_seen {
  struct call {
    std::vector<int> reqs;
    std::shared_ptr<asio::steady_timer> gate;
    error_code fail_with;
  };
  std::vector<call> calls;

  // Lets call `i` return.
  void open(std::size_t i, error_code ec = {}) {
    calls.at(i).fail_with = ec;
    calls.at(i).gate->cancel();
  }
};

std::shared_ptr<int_batcher> make_batcher(asio::io_context& ioc, calls_seen& seen,
                                          std::size_t max_in_flight,
                                          std::vector<int>* orphans = nullptr) {
  auto run = [&ioc, &seen](std::vector<int> reqs) -> asio::awaitable<op_result<std::vector<int>>> {
    const std::size_t i = seen.calls.size();
    auto gate = std::make_shared<asio::steady_timer>(ioc, asio::steady_timer::time_point::max());
    seen.calls.push_back({reqs, gate, {}});
    co_await gate->async_wait(asio::as_tuple(asio::use_awaitable));
    if (seen.calls[i].fail_with) co_return op_result<std::vector<int>>{seen.calls[i].fail_with, {}};
    std::vector<int> out;
    for (int r : reqs) out.push_back(r * 10);
    co_return op_result<std::vector<int>>{op_status{}, std::move(out)};
  };
  int_batcher::orphan_fn orphan;
  if (orphans) orphan = [orphans](int v) { orphans->push_back(v); };
  return std::make_shared<int_batcher>(ioc.get_executor(), 100, max_in_flight, run, orphan);
}

// One request's outcome.
struct batch_outcome {
  bool done = false;
  error_code ec;
  int value = 0;
};

auto record_into(batch_outcome& o) {
  return [&o](error_code ec, int v) {
    o.done = true;
    o.ec = ec;
    o.value = v;
  };
}

// Runs the handlers that are ready (not the gates, which never expire).
void settle_batcher(asio::io_context& ioc) {
  ioc.restart();
  ioc.poll();
}

// One call out, holding request 1 and request 2, which can be cancelled
// through `sig`; results of cancelled requests land in `orphans`.
struct call_out {
  call_out() {
    b->submit(1, record_into(o1));
    b->submit(2, asio::bind_cancellation_slot(sig.slot(), record_into(o2)));
    settle_batcher(ioc);
  }
  asio::io_context ioc;
  calls_seen seen;
  std::vector<int> orphans;
  std::shared_ptr<int_batcher> b = make_batcher(ioc, seen, 2, &orphans);
  asio::cancellation_signal sig;
  batch_outcome o1, o2;
};

}  // namespace

TEST_CASE("batcher: requests of one tick share one call; each gets its own result",
          "[unit][batcher]") {
  asio::io_context ioc;
  calls_seen seen;
  auto b = make_batcher(ioc, seen, 2);
  batch_outcome o1, o2, o3;
  b->submit(1, record_into(o1));
  b->submit(2, record_into(o2));
  b->submit(3, record_into(o3));
  settle_batcher(ioc);
  REQUIRE(seen.calls.size() == 1);
  CHECK(seen.calls[0].reqs == std::vector<int>{1, 2, 3});
  CHECK_FALSE(o1.done);
  seen.open(0);
  settle_batcher(ioc);
  CHECK((o1.done && o2.done && o3.done));
  CHECK((!o1.ec && !o2.ec && !o3.ec));
  CHECK(o1.value == 10);
  CHECK(o2.value == 20);
  CHECK(o3.value == 30);
}

TEST_CASE("batcher: a request cancelled before its call is sent is never sent",
          "[unit][batcher][cancel]") {
  asio::io_context ioc;
  calls_seen seen;
  std::vector<int> orphans;
  auto b = make_batcher(ioc, seen, 2, &orphans);
  asio::cancellation_signal sig;
  batch_outcome o1, o2;
  // On the executor, as a coroutine of the application would: a signal
  // emitted before submit() ran there would find no handler to cancel.
  asio::post(ioc, [&] {
    b->submit(1, asio::bind_cancellation_slot(sig.slot(), record_into(o1)));
    b->submit(2, record_into(o2));
    sig.emit(asio::cancellation_type::terminal);
  });
  settle_batcher(ioc);
  CHECK(o1.done);
  CHECK(o1.ec == asio::error::operation_aborted);
  REQUIRE(seen.calls.size() == 1);
  CHECK(seen.calls[0].reqs == std::vector<int>{2});
  seen.open(0);
  settle_batcher(ioc);
  CHECK(o2.value == 20);
  CHECK(orphans.empty());
}

TEST_CASE(
    "batcher: a request cancelled while its call is out completes at once; its result "
    "then goes to the orphan function, not to the caller and not lost",
    "[unit][batcher][cancel]") {
  call_out t;
  REQUIRE(t.seen.calls.size() == 1);
  t.sig.emit(asio::cancellation_type::terminal);
  settle_batcher(t.ioc);
  CHECK(t.o2.done);
  CHECK(t.o2.ec == asio::error::operation_aborted);
  CHECK(t.orphans.empty());  // the reply has not come yet
  t.seen.open(0);
  settle_batcher(t.ioc);
  CHECK(t.o1.value == 10);
  CHECK(t.o2.value == 0);  // the caller's handler ran once, with the abort
  CHECK(t.orphans == std::vector<int>{20});
}

TEST_CASE("batcher: a failed call fails each of its requests; nothing is orphaned",
          "[unit][batcher][errors]") {
  call_out t;
  t.sig.emit(asio::cancellation_type::terminal);
  t.seen.open(0, thoonk::error::unknown_outcome);
  settle_batcher(t.ioc);
  CHECK(t.o1.ec == thoonk::error::unknown_outcome);
  CHECK(t.o2.ec == asio::error::operation_aborted);
  CHECK(t.orphans.empty());
}

TEST_CASE("batcher: while max_in_flight calls are out, requests wait and form the next call",
          "[unit][batcher]") {
  asio::io_context ioc;
  calls_seen seen;
  auto b = make_batcher(ioc, seen, 1);
  batch_outcome o1, o2, o3;
  b->submit(1, record_into(o1));
  settle_batcher(ioc);
  b->submit(2, record_into(o2));
  settle_batcher(ioc);
  b->submit(3, record_into(o3));
  settle_batcher(ioc);
  REQUIRE(seen.calls.size() == 1);  // 2 and 3 wait for the one call out
  seen.open(0);
  settle_batcher(ioc);
  REQUIRE(seen.calls.size() == 2);
  CHECK(seen.calls[1].reqs == std::vector<int>{2, 3});
  CHECK(o1.value == 10);
  CHECK_FALSE(o2.done);
  seen.open(1);
  settle_batcher(ioc);
  CHECK(o2.value == 20);
  CHECK(o3.value == 30);
}

TEST_CASE("batcher: close fails the requests not yet sent and refuses new ones",
          "[unit][batcher][close]") {
  asio::io_context ioc;
  calls_seen seen;
  auto b = make_batcher(ioc, seen, 1);
  batch_outcome o1, o2, o3;
  b->submit(1, record_into(o1));
  settle_batcher(ioc);
  b->submit(2, record_into(o2));
  b->close(asio::error::operation_aborted);
  b->submit(3, record_into(o3));
  settle_batcher(ioc);
  CHECK(o2.ec == asio::error::operation_aborted);
  CHECK(o3.ec == asio::error::operation_aborted);
  // The call already out still completes its request.
  seen.open(0);
  settle_batcher(ioc);
  CHECK(o1.value == 10);
  CHECK(seen.calls.size() == 1);
}
