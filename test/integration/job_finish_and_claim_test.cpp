// job_queue::finish_and_claim: a claimed job finished and the next one
// claimed in one script call. What it hands out, what each error leaves on
// the server (a failed finish claims nothing; queue_empty means finished),
// one batch with mixed outcomes, many loops at once, and what cancellation
// and a killed connection do to the job it claimed.
// co_await stays out of CHECK and REQUIRE: g++ 12 awaits it twice there.
#include "support/job_engine.hpp"
#include "support/runner.hpp"

#include <set>

using namespace thoonk::test;
using E = thoonk::error;

namespace {

// A client config allowing items of at most 64 bytes.
thoonk::config small_items() {
  auto cfg = named_config();
  cfg.max_item_size = 64;
  return cfg;
}

// The result of one finish_and_claim started with a callback.
struct finish_claim_call {
  bool done = false;
  boost::system::error_code ec;
  thoonk::claimed_job next;
};

// Starts finish_and_claim(claim) without awaiting it; `out` gets the
// result. With `sig`, the call can be cancelled through it.
void start_call(thoonk::job_queue& q, const thoonk::claim_ref& claim, finish_claim_call& out,
                asio::cancellation_signal* sig = nullptr) {
  auto done = [&out](boost::system::error_code ec, thoonk::claimed_job j) {
    out.done = true;
    out.ec = ec;
    out.next = std::move(j);
  };
  if (sig)
    q.async_finish_and_claim(claim, asio::bind_cancellation_slot(sig->slot(), std::move(done)));
  else q.async_finish_and_claim(claim, std::move(done));
}

// Waits (at most 5 s) for a call start_call started; it must complete.
asio::awaitable<void> wait_done(const finish_claim_call& out) {
  const bool done = co_await wait_until([&] { return out.done; }, 5s);
  REQUIRE(done);
}

// f.name as a job queue holding `n` copies of "x", the first of them
// claimed.
struct first_claimed {
  thoonk::job_queue q;
  std::vector<std::string> ids;
  thoonk::claimed_job job;
};

asio::awaitable<first_claimed> queue_with_first_claimed(fixture& f, std::size_t n) {
  auto q = co_await engine_queue(f);
  auto ids = co_await put_copies(q, n, "x");
  auto job = co_await q.async_claim(1s, asio::use_awaitable);
  co_return first_claimed{std::move(q), std::move(ids), std::move(job)};
}

}  // namespace

FIXTURE_TEST_CASE("finclaim",
                  "finish_and_claim: finishes the job and hands out the next in queue order; "
                  "on an empty queue it finishes and says queue_empty",
                  "[job][finish_and_claim][finish][claim]") {
  auto q = co_await engine_queue(f);
  std::vector<std::string> items{"a", "b", "c"};
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto j1 = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j1.id == ids[0]);

  auto j2 = co_await q.async_finish_and_claim(j1, asio::use_awaitable);
  CHECK(j2.id == ids[1]);
  CHECK(j2.item == "b");
  CHECK(j2.failures == 0);
  CHECK(j2.token != 0);
  auto c = co_await counts_of(q);
  CHECK(c.finishes == 1);
  CHECK(c.claimed == 1);
  CHECK(c.waiting == 1);

  // With a result: kept for get_result, as finish() keeps it.
  auto j3 = co_await q.async_finish_and_claim(j2, "done-b", asio::use_awaitable);
  CHECK(j3.id == ids[2]);
  auto result = co_await q.async_get_result(ids[1], 1s, asio::use_awaitable);
  CHECK(result == "done-b");

  // The last one: finished, nothing to claim.
  auto [ec, none] = co_await q.async_finish_and_claim(j3, nothrow);
  CHECK(ec == E::queue_empty);
  CHECK(none.id.empty());
  c = co_await counts_of(q);
  CHECK(c.finishes == 3);
  CHECK(c.claimed == 0);
  CHECK(c.waiting == 0);
  CHECK(c.items == 0);
  auto [again, unused] = co_await q.async_finish_and_claim(j3, nothrow);
  CHECK(again == E::job_not_found);
}

FIXTURE_TEST_CASE_WITH_CONFIG(small_items(), "finclaim",
                              "finish_and_claim: a finish that fails claims nothing and "
                              "changes nothing; bad arguments fail before any I/O",
                              "[job][finish_and_claim][errors]") {
  auto q = co_await engine_queue(f);
  std::vector<std::string> items{"a", "b"};
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  const auto unchanged = [&]() -> asio::awaitable<void> {
    auto c = co_await counts_of(q);
    CHECK(c.claimed == 1);
    CHECK(c.waiting == 1);
    CHECK(c.finishes == 0);
  };

  // Named claim_refs, not temporaries: g++ 12 mishandles a braced
  // temporary inside a co_await expression.
  const thoonk::claim_ref other_token{j.id, j.token + 1};
  auto [lost, n1] = co_await q.async_finish_and_claim(other_token, nothrow);
  CHECK(lost == E::lost_claim);
  CHECK(n1.id.empty());
  co_await unchanged();
  const thoonk::claim_ref no_such_job{"no-such-job", 1};
  auto [unknown, n2] = co_await q.async_finish_and_claim(no_such_job, nothrow);
  CHECK(unknown == E::job_not_found);
  co_await unchanged();
  const thoonk::claim_ref still_waiting{ids[1], 1};
  auto [waiting, n3] = co_await q.async_finish_and_claim(still_waiting, nothrow);
  CHECK(waiting == E::job_not_claimed);
  co_await unchanged();

  const auto before = f.c.conn().stats().requests;
  const thoonk::claim_ref empty_id{"", 1};
  auto [bad_id, n4] = co_await q.async_finish_and_claim(empty_id, nothrow);
  CHECK(bad_id == E::invalid_id);
  auto [too_large, n5] = co_await q.async_finish_and_claim(j, std::string(65, 'r'), nothrow);
  CHECK(too_large == E::item_too_large);
  CHECK(f.c.conn().stats().requests == before);
  co_await unchanged();

  // The claim is still good after all that.
  auto next = co_await q.async_finish_and_claim(j, std::string(64, 'r'), asio::use_awaitable);
  CHECK(next.id == ids[1]);
}

FIXTURE_TEST_CASE("finclaim",
                  "finish_and_claim: calls of one tick share a script call, each finishes or "
                  "fails alone, and only those that finished get a job while jobs last",
                  "[job][finish_and_claim][batch]") {
  auto q = co_await engine_queue(f);
  auto ids = co_await put_copies(q, 6, "x");
  std::vector<thoonk::claimed_job> held;
  for (int i = 0; i < 4; ++i) held.push_back(co_await q.async_claim(1s, asio::use_awaitable));
  // One call alone first (the script is loaded now, so the batch below is
  // one request).
  auto warm = co_await q.async_finish_and_claim(held[3], asio::use_awaitable);
  CHECK(warm.id == ids[4]);
  const auto requests_before = f.c.conn().stats().requests;
  finish_claim_call a, b, c;
  start_call(q, held[0], a);
  start_call(q, thoonk::claim_ref(held[1].id, held[1].token + 7), b);
  start_call(q, held[2], c);
  co_await wait_done(a);
  co_await wait_done(b);
  co_await wait_done(c);
  // On a cluster the call goes to the queue's node, not always this one.
  if (!cluster_topology()) CHECK(f.c.conn().stats().requests == requests_before + 1);
  CHECK(!a.ec);
  CHECK(a.next.id == ids[5]);  // the last waiting job, to the first that finished
  CHECK(b.ec == E::lost_claim);
  CHECK(b.next.id.empty());
  CHECK(c.ec == E::queue_empty);  // finished; no job left for it
  CHECK(c.next.id.empty());
  auto counts = co_await counts_of(q);
  CHECK(counts.finishes == 3);
  CHECK(counts.claimed == 3);  // held[1], warm and a's job
  CHECK(counts.waiting == 0);
}

FIXTURE_TEST_CASE("finclaim",
                  "finish_and_claim: 64 loops drain 3,000 jobs, each job handed out once, none "
                  "left claimed",
                  "[job][finish_and_claim][concurrency]") {
  auto q = co_await engine_queue(f);
  constexpr std::size_t jobs = 3000;
  auto ids = co_await put_copies(q, jobs, "x");
  std::multiset<std::string> seen;
  int loops_left = 64;
  int errors = 0;
  auto loop = [&]() -> asio::awaitable<void> {
    auto [ec, job] = co_await q.async_claim(0ms, nothrow);
    while (!ec) {
      seen.insert(job.id);
      std::tie(ec, job) = co_await q.async_finish_and_claim(job, nothrow);
    }
    if (ec != E::queue_empty) ++errors;
    --loops_left;
  };
  for (int i = 0; i < 64; ++i) asio::co_spawn(f.ioc, loop(), asio::detached);
  const bool drained = co_await wait_until([&] { return loops_left == 0; }, 15s);
  REQUIRE(drained);
  CHECK(errors == 0);
  CHECK(seen.size() == jobs);
  CHECK(std::set<std::string>(seen.begin(), seen.end()).size() == jobs);
  auto c = co_await counts_of(q);
  CHECK(c.finishes == static_cast<std::int64_t>(jobs));
  CHECK(c.claimed == 0);
  CHECK(c.waiting == 0);
  CHECK(c.items == 0);
}

FIXTURE_TEST_CASE("finclaim",
                  "finish_and_claim: a paused queue finishes the job and claims nothing "
                  "(queue_empty); after resume the next claim gets it",
                  "[job][finish_and_claim][pause]") {
  auto [q, ids, j] = co_await queue_with_first_claimed(f, 2);
  co_await q.async_pause(asio::use_awaitable);
  auto [ec, none] = co_await q.async_finish_and_claim(j, nothrow);
  CHECK(ec == E::queue_empty);
  auto c = co_await counts_of(q);
  CHECK(c.finishes == 1);
  CHECK(c.claimed == 0);
  CHECK(c.waiting == 1);
  co_await q.async_resume(asio::use_awaitable);
  auto next = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(next.id == ids[1]);
}

TWO_CLIENT_TEST_CASE("finclaim",
                     "finish_and_claim cancelled: before the call is sent nothing happens; in "
                     "flight, the job it claimed goes back to the front with no failure counted",
                     "[job][finish_and_claim][cancel][single]") {
  // [single]: CLIENT PAUSE must reach the queue's own server.
  auto [q, ids, j1] = co_await queue_with_first_claimed(f, 3);
  co_await other.async_connect(asio::use_awaitable);

  // Cancelled in the tick it starts: not sent.
  {
    asio::cancellation_signal sig;
    finish_claim_call o;
    start_call(q, j1, o, &sig);
    sig.emit(asio::cancellation_type::terminal);
    co_await wait_done(o);
    CHECK(o.ec == asio::error::operation_aborted);
    co_await sleep_for(100ms);
    auto c = co_await counts_of(q);
    CHECK(c.finishes == 0);
    CHECK(c.claimed == 1);
    CHECK(c.waiting == 2);
  }

  // In flight: the server holds the script (CLIENT PAUSE WRITE from the
  // other client) while the caller gives up.
  co_await cmd(other.conn(), "CLIENT", "PAUSE", "400", "WRITE");
  asio::cancellation_signal sig;
  finish_claim_call o;
  start_call(q, j1, o, &sig);
  co_await sleep_for(100ms);
  sig.emit(asio::cancellation_type::terminal);
  co_await wait_done(o);
  CHECK(o.ec == asio::error::operation_aborted);
  CHECK(o.next.id.empty());
  // After the pause: j1 finished; the job claimed for nobody is back at the
  // front of the line, unclaimed, with no failure.
  bool back = false;
  for (int i = 0; i < 100 && !back; ++i) {
    co_await sleep_for(20ms);
    auto c = co_await counts_of(q);
    back = c.finishes == 1 && c.claimed == 0 && c.waiting == 2;
  }
  CHECK(back);
  auto info = co_await job_of(q, ids[1]);
  CHECK(info.failures == 0);
  auto next = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(next.id == ids[1]);
}

TWO_CLIENT_TEST_CASE("finclaim",
                     "finish_and_claim on a connection killed while the call is held: "
                     "unknown_outcome, and finishing again tells what happened",
                     "[job][finish_and_claim][kill][single]") {
  // [single]: CLIENT PAUSE and KILL must reach the queue's own server.
  auto [q, ids, j] = co_await queue_with_first_claimed(f, 2);
  co_await other.async_connect(asio::use_awaitable);
  auto me = co_await cmd(f.c.conn(), "CLIENT", "ID");
  co_await cmd(other.conn(), "CLIENT", "PAUSE", "300", "WRITE");
  finish_claim_call o;
  start_call(q, j, o);
  co_await sleep_for(100ms);
  co_await cmd(other.conn(), "CLIENT", "KILL", "ID", std::to_string(me.integer));
  co_await wait_done(o);
  CHECK(o.ec == E::unknown_outcome);
  CHECK(o.next.id.empty());
  // The client reconnects; the same call again either finishes the job now
  // (the killed call never ran) or finds it finished.
  co_await sleep_for(400ms);
  auto [ec, next] = co_await q.async_finish_and_claim(j, nothrow);
  CHECK((!ec || ec == E::job_not_found));
  if (!ec) CHECK(next.id == ids[1]);
}
