// The claim/get dispatcher's decisions (src/jobs/fetch_policy.hpp) driven
// by events on a fake clock: batching, wake-ups and the poll tick,
// deadlines and the "one attempt on the server first" rule, prefetch
// hold/return, close. No server, no I/O.
#include "jobs/fetch_policy.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>

#include <catch2/catch.hpp>

#include <array>

using thoonk::detail::jobs::fetch_policy;
using kind = fetch_policy::action::kind;
using namespace std::chrono_literals;

namespace {

using tp = fetch_policy::time_point;
const tp t0 = tp{} + 1000s;  // the fake clock's start

fetch_policy::options opts(std::size_t max_batch = 256, std::size_t max_in_flight = 2,
                           std::size_t prefetch = 0) {
  fetch_policy::options o;
  o.poll = 1000ms;
  o.max_batch = max_batch;
  o.max_in_flight = max_in_flight;
  o.prefetch = prefetch;
  o.hold = 500ms;
  return o;
}

fetch_policy::action claim(fetch_policy::fetch_id f, std::size_t n) {
  return {kind::claim, f, 0, 0, n, {}};
}
fetch_policy::action deliver(fetch_policy::fetch_id f, fetch_policy::waiter_id w, std::size_t i) {
  return {kind::deliver, f, w, i, 0, {}};
}
fetch_policy::action fail(fetch_policy::waiter_id w, boost::system::error_code ec) {
  return {kind::fail, 0, w, 0, 0, ec};
}
fetch_policy::action hold(fetch_policy::fetch_id f, std::size_t i) {
  return {kind::hold, f, 0, i, 0, {}};
}
fetch_policy::action return_reply(fetch_policy::fetch_id f, std::size_t from, std::size_t n) {
  return {kind::return_reply, f, 0, from, n, {}};
}
fetch_policy::action return_buffered(std::size_t n) {
  return {kind::return_buffered, 0, 0, 0, n, {}};
}

const boost::system::error_code empty_ec = thoonk::error::queue_empty;
const boost::system::error_code aborted_ec = boost::asio::error::operation_aborted;

fetch_policy::actions pump(fetch_policy& p) {
  fetch_policy::actions out;
  p.pump(out);
  return out;
}
fetch_policy::actions reply(fetch_policy& p, fetch_policy::fetch_id f, tp now, std::size_t jobs,
                            boost::system::error_code ec = {}) {
  fetch_policy::actions out;
  p.on_reply(f, now, ec, jobs, out);
  return out;
}
fetch_policy::actions wakeup(fetch_policy& p, tp now, bool fired = true) {
  fetch_policy::actions out;
  p.on_wakeup(now, fired, out);
  return out;
}
fetch_policy::actions deadline(fetch_policy& p, fetch_policy::waiter_id w) {
  fetch_policy::actions out;
  p.deadline(w, out);
  return out;
}

using list = fetch_policy::actions;

// Starts p at t0 and adds N waiters (in order); returns their ids.
template <std::size_t N>
std::array<fetch_policy::waiter_id, N> start_with(fetch_policy& p) {
  p.start(t0);
  std::array<fetch_policy::waiter_id, N> w;
  for (auto& x : w) x = p.add_waiter();
  return w;
}

// Starts p (max_batch 1) with two waiters: one claim call goes out for each.
std::array<fetch_policy::waiter_id, 2> two_single_calls(fetch_policy& p) {
  auto w = start_with<2>(p);
  CHECK(pump(p) == list{claim(1, 1), claim(2, 1)});
  return w;
}

// Starts p (prefetch n) with one waiter, whose call delivers one job and
// is followed by a prefetch call for n, which comes back full: n jobs held.
// Returns the waiter.
fetch_policy::waiter_id with_prefetched(fetch_policy& p, std::size_t n) {
  auto [a] = start_with<1>(p);
  CHECK(pump(p) == list{claim(1, 1)});
  CHECK(reply(p, 1, t0, 1) == list{deliver(1, a, 0), claim(2, n)});
  list held;
  for (std::size_t i = 0; i < n; ++i) held.push_back(hold(2, i));
  CHECK(reply(p, 2, t0, n) == held);
  return a;
}

}  // namespace

TEST_CASE("fetch_policy: one claim call serves every waiter, in arrival order",
          "[unit][fetch_policy]") {
  fetch_policy p(opts());
  auto [a, b, c] = start_with<3>(p);
  CHECK(pump(p) == list{claim(1, 3)});
  CHECK(p.in_flight() == 1);
  CHECK(pump(p).empty());  // nobody left without a call
  CHECK(reply(p, 1, t0 + 1ms, 3) == list{deliver(1, a, 0), deliver(1, b, 1), deliver(1, c, 2)});
  CHECK(p.waiting() == 0);
  // A full reply triggers another call, but with nobody waiting none goes out.
  CHECK(p.triggered());
  CHECK(pump(p).empty());
  CHECK(!p.triggered());
  CHECK(p.next_wakeup() == tp::max());
}

TEST_CASE("fetch_policy: nothing is claimed before start()", "[unit][fetch_policy]") {
  fetch_policy p(opts());
  p.add_waiter();
  CHECK(pump(p).empty());
  p.start(t0);
  CHECK(pump(p) == list{claim(1, 1)});
}

TEST_CASE("fetch_policy: batches are capped by max_batch and max_in_flight",
          "[unit][fetch_policy]") {
  fetch_policy p(opts(2, 2));
  p.start(t0);
  fetch_policy::waiter_id w[5];
  for (auto& x : w) x = p.add_waiter();
  CHECK(pump(p) == list{claim(1, 2), claim(2, 2)});
  CHECK(p.in_flight() == 2);
  CHECK(pump(p).empty());  // the fifth waits for a free slot
  CHECK(reply(p, 1, t0, 2) == list{deliver(1, w[0], 0), deliver(1, w[1], 1)});
  CHECK(pump(p) == list{claim(3, 1)});
  // Jobs beyond a call's own waiters go to waiters without a call only.
  CHECK(reply(p, 2, t0, 2) == list{deliver(2, w[2], 0), deliver(2, w[3], 1)});
  CHECK(reply(p, 3, t0, 1) == list{deliver(3, w[4], 0)});
}

TEST_CASE("fetch_policy: surplus jobs go to other waiters, then back to the queue",
          "[unit][fetch_policy]") {
  fetch_policy p(opts(1, 1));
  auto [a, b] = start_with<2>(p);
  CHECK(pump(p) == list{claim(1, 1)});
  // The call asked for one; say the server returned three (fake numbers are
  // fine here: only the counts matter to the policy).
  CHECK(reply(p, 1, t0, 3) == list{deliver(1, a, 0), deliver(1, b, 1), return_reply(1, 2, 1)});
}

TEST_CASE("fetch_policy: an empty reply leaves waiters for the wake-up or the poll tick",
          "[unit][fetch_policy]") {
  fetch_policy p(opts());
  auto [a] = start_with<1>(p);
  CHECK(pump(p) == list{claim(1, 1)});
  CHECK(p.next_wakeup() == tp::max());  // a call is out: no poll
  CHECK(reply(p, 1, t0 + 10ms, 0).empty());
  CHECK(pump(p).empty());  // not triggered: the queue is empty
  CHECK(p.next_wakeup() == t0 + 10ms + 1000ms);

  SECTION("the poll tick") {
    CHECK(wakeup(p, t0 + 500ms).empty());
    CHECK(pump(p).empty());
    CHECK(wakeup(p, t0 + 1010ms).empty());
    CHECK(pump(p) == list{claim(2, 1)});
    CHECK(reply(p, 2, t0 + 1011ms, 1) == list{deliver(2, a, 0)});
  }
  SECTION("a poke past the poll time is not a tick") {
    CHECK(wakeup(p, t0 + 2000ms, false).empty());
    CHECK(pump(p).empty());
  }
  SECTION("a wake-up message") {
    p.notify();
    CHECK(pump(p) == list{claim(2, 1)});
  }
  SECTION("a new waiter fetches for everyone waiting") {
    auto b = p.add_waiter();
    CHECK(pump(p) == list{claim(2, 2)});
    CHECK(reply(p, 2, t0 + 20ms, 2) == list{deliver(2, a, 0), deliver(2, b, 1)});
  }
}

TEST_CASE("fetch_policy: a deadline reports empty only after one attempt on the server",
          "[unit][fetch_policy]") {
  fetch_policy p(opts());

  SECTION("deadline before the first call: it waits for the call") {
    auto a = p.add_waiter();
    CHECK(deadline(p, a).empty());  // the loop has not even started
    p.start(t0);
    CHECK(pump(p) == list{claim(1, 1)});
    CHECK(reply(p, 1, t0, 0) == list{fail(a, empty_ec)});
  }
  SECTION("deadline while its call is out, the call brings a job: the job wins") {
    auto [a] = start_with<1>(p);
    CHECK(pump(p) == list{claim(1, 1)});
    CHECK(deadline(p, a).empty());
    CHECK(reply(p, 1, t0, 1) == list{deliver(1, a, 0)});
  }
  SECTION("deadline after an attempt completed: empty at once") {
    auto [a] = start_with<1>(p);
    CHECK(pump(p) == list{claim(1, 1)});
    CHECK(reply(p, 1, t0, 0).empty());
    CHECK(deadline(p, a) == list{fail(a, empty_ec)});
    CHECK(deadline(p, a).empty());  // once
  }
  SECTION("a waiter that arrived while another's call was out needs its own attempt") {
    auto [a] = start_with<1>(p);
    CHECK(pump(p) == list{claim(1, 1)});
    auto b = p.add_waiter();
    CHECK(deadline(p, b).empty());
    CHECK(reply(p, 1, t0, 0).empty());  // a's attempt, not b's
    CHECK(deadline(p, a) == list{fail(a, empty_ec)});
    CHECK(pump(p) == list{claim(2, 1)});  // b's own attempt (triggered when it arrived)
    CHECK(reply(p, 2, t0, 0) == list{fail(b, empty_ec)});
  }
}

TEST_CASE("fetch_policy: a cancelled waiter is completed once and skipped",
          "[unit][fetch_policy]") {
  fetch_policy p(opts());
  auto [a, b] = start_with<2>(p);
  CHECK(pump(p) == list{claim(1, 2)});
  list out;
  p.cancel_waiter(a, out);
  CHECK(out == list{fail(a, aborted_ec)});
  out.clear();
  p.cancel_waiter(a, out);
  CHECK(out.empty());
  // Its job goes to the next waiter; the rest goes back (no prefetch).
  CHECK(reply(p, 1, t0, 2) == list{deliver(1, b, 0), return_reply(1, 1, 1)});
}

TEST_CASE("fetch_policy: an error fails the call's waiters; client_stopped closes",
          "[unit][fetch_policy]") {
  fetch_policy p(opts(1, 2));
  auto [a, b] = two_single_calls(p);
  const boost::system::error_code oom = thoonk::error::server_error;
  CHECK(reply(p, 1, t0, 0, oom) == list{fail(a, oom)});
  CHECK(!p.closed());
  const boost::system::error_code stopped = thoonk::error::client_stopped;
  auto c = p.add_waiter();
  CHECK(reply(p, 2, t0, 0, stopped) == list{fail(b, stopped), fail(c, stopped)});
  CHECK(p.closed());
  p.add_waiter();
  CHECK(pump(p).empty());
}

TEST_CASE("fetch_policy: close fails waiters and returns held jobs; late replies go back",
          "[unit][fetch_policy]") {
  fetch_policy p(opts(256, 2, 2));
  with_prefetched(p, 2);
  auto b = p.add_waiter();
  CHECK(pump(p) == list{claim(3, 1)});  // (a real caller would take a held job first)
  list out;
  const boost::system::error_code aborted = aborted_ec;
  p.close(aborted, out);
  CHECK(out == list{fail(b, aborted), return_buffered(2)});
  CHECK(p.buffered() == 0);
  out.clear();
  p.close(aborted, out);
  CHECK(out.empty());
  CHECK(reply(p, 3, t0, 1) == list{return_reply(3, 0, 1)});
  list none;
  CHECK(!p.take_buffered(none));
}

TEST_CASE("fetch_policy: prefetch tops up after a full call and holds what nobody takes",
          "[unit][fetch_policy]") {
  fetch_policy p(opts(256, 2, 4));
  auto [a, b] = start_with<2>(p);
  CHECK(pump(p) == list{claim(1, 2)});
  // Full: both served, and one call with no waiters fills the buffer.
  CHECK(reply(p, 1, t0, 2) == list{deliver(1, a, 0), deliver(1, b, 1), claim(2, 4)});
  CHECK(reply(p, 2, t0 + 5ms, 4) == list{hold(2, 0), hold(2, 1), hold(2, 2), hold(2, 3)});
  CHECK(p.buffered() == 4);
  CHECK(p.next_wakeup() == t0 + 5ms + 500ms);  // the hold expiry (nobody waits)

  SECTION("a taker gets a held job and the buffer is topped up") {
    list out;
    REQUIRE(p.take_buffered(out));
    CHECK(out == list{claim(3, 1)});  // 3 held: ask for 1
    out.clear();
    REQUIRE(p.take_buffered(out));
    CHECK(out == list{claim(4, 1)});  // 2 held + 1 asked for: ask for 1 more
    CHECK(p.buffered() == 2);
    CHECK(p.in_flight() == 2);
    // The top-ups come back: held at the back, behind the older jobs.
    CHECK(reply(p, 3, t0 + 6ms, 1) == list{hold(3, 0)});
    CHECK(p.buffered() == 3);
  }
  SECTION("held jobs go back after the hold time, oldest first") {
    CHECK(wakeup(p, t0 + 504ms).empty());
    CHECK(wakeup(p, t0 + 505ms) == list{return_buffered(4)});
    CHECK(p.buffered() == 0);
    CHECK(p.next_wakeup() == tp::max());
  }
}

TEST_CASE("fetch_policy: prefetch counts jobs in flight and respects max_in_flight",
          "[unit][fetch_policy]") {
  fetch_policy p(opts(256, 2, 4));
  with_prefetched(p, 4);
  list out;
  REQUIRE(p.take_buffered(out));  // 3 held: ask for 1
  CHECK(out == list{claim(3, 1)});
  out.clear();
  REQUIRE(p.take_buffered(out));  // 2 held + 1 asked: ask for 1 more
  CHECK(out == list{claim(4, 1)});
  out.clear();
  REQUIRE(p.take_buffered(out));  // two calls out: max_in_flight
  CHECK(out.empty());
  CHECK(p.in_flight() == 2);
  // A short prefetch reply: no more topping up until a call comes back full.
  CHECK(reply(p, 3, t0, 0).empty());
  REQUIRE(p.take_buffered(out));
  CHECK(out.empty());
  CHECK(p.buffered() == 0);
}

TEST_CASE("fetch_policy: with prefetch, jobs go out in the order they were claimed",
          "[unit][fetch_policy]") {
  // max_batch 1: two calls of one waiter each (prefetch is capped at max_batch).
  fetch_policy p(opts(1, 2, 2));
  auto [a, b] = two_single_calls(p);
  // Call 1 comes back with two jobs: a gets the first, b (whose own call is
  // still out) the second; call 2's job, claimed later, is then held.
  CHECK(reply(p, 1, t0, 2) == list{deliver(1, a, 0), deliver(1, b, 1), claim(3, 1)});
  CHECK(reply(p, 2, t0, 1) == list{hold(2, 0)});
  CHECK(p.buffered() == 1);
}

TEST_CASE("fetch_policy: without prefetch, a waiter with its own call out keeps waiting for it",
          "[unit][fetch_policy]") {
  fetch_policy p(opts(1, 2, 0));
  auto [a, b] = two_single_calls(p);
  CHECK(reply(p, 1, t0, 2) == list{deliver(1, a, 0), return_reply(1, 1, 1)});
  CHECK(reply(p, 2, t0, 1) == list{deliver(2, b, 0)});
  CHECK(p.buffered() == 0);
}

TEST_CASE("fetch_policy: waiters wake up when a scheduled job becomes due",
          "[unit][fetch_policy]") {
  fetch_policy p(opts());
  auto [a] = start_with<1>(p);
  CHECK(pump(p) == list{claim(1, 1)});
  // The empty reply says a scheduled job is due in 200 ms: sooner than the
  // poll tick (1000 ms after the reply).
  p.due_at(t0 + 210ms);
  CHECK(reply(p, 1, t0 + 10ms, 0).empty());
  CHECK(p.next_wakeup() == t0 + 210ms);

  SECTION("the loop wakes at the due time and claims") {
    CHECK(wakeup(p, t0 + 210ms).empty());
    CHECK(pump(p) == list{claim(2, 1)});
    p.due_at(tp::max());  // the reply had the job, no further due time
    CHECK(reply(p, 2, t0 + 211ms, 1) == list{deliver(2, a, 0)});
    CHECK(p.next_wakeup() == tp::max());  // nobody waits
  }
  SECTION("a due time is used once") {
    CHECK(wakeup(p, t0 + 210ms).empty());
    CHECK(pump(p) == list{claim(2, 1)});
    p.due_at(tp::max());
    CHECK(reply(p, 2, t0 + 215ms, 0).empty());
    CHECK(pump(p).empty());
    CHECK(p.next_wakeup() == t0 + 215ms + 1000ms);  // back to the poll tick
  }
  SECTION("a poke before the due time is not the due time") {
    CHECK(wakeup(p, t0 + 100ms, false).empty());
    CHECK(pump(p).empty());
    CHECK(p.next_wakeup() == t0 + 210ms);
  }
}

TEST_CASE("fetch_policy: a due time later than the poll tick, or in the past",
          "[unit][fetch_policy]") {
  fetch_policy p(opts());
  auto [a] = start_with<1>(p);
  CHECK(pump(p) == list{claim(1, 1)});
  // The empty reply comes at t0 + 10 ms with a due time; the loop wakes at
  // `next` (the earlier of the due time and the poll tick, 1000 ms after
  // the reply), is woken at `woken` and claims.
  struct due_case {
    const char* name;
    tp due, next, woken;
  };
  const due_case cases[] = {
      {"later than the poll tick: the tick comes first", t0 + 5000ms, t0 + 1010ms, t0 + 1010ms},
      {"already past: the loop wakes at once and claims", t0 + 5ms, t0 + 5ms, t0 + 10ms},
  };
  for (const auto& k : cases) {
    DYNAMIC_SECTION(k.name) {
      p.due_at(k.due);
      CHECK(reply(p, 1, t0 + 10ms, 0).empty());
      CHECK(p.next_wakeup() == k.next);
      CHECK(wakeup(p, k.woken).empty());
      CHECK(pump(p) == list{claim(2, 1)});
    }
  }
  SECTION("a call in flight: no wake-up for it until the reply") {
    p.due_at(t0 + 50ms);
    CHECK(reply(p, 1, t0 + 10ms, 0).empty());
    p.notify();
    CHECK(pump(p) == list{claim(2, 1)});
    CHECK(p.next_wakeup() == tp::max());
  }
  (void)a;
}

TEST_CASE("fetch_policy: no waiters, no wake-up for a due time", "[unit][fetch_policy]") {
  fetch_policy p(opts());
  p.start(t0);
  p.due_at(t0 + 100ms);
  CHECK(p.next_wakeup() == tp::max());
}

namespace {

fetch_policy::actions handed(fetch_policy& p, tp now, std::size_t jobs) {
  fetch_policy::actions out;
  p.on_handed(now, jobs, out);
  return out;
}

}  // namespace

TEST_CASE("fetch_policy: jobs handed off go to waiters without a call first, the rest back",
          "[unit][fetch_policy][hand_off]") {
  fetch_policy p(opts(1, 1));
  auto [a, b, c] = start_with<3>(p);
  CHECK(pump(p) == list{claim(1, 1)});  // a's call is out; b and c wait for a slot
  // Four jobs came by hand-off: b and c (no call out) first, then a (whose
  // call's job then goes on as a surplus one), the fourth back to the queue.
  CHECK(handed(p, t0, 4) ==
        list{deliver(0, b, 0), deliver(0, c, 1), deliver(0, a, 2), return_reply(0, 3, 1)});
  CHECK(p.waiting() == 0);
  // a's call comes back with a job nobody waits for: it goes back.
  CHECK(reply(p, 1, t0, 1) == list{return_reply(1, 0, 1)});
  // Nobody waits: everything handed off goes back.
  CHECK(handed(p, t0, 2) == list{return_reply(0, 0, 2)});
}

TEST_CASE("fetch_policy: with prefetch, jobs handed off beyond the waiters are held",
          "[unit][fetch_policy][hand_off]") {
  fetch_policy p(opts(256, 2, 4));
  auto [a] = start_with<1>(p);
  CHECK(pump(p) == list{claim(1, 1)});
  CHECK(handed(p, t0, 3) == list{deliver(0, a, 0), hold(0, 1), hold(0, 2)});
  CHECK(p.buffered() == 2);
  // Held jobs expire as prefetched ones do.
  CHECK(wakeup(p, t0 + 500ms, false) == list{return_buffered(2)});
}

TEST_CASE("fetch_policy: jobs handed off after close go back", "[unit][fetch_policy][hand_off]") {
  fetch_policy p(opts());
  auto [a] = start_with<1>(p);
  fetch_policy::actions out;
  p.close(aborted_ec, out);
  CHECK(out == list{fail(a, aborted_ec)});
  CHECK(handed(p, t0, 2) == list{return_reply(0, 0, 2)});
}
