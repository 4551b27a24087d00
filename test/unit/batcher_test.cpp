// jobs::batcher without a server: the calls behind finish, put and
// finish_and_claim. Its call function here is a coroutine the test holds
// open, so each case decides when a call's reply comes: requests of one tick
// share a call, a cancelled request is never sent (or, once sent, its result
// goes to the orphan function instead of being dropped), a failed call fails
// every request of it, and requests wait while max_in_flight calls are out.
#include "jobs/batcher.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/io_context.hpp>

#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <memory>
#include <optional>
#include <string>
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

// One call of the batcher: recorded in `seen`, its reply held until the
// test opens its gate.
asio::awaitable<op_result<std::vector<int>>> gated_call(asio::io_context& ioc, calls_seen& seen,
                                                        std::vector<int> reqs) {
  const std::size_t i = seen.calls.size();
  auto gate = std::make_shared<asio::steady_timer>(ioc, asio::steady_timer::time_point::max());
  seen.calls.push_back({reqs, gate, {}});
  co_await gate->async_wait(asio::as_tuple(asio::use_awaitable));
  if (seen.calls[i].fail_with) co_return op_result<std::vector<int>>{seen.calls[i].fail_with, {}};
  std::vector<int> out;
  for (int r : reqs) out.push_back(r * 10);
  co_return op_result<std::vector<int>>{op_status{}, std::move(out)};
}

std::shared_ptr<int_batcher> make_batcher(asio::io_context& ioc, calls_seen& seen,
                                          std::size_t max_in_flight,
                                          std::vector<int>* orphans = nullptr) {
  auto run = [&ioc, &seen](std::vector<int> reqs) {
    return gated_call(ioc, seen, std::move(reqs));
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

// ---- a large batch completed in two halves ------------------------------------------

namespace {

// A worker loop's callers: `n` requests (1..n) whose handlers log their
// completion and, when `again`, submit the next request (value + 100) as a
// loop's caller would. The log also records each call when it starts, so a
// case can tell whether a call went out before other callers resumed.
struct halves_rig {
  explicit halves_rig(int n, bool again = true, std::size_t max_in_flight = 2) : again(again) {
    auto run = [this](std::vector<int> reqs) -> asio::awaitable<op_result<std::vector<int>>> {
      log.push_back("call " + std::to_string(reqs.front()));
      return gated_call(ioc, seen, std::move(reqs));
    };
    b = std::make_shared<int_batcher>(ioc.get_executor(), 100, max_in_flight, run,
                                      [this](int v) { orphans.push_back(v); });
    for (int i = 1; i <= n; ++i) submit(i);
    settle_batcher(ioc);
  }

  void submit(int v) {
    auto& o = outcomes[v];
    auto h = [this, v, &o](error_code ec, int value) {
      o.done = true;
      o.ec = ec;
      o.value = value;
      log.push_back("done " + std::to_string(v));
      if (again && !ec && v < 100) submit(v + 100);
    };
    if (v == cancellable) b->submit(v, asio::bind_cancellation_slot(sig.slot(), std::move(h)));
    else b->submit(v, std::move(h));
  }

  // Where `entry` is in the log (the log's size: not there).
  std::size_t at(const std::string& entry) const {
    return static_cast<std::size_t>(std::find(log.begin(), log.end(), entry) - log.begin());
  }

  // Runs ready handlers one by one until `v` completed.
  void step_until_done(int v) {
    ioc.restart();
    while (!outcomes[v].done && ioc.poll_one() > 0) {
    }
  }

  bool again;
  int cancellable = -1;
  asio::io_context ioc;
  calls_seen seen;
  std::vector<std::string> log;
  std::vector<int> orphans;
  std::map<int, batch_outcome> outcomes;
  asio::cancellation_signal sig;
  std::shared_ptr<int_batcher> b;
};

}  // namespace

TEST_CASE(
    "batcher: a batch of 16 or more whose call was the only one out completes its first "
    "half first; the second half resumes only after the first half's next call went out",
    "[unit][batcher][split]") {
  halves_rig t(20);
  REQUIRE(t.seen.calls.size() == 1);
  t.seen.open(0);
  settle_batcher(t.ioc);
  // Every caller completed once, with its own result.
  for (int v = 1; v <= 20; ++v) {
    CHECK(t.outcomes[v].value == 10 * v);
    CHECK(!t.outcomes[v].ec);
  }
  // Two calls followed, one per half, the first half's before any caller
  // of the second half resumed.
  REQUIRE(t.seen.calls.size() == 3);
  CHECK(t.seen.calls[1].reqs == std::vector<int>{101, 102, 103, 104, 105, 106, 107, 108, 109, 110});
  CHECK(t.seen.calls[2].reqs == std::vector<int>{111, 112, 113, 114, 115, 116, 117, 118, 119, 120});
  CHECK(t.at("done 10") < t.at("call 101"));
  CHECK(t.at("call 101") < t.at("done 11"));
  CHECK(t.at("done 20") < t.at("call 111"));
  // The halves' calls are both out, and each completes its own callers.
  t.seen.open(2);
  t.seen.open(1);
  settle_batcher(t.ioc);
  for (int v = 101; v <= 120; ++v) CHECK(t.outcomes[v].value == 10 * v);
  CHECK(t.seen.calls.size() == 3);
  CHECK(t.orphans.empty());
}

TEST_CASE("batcher: a held half completes after a few turns when the first half makes no call",
          "[unit][batcher][split]") {
  halves_rig t(20, false);
  t.seen.open(0);
  t.step_until_done(1);
  for (int i = 0; i < 19; ++i) t.ioc.poll_one();
  CHECK_FALSE(t.outcomes[20].done);  // held
  settle_batcher(t.ioc);
  for (int v = 1; v <= 20; ++v) CHECK(t.outcomes[v].value == 10 * v);
  CHECK(t.seen.calls.size() == 1);
}

TEST_CASE(
    "batcher: a batch under 16, one replied while another call is out, one of a batcher "
    "with one call slot, or a failed call completes whole",
    "[unit][batcher][split]") {
  SECTION("15 requests") {
    halves_rig t(15);
    t.seen.open(0);
    settle_batcher(t.ioc);
    REQUIRE(t.seen.calls.size() == 2);
    CHECK(t.seen.calls[1].reqs.size() == 15);
    CHECK(t.at("done 15") < t.at("call 101"));
  }
  SECTION("another call out") {
    halves_rig t(20, false);
    for (int v = 21; v <= 40; ++v) t.submit(v);
    settle_batcher(t.ioc);
    REQUIRE(t.seen.calls.size() == 2);  // both out
    t.seen.open(0);
    t.step_until_done(1);
    // Nothing held: the other 19 handlers are next in line (a held half
    // would wait a few turns first).
    for (int i = 0; i < 19; ++i) t.ioc.poll_one();
    for (int v = 1; v <= 20; ++v) CHECK(t.outcomes[v].value == 10 * v);
    CHECK_FALSE(t.outcomes[21].done);  // its call is still out
  }
  SECTION("one call slot") {
    halves_rig t(20, false, 1);
    t.seen.open(0);
    t.step_until_done(1);
    for (int i = 0; i < 19; ++i) t.ioc.poll_one();
    for (int v = 1; v <= 20; ++v) CHECK(t.outcomes[v].value == 10 * v);
  }
  SECTION("a failed call") {
    halves_rig t(20);
    t.seen.open(0, thoonk::error::unknown_outcome);
    t.step_until_done(1);
    for (int i = 0; i < 19; ++i) t.ioc.poll_one();
    for (int v = 1; v <= 20; ++v) CHECK(t.outcomes[v].ec == thoonk::error::unknown_outcome);
    CHECK(t.seen.calls.size() == 1);  // failed callers do not call again here
    CHECK(t.orphans.empty());
  }
  SECTION("a split batch, for contrast") {
    halves_rig t(20, false);
    t.seen.open(0);
    t.step_until_done(1);
    for (int i = 0; i < 19; ++i) t.ioc.poll_one();
    CHECK_FALSE(t.outcomes[20].done);
  }
}

TEST_CASE(
    "batcher: a held caller that cancels completes at once with operation_aborted and its "
    "result goes to the orphan function; close completes the held ones with their results",
    "[unit][batcher][split][cancel][close]") {
  halves_rig t(0, false);
  t.cancellable = 20;
  for (int v = 1; v <= 20; ++v) t.submit(v);
  settle_batcher(t.ioc);
  REQUIRE(t.seen.calls.size() == 1);
  SECTION("a held caller cancels") {
    t.seen.open(0);
    t.step_until_done(1);
    REQUIRE_FALSE(t.outcomes[20].done);
    t.sig.emit(asio::cancellation_type::terminal);
    settle_batcher(t.ioc);
    CHECK(t.outcomes[20].ec == asio::error::operation_aborted);
    CHECK(t.outcomes[20].value == 0);
    CHECK(t.orphans == std::vector<int>{200});
    for (int v = 1; v <= 19; ++v) CHECK(t.outcomes[v].value == 10 * v);
  }
  SECTION("close while some are held") {
    t.seen.open(0);
    t.step_until_done(1);
    REQUIRE_FALSE(t.outcomes[20].done);
    t.b->close(asio::error::operation_aborted);
    settle_batcher(t.ioc);
    for (int v = 1; v <= 20; ++v) {
      CHECK(t.outcomes[v].value == 10 * v);
      CHECK(!t.outcomes[v].ec);
    }
    CHECK(t.orphans.empty());
  }
}
