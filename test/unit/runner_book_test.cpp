// runner_book (src/jobs/runner_book.*): the runner's decisions on a fake
// clock, without a server. Each case is one scenario a running worker meets.
#include "jobs/runner_book.hpp"
#include "jobs/time_limits.hpp"

#include <catch2/catch.hpp>

using thoonk::detail::jobs::runner_book;
using namespace std::chrono_literals;

namespace {

runner_book::settings with(std::size_t concurrency, std::size_t batch = 256) {
  runner_book::settings s;
  s.concurrency = concurrency;
  s.max_claim_batch = batch;
  s.poll_interval = 1000ms;
  s.retry_delay = 100ms;
  s.stop_timeout = 500ms;
  return s;
}

runner_book::finish done(std::string id, std::int64_t token, const char* result = nullptr) {
  runner_book::finish f;
  f.claim = thoonk::claim_ref(std::move(id), token);
  if (result) f.result = result;
  return f;
}

const auto t0 = runner_book::clock::now();

/// b.next_round(now), which must send a round.
runner_book::round round_sent(runner_book& b, runner_book::time_point now) {
  auto r = b.next_round(now);
  REQUIRE(r);
  return std::move(*r);
}

}  // namespace

TEST_CASE("runner_book: the first round claims every slot, capped by the batch", "[runner_book]") {
  runner_book b(with(600, 256));
  auto r = round_sent(b, t0);
  CHECK(r.claim == 256);
  CHECK(r.finishes.empty());
  auto r2 = round_sent(b, t0);
  CHECK(r2.claim == 256);
  // Two rounds in flight at most.
  CHECK_FALSE(b.next_round(t0));
  CHECK(b.rounds_in_flight() == 2);
}

TEST_CASE("runner_book: a finish and the next claim go in one round (concurrency 1)",
          "[runner_book]") {
  runner_book b(with(1));
  auto r = round_sent(b, t0);
  CHECK(r.claim == 1);
  // Nothing more while the slot is asked for.
  CHECK_FALSE(b.next_round(t0));
  b.round_done(1, 1, std::nullopt, t0);
  CHECK(b.busy() == 1);
  CHECK_FALSE(b.next_round(t0));  // the slot is busy
  b.handler_ended(done("a", 1, "ok"));
  auto r2 = round_sent(b, t0);
  REQUIRE(r2.finishes.size() == 1);
  CHECK(r2.finishes[0].claim.id == "a");
  CHECK(r2.finishes[0].result == std::optional<std::string>("ok"));
  CHECK(r2.claim == 1);
}

TEST_CASE("runner_book: a dry queue is asked again at a wake-up or after the poll interval",
          "[runner_book]") {
  runner_book b(with(4));
  round_sent(b, t0);
  b.round_done(4, 1, std::nullopt, t0);  // one job; the queue ran dry
  CHECK_FALSE(b.next_round(t0 + 10ms));
  CHECK(b.next_timer() == t0 + 1000ms);
  SECTION("a wake-up") {
    b.woken();
    auto r2 = round_sent(b, t0 + 10ms);
    CHECK(r2.claim == 3);
  }
  SECTION("the poll interval") {
    auto r2 = round_sent(b, t0 + 1000ms);
    CHECK(r2.claim == 3);
  }
  SECTION("a finish carries the claim along at no cost") {
    b.handler_ended(done("a", 1));
    auto r2 = round_sent(b, t0 + 10ms);
    CHECK(r2.finishes.size() == 1);
    CHECK(r2.claim == 4);
  }
}

TEST_CASE("runner_book: the queue's own retry time (rate limit, due job) replaces the poll",
          "[runner_book]") {
  runner_book b(with(8));
  b.next_round(t0);
  b.round_done(8, 2, t0 + 250ms, t0);
  CHECK(b.next_timer() == t0 + 250ms);
  CHECK_FALSE(b.next_round(t0 + 249ms));
  auto r = round_sent(b, t0 + 250ms);
  CHECK(r.claim == 6);
}

TEST_CASE("runner_book: a failed round sends its finishes again, first, and waits to claim",
          "[runner_book]") {
  runner_book b(with(2));
  auto r = b.next_round(t0);
  b.round_done(2, 2, std::nullopt, t0);
  b.handler_ended(done("a", 1));
  auto r2 = round_sent(b, t0);
  CHECK(r2.finishes.size() == 1);
  CHECK(r2.claim == 1);
  b.handler_ended(done("b", 1));
  b.round_failed(std::move(r2), t0);
  // Nothing goes out for retry_delay (a connection that fails at once must
  // not make the runner spin); then the finishes, in their order.
  CHECK_FALSE(b.next_round(t0 + 50ms));
  CHECK(b.next_timer() == t0 + 100ms);
  auto r3 = round_sent(b, t0 + 100ms);
  REQUIRE(r3.finishes.size() == 2);
  CHECK(r3.finishes[0].claim.id == "a");
  CHECK(r3.finishes[1].claim.id == "b");
  CHECK(r3.claim == 2);
}

TEST_CASE("runner_book: a lapsed registration claims nothing until registered again",
          "[runner_book]") {
  runner_book b(with(2));
  b.registration_lapsed();
  CHECK_FALSE(b.next_round(t0));
  b.handler_ended(done("a", 3));  // a finish still goes (the server judges its token)
  auto r = round_sent(b, t0);
  CHECK(r.claim == 0);
  CHECK(r.finishes.size() == 1);
  b.round_done(0, 0, std::nullopt, t0);
  b.registered();
  auto r2 = round_sent(b, t0);
  CHECK(r2.claim == 2);
}

TEST_CASE(
    "runner_book: a stop claims nothing more and waits for the jobs in flight until its "
    "deadline",
    "[runner_book]") {
  runner_book b(with(3));
  b.next_round(t0);
  b.round_done(3, 3, std::nullopt, t0);
  b.stop(t0);
  CHECK(b.stopping());
  CHECK_FALSE(b.ready_to_leave(t0));
  CHECK(b.next_timer() == t0 + 500ms);
  CHECK(b.stop_deadline() == t0 + 500ms);
  b.handler_ended(done("a", 1));
  // A pending finish does not move the timer (nothing failed).
  CHECK(b.next_timer() == t0 + 500ms);
  auto r = round_sent(b, t0 + 10ms);
  CHECK(r.claim == 0);
  CHECK(r.finishes.size() == 1);
  CHECK_FALSE(b.ready_to_leave(t0 + 10ms));  // the round is in flight
  b.round_done(0, 0, std::nullopt, t0 + 20ms);
  CHECK_FALSE(b.ready_to_leave(t0 + 20ms));  // two handlers still run
  SECTION("they end in time") {
    b.handler_ended(std::nullopt);
    b.handler_ended(std::nullopt);
    CHECK(b.ready_to_leave(t0 + 30ms));
  }
  SECTION("the deadline passes") { CHECK(b.ready_to_leave(t0 + 500ms)); }
  SECTION("a second stop does not move the deadline") {
    b.stop(t0 + 400ms);
    CHECK(b.ready_to_leave(t0 + 500ms));
  }
}

TEST_CASE("runner_book: jobs a round brings during a stop run to completion like the others",
          "[runner_book]") {
  runner_book b(with(2));
  b.next_round(t0);
  b.stop(t0);
  b.round_done(2, 2, std::nullopt, t0 + 5ms);
  CHECK(b.busy() == 2);
  CHECK_FALSE(b.ready_to_leave(t0 + 5ms));
}

TEST_CASE("runner_book: settings are clamped to sane values", "[runner_book]") {
  runner_book::settings s;
  s.concurrency = 0;
  s.max_claim_batch = 0;
  s.max_rounds_in_flight = 0;
  s.max_finishes_per_round = 0;
  runner_book b(s);
  auto r = round_sent(b, t0);
  CHECK(r.claim == 1);
  CHECK_FALSE(b.next_round(t0));
}

namespace {

runner_book::settings prefetching(std::size_t concurrency, std::size_t prefetch) {
  auto s = with(concurrency);
  s.prefetch = prefetch;
  return s;
}

/// A book at concurrency 1 after its first round (1 ms) and first handler
/// (`ran`): claiming ahead is on when ran < 1 ms and prefetch > 0.
runner_book timed(std::size_t prefetch, std::chrono::microseconds ran) {
  runner_book b(prefetching(1, prefetch));
  b.next_round(t0);
  b.round_done(1, 1, std::nullopt, t0, 1000us);
  b.handler_ended(done("a", 1), ran);
  return b;
}

}  // namespace

TEST_CASE("runner_book: no claiming ahead before a handler and a round were timed",
          "[runner_book][prefetch]") {
  runner_book b(prefetching(1, 64));
  auto r = round_sent(b, t0);
  CHECK(r.claim == 1);
  CHECK(b.round_done(1, 1, std::nullopt, t0 + 1ms, 1ms) == 1);
  CHECK_FALSE(b.prefetching());  // no handler ended yet
  b.handler_ended(done("a", 1), 10us);
  CHECK(b.prefetching());
}

TEST_CASE("runner_book: short handlers claim ahead what one round trip needs, at most prefetch",
          "[runner_book][prefetch]") {
  SECTION("a round trip of 10 handlers at concurrency 1") {
    auto b = timed(64, 100us);
    CHECK(b.ahead() == 10);
    auto r = round_sent(b, t0);
    CHECK(r.finishes.size() == 1);
    CHECK(r.claim == 11);  // the idle slot and ten ahead
    // The round brings 11: one starts, ten wait for the slot.
    CHECK(b.round_done(11, 11, std::nullopt, t0, 1000us) == 1);
    CHECK(b.busy() == 1);
    CHECK(b.ready() == 10);
    CHECK_FALSE(b.take_ready());  // the slot is busy
    b.handler_ended(done("b", 1), 100us);
    CHECK(b.take_ready());
    CHECK(b.busy() == 1);
    CHECK(b.ready() == 9);
    // Claimed ahead counts against the room: 1 + 10 is full.
    auto r2 = round_sent(b, t0);
    CHECK(r2.claim == 1);
  }
  SECTION("capped by prefetch, and scaled by concurrency") {
    runner_book b(prefetching(4, 16));
    b.next_round(t0);
    b.round_done(4, 4, std::nullopt, t0, 1000us);
    b.handler_ended(done("a", 1), 200us);  // 5 a round trip per slot: 20 > 16
    CHECK(b.ahead() == 16);
  }
  SECTION("prefetch 0 never claims ahead") {
    auto b = timed(0, 1us);
    CHECK_FALSE(b.prefetching());
    auto r = round_sent(b, t0);
    CHECK(r.claim == 1);
  }
}

TEST_CASE("runner_book: one handler longer than a round trip stops the claiming ahead",
          "[runner_book][prefetch]") {
  auto b = timed(64, 100us);
  REQUIRE(b.prefetching());
  auto r = round_sent(b, t0);
  b.round_done(r.claim, 1, std::nullopt, t0, 1000us);
  // Its average is still below the round trip; the last one is not.
  b.handler_ended(done("b", 1), 2000us);
  CHECK_FALSE(b.prefetching());
  CHECK(b.ahead() == 0);
  auto r2 = round_sent(b, t0);
  CHECK(r2.claim == 1);
}

TEST_CASE("runner_book: jobs claimed ahead do not start after a stop, and can be dropped",
          "[runner_book][prefetch]") {
  auto b = timed(64, 100us);
  auto r = round_sent(b, t0);
  REQUIRE(b.round_done(r.claim, 5, std::nullopt, t0, 1000us) == 1);
  REQUIRE(b.ready() == 4);
  SECTION("dropped (lost, aborted, given back)") {
    b.ready_dropped(1);
    CHECK(b.ready() == 3);
    b.ready_dropped(10);  // never below zero
    CHECK(b.ready() == 0);
    b.handler_ended(std::nullopt, 100us);
    CHECK_FALSE(b.take_ready());
  }
  SECTION("a stop") {
    b.stop(t0);
    b.handler_ended(std::nullopt, 100us);
    CHECK_FALSE(b.take_ready());
    // The runner gives them back; the book does not wait for them.
    b.ready_dropped(b.ready());
    CHECK(b.ready_to_leave(t0));
  }
}

TEST_CASE("runner_book: jobs claimed ahead that waited too long stop the claiming ahead",
          "[runner_book][prefetch]") {
  auto b = timed(64, 100us);
  auto r = round_sent(b, t0);
  REQUIRE(b.round_done(r.claim, 5, std::nullopt, t0, 1000us) == 1);
  // The handler of the job that started runs on; the four wait, go back.
  b.ready_waited_too_long(4);
  CHECK(b.ready() == 0);
  CHECK_FALSE(b.prefetching());
  auto r2 = b.next_round(t0);
  CHECK_FALSE(r2);  // the slot is busy and nothing is claimed ahead
  // A short handler that ends turns it on again.
  b.handler_ended(done("b", 1), 100us);
  CHECK(b.prefetching());
}

// ---- hand-off (round::offer, handed_off) -------------------------------------------

namespace {

runner_book::settings taking(std::size_t concurrency) {
  auto s = with(concurrency);
  s.hand_off = true;
  return s;
}

}  // namespace

TEST_CASE("runner_book: a round offers the slots no round in flight will fill", "[runner_book]") {
  runner_book b(taking(4));
  // Not before the runner's channel is subscribed.
  auto r0 = round_sent(b, t0);
  CHECK(r0.claim == 4);
  CHECK(r0.offer == -1);
  b.round_done(4, 1, std::nullopt, t0);
  CHECK(b.busy() == 1);
  b.set_offering(true);
  b.woken();
  auto r = round_sent(b, t0);
  CHECK(r.claim == 3);
  CHECK(r.offer == 3);
  // A second round in flight finds no idle slot the first does not ask for.
  b.handler_ended(done("a", 1));
  auto r2 = round_sent(b, t0);
  CHECK(r2.claim == 1);
  CHECK(r2.offer == 1);
}

TEST_CASE("runner_book: an offer is withdrawn at a stop and when the channel is lost",
          "[runner_book]") {
  SECTION("a stop: the withdrawal goes out alone") {
    runner_book b(taking(2));
    b.set_offering(true);
    auto r = round_sent(b, t0);
    CHECK(r.offer == 2);
    b.round_done(2, 1, std::nullopt, t0);
    b.stop(t0);
    // A handler still runs: the withdrawal goes out during the grace.
    CHECK_FALSE(b.ready_to_leave(t0));
    auto w = round_sent(b, t0);
    CHECK(w.claim == 0);
    CHECK(w.finishes.empty());
    CHECK(w.offer == 0);
    CHECK_FALSE(b.next_round(t0));
    b.round_done(0, 0, std::nullopt, t0);
    CHECK_FALSE(b.ready_to_leave(t0));
    b.handler_ended(std::nullopt);
    // Leaving does not wait for a withdrawal: the leave removes the offer
    // with the registration.
    CHECK(b.ready_to_leave(t0));
  }
  SECTION("the channel lost") {
    runner_book b(taking(2));
    b.set_offering(true);
    round_sent(b, t0);
    b.round_done(2, 0, std::nullopt, t0);
    b.set_offering(false);
    auto w = round_sent(b, t0);
    CHECK(w.offer == 0);
    CHECK_FALSE(b.next_round(t0));
    // Offering again: the next round that claims offers again.
    b.round_done(0, 0, std::nullopt, t0);
    b.set_offering(true);
    b.woken();
    auto r2 = round_sent(b, t0);
    CHECK(r2.offer == 2);
  }
}

TEST_CASE("runner_book: jobs handed off fill idle slots, the rest wait; none start at a stop",
          "[runner_book]") {
  runner_book b(taking(2));
  b.set_offering(true);
  round_sent(b, t0);
  b.round_done(2, 0, std::nullopt, t0);
  CHECK(b.handed_off(3) == 2);
  CHECK(b.busy() == 2);
  CHECK(b.ready() == 1);
  // Nothing is claimed while the slots are full, and the offer is left
  // as the put left it (it took the slots it used).
  b.woken();
  CHECK_FALSE(b.next_round(t0));
  b.stop(t0);
  // The stop withdraws it.
  auto w = round_sent(b, t0);
  CHECK(w.claim == 0);
  CHECK(w.offer == 0);
  b.round_done(0, 0, std::nullopt, t0);
  CHECK(b.handed_off(2) == 0);
  CHECK(b.ready() == 3);
  b.ready_dropped(3);
  CHECK(b.ready() == 0);
}

TEST_CASE("runner_book: held rounds: none goes out, finishes wait for the release",
          "[runner_book]") {
  runner_book b(taking(1));
  round_sent(b, t0);
  b.round_done(1, 1, std::nullopt, t0);
  b.hold_rounds(true);
  b.handler_ended(done("a", 1));
  CHECK_FALSE(b.next_round(t0));
  CHECK(b.pending_finishes() == 1);
  b.stop(t0);
  CHECK_FALSE(b.ready_to_leave(t0));
  b.hold_rounds(false);
  auto r2 = round_sent(b, t0);
  CHECK(r2.finishes.size() == 1);
  CHECK(r2.claim == 0);
}

TEST_CASE("runner_book: handlers still running are cancelled once, when the stop deadline passes",
          "[runner_book]") {
  runner_book b(with(2));
  b.next_round(t0);
  b.round_done(2, 2, std::nullopt, t0);
  CHECK_FALSE(b.cancel_due(t0 + 10s));  // no stop asked for
  b.stop(t0);
  CHECK_FALSE(b.cancel_due(t0 + 499ms));
  SECTION("a handler still runs at the deadline") {
    CHECK(b.cancel_due(t0 + 500ms));
    CHECK_FALSE(b.cancel_due(t0 + 600ms));  // once
  }
  SECTION("every handler ended before the deadline") {
    b.handler_ended(std::nullopt);
    b.handler_ended(std::nullopt);
    CHECK_FALSE(b.cancel_due(t0 + 500ms));
  }
}

TEST_CASE("runner_book: heartbeats go at the interval set, else at a third of the worker's ttl",
          "[runner_book]") {
  auto s = with(1);
  s.worker_ttl = 9000ms;
  s.heartbeat_interval = 0ms;
  CHECK(runner_book(s).heartbeat_interval() == 3000ms);
  s.heartbeat_interval = 1200ms;
  CHECK(runner_book(s).heartbeat_interval() == 1200ms);
  s.heartbeat_interval = 0ms;
  s.worker_ttl = 2ms;  // a third rounds to 0: 1 ms at least
  CHECK(runner_book(s).heartbeat_interval() == 1ms);
  // Longer than a steady timer can wait: cut to what it can.
  s.worker_ttl = std::chrono::milliseconds(thoonk::detail::jobs::max_time_ms);
  CHECK(runner_book(s).heartbeat_interval() ==
        std::chrono::duration_cast<std::chrono::milliseconds>(runner_book::clock::duration::max()));
}

TEST_CASE("runner_book: an offer lasts two poll intervals, at most the worker's ttl",
          "[runner_book]") {
  auto s = with(1);  // poll interval 1000 ms
  s.worker_ttl = 10000ms;
  CHECK(runner_book(s).offer_ttl() == 2000ms);
  s.worker_ttl = 1500ms;
  CHECK(runner_book(s).offer_ttl() == 1500ms);
  // A poll interval near the largest time does not overflow.
  s.worker_ttl = std::chrono::milliseconds(thoonk::detail::jobs::max_time_ms);
  s.poll_interval = std::chrono::milliseconds::max();
  CHECK(runner_book(s).offer_ttl() ==
        std::chrono::milliseconds(thoonk::detail::jobs::max_time_ms - 1));
}

TEST_CASE("runner_book: a hand-off check holds rounds and starts once none is in flight",
          "[runner_book]") {
  auto s = with(2);
  s.hand_off = true;
  runner_book b(s);
  round_sent(b, t0);  // in flight
  CHECK(b.want_check());
  CHECK(b.rounds_held());
  CHECK_FALSE(b.next_round(t0 + 1ms));
  CHECK_FALSE(b.start_check());  // a round is in flight: its claims are not known yet
  b.round_done(2, 2, std::nullopt, t0 + 2ms);
  CHECK(b.start_check());
  CHECK(b.checking());
  CHECK_FALSE(b.check_wanted());
  CHECK_FALSE(b.start_check());  // one at a time
  b.handler_ended(done("a", 1));
  CHECK_FALSE(b.next_round(t0 + 3ms));  // the finish waits for the check
  SECTION("the check ends: rounds go on") {
    b.check_done();
    CHECK_FALSE(b.rounds_held());
    auto r = round_sent(b, t0 + 4ms);
    CHECK(r.finishes.size() == 1);
  }
  SECTION("wanted again while it ran: it runs once more before any round") {
    CHECK(b.want_check());
    b.check_done();
    CHECK(b.rounds_held());
    CHECK_FALSE(b.next_round(t0 + 4ms));
    CHECK(b.start_check());
  }
  SECTION("it failed for the connection: wanted again after the pause") {
    b.check_again(true);
    b.check_done();
    CHECK(b.rounds_held());
    CHECK(b.start_check());
  }
  SECTION("it failed, and the runner leaves: not again") {
    b.check_again(false);
    b.check_done();
    CHECK_FALSE(b.rounds_held());
    CHECK_FALSE(b.start_check());
  }
}

TEST_CASE("runner_book: a stop drops a hand-off check that is not running, and refuses new ones",
          "[runner_book]") {
  runner_book b(with(1));
  SECTION("wanted, not started") {
    CHECK(b.want_check());
    b.stop(t0);
    CHECK_FALSE(b.check_wanted());
    CHECK_FALSE(b.rounds_held());
    CHECK_FALSE(b.start_check());
  }
  SECTION("running: it ends, and is not tried again") {
    CHECK(b.want_check());
    CHECK(b.start_check());
    b.stop(t0);
    CHECK(b.checking());
    CHECK(b.rounds_held());
    b.check_again(true);
    b.check_done();
    CHECK_FALSE(b.check_wanted());
    CHECK_FALSE(b.rounds_held());
  }
  SECTION("asked for during the stop") {
    b.stop(t0);
    CHECK_FALSE(b.want_check());
    CHECK_FALSE(b.rounds_held());
  }
}
