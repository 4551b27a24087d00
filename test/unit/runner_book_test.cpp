// runner_book (src/jobs/runner_book.*): the runner's decisions on a fake
// clock, without a server. Each case is one scenario a running worker meets.
#include "jobs/runner_book.hpp"

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
  f.claim = thoonk::claim_ref{std::move(id), token};
  if (result) f.result = result;
  return f;
}

const auto t0 = runner_book::clock::now();

}  // namespace

TEST_CASE("runner_book: the first round claims every slot, capped by the batch", "[runner_book]") {
  runner_book b(with(600, 256));
  auto r = b.next_round(t0);
  REQUIRE(r);
  CHECK(r->claim == 256);
  CHECK(r->finishes.empty());
  auto r2 = b.next_round(t0);
  REQUIRE(r2);
  CHECK(r2->claim == 256);
  // Two rounds in flight at most.
  CHECK_FALSE(b.next_round(t0));
  CHECK(b.rounds_in_flight() == 2);
}

TEST_CASE("runner_book: a finish and the next claim go in one round (concurrency 1)",
          "[runner_book]") {
  runner_book b(with(1));
  auto r = b.next_round(t0);
  REQUIRE(r);
  CHECK(r->claim == 1);
  // Nothing more while the slot is asked for.
  CHECK_FALSE(b.next_round(t0));
  b.round_done(1, 1, std::nullopt, t0);
  CHECK(b.busy() == 1);
  CHECK_FALSE(b.next_round(t0));  // the slot is busy
  b.handler_ended(done("a", 1, "ok"));
  auto r2 = b.next_round(t0);
  REQUIRE(r2);
  REQUIRE(r2->finishes.size() == 1);
  CHECK(r2->finishes[0].claim.id == "a");
  CHECK(r2->finishes[0].result == std::optional<std::string>("ok"));
  CHECK(r2->claim == 1);
}

TEST_CASE("runner_book: a dry queue is asked again at a wake-up or after the poll interval",
          "[runner_book]") {
  runner_book b(with(4));
  auto r = b.next_round(t0);
  REQUIRE(r);
  b.round_done(4, 1, std::nullopt, t0);  // one job; the queue ran dry
  CHECK_FALSE(b.next_round(t0 + 10ms));
  CHECK(b.next_timer() == t0 + 1000ms);
  SECTION("a wake-up") {
    b.woken();
    auto r2 = b.next_round(t0 + 10ms);
    REQUIRE(r2);
    CHECK(r2->claim == 3);
  }
  SECTION("the poll interval") {
    auto r2 = b.next_round(t0 + 1000ms);
    REQUIRE(r2);
    CHECK(r2->claim == 3);
  }
  SECTION("a finish carries the claim along at no cost") {
    b.handler_ended(done("a", 1));
    auto r2 = b.next_round(t0 + 10ms);
    REQUIRE(r2);
    CHECK(r2->finishes.size() == 1);
    CHECK(r2->claim == 4);
  }
}

TEST_CASE("runner_book: the queue's own retry time (rate limit, due job) replaces the poll",
          "[runner_book]") {
  runner_book b(with(8));
  b.next_round(t0);
  b.round_done(8, 2, t0 + 250ms, t0);
  CHECK(b.next_timer() == t0 + 250ms);
  CHECK_FALSE(b.next_round(t0 + 249ms));
  auto r = b.next_round(t0 + 250ms);
  REQUIRE(r);
  CHECK(r->claim == 6);
}

TEST_CASE("runner_book: a failed round sends its finishes again, first, and waits to claim",
          "[runner_book]") {
  runner_book b(with(2));
  auto r = b.next_round(t0);
  b.round_done(2, 2, std::nullopt, t0);
  b.handler_ended(done("a", 1));
  auto r2 = b.next_round(t0);
  REQUIRE(r2);
  CHECK(r2->finishes.size() == 1);
  CHECK(r2->claim == 1);
  b.handler_ended(done("b", 1));
  b.round_failed(std::move(*r2), t0);
  // Nothing goes out for retry_delay (a connection that fails at once must
  // not make the runner spin); then the finishes, in their order.
  CHECK_FALSE(b.next_round(t0 + 50ms));
  CHECK(b.next_timer() == t0 + 100ms);
  auto r3 = b.next_round(t0 + 100ms);
  REQUIRE(r3);
  REQUIRE(r3->finishes.size() == 2);
  CHECK(r3->finishes[0].claim.id == "a");
  CHECK(r3->finishes[1].claim.id == "b");
  CHECK(r3->claim == 2);
}

TEST_CASE("runner_book: a lapsed registration claims nothing until registered again",
          "[runner_book]") {
  runner_book b(with(2));
  b.registration_lapsed();
  CHECK_FALSE(b.next_round(t0));
  b.handler_ended(done("a", 3));  // a finish still goes (the server judges its token)
  auto r = b.next_round(t0);
  REQUIRE(r);
  CHECK(r->claim == 0);
  CHECK(r->finishes.size() == 1);
  b.round_done(0, 0, std::nullopt, t0);
  b.registered();
  auto r2 = b.next_round(t0);
  REQUIRE(r2);
  CHECK(r2->claim == 2);
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
  auto r = b.next_round(t0 + 10ms);
  REQUIRE(r);
  CHECK(r->claim == 0);
  CHECK(r->finishes.size() == 1);
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
  auto r = b.next_round(t0);
  REQUIRE(r);
  CHECK(r->claim == 1);
  CHECK_FALSE(b.next_round(t0));
}
