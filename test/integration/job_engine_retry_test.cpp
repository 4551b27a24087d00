// Failures, retries with backoff, stalls and dead letters (docs/jobs.md §9).
#include "support/job_engine.hpp"

#include <boost/json.hpp>

#include <cstring>
#include <limits>

using namespace thoonk::test;
using E = thoonk::error;
using outcome = thoonk::fail_result::outcome_t;

namespace {

thoonk::job_queue::settings fast_retries(std::int64_t max_retries) {
  return retries(max_retries, 20ms, 200ms);
}

// A job queue and the fresh queue its dead letters go to.
struct dead_lettering {
  thoonk::job_queue q;
  thoonk::job_queue dead;
  std::string dead_name;
};

// Connects f's client, creates a dead-letter queue with a fresh name
// (dead_letter_name(): in f.name's slot on a cluster, where f's client must
// have dead_letter_config()) and the job queue f.name with settings `s`
// sending its dead letters there.
asio::awaitable<dead_lettering> with_dead_letters(fixture& f, thoonk::job_queue::settings s) {
  const auto dead_name = dead_letter_name(f.name, unique_name("retry-dead"));
  co_await f.c.async_connect(asio::use_awaitable);
  auto dead = co_await thoonk::job_queue::async_create_or_open(f.c, dead_name, asio::use_awaitable);
  s.dead_letter_queue = dead_name;
  auto q = co_await engine_queue(f, s);
  co_return dead_lettering{std::move(q), std::move(dead), dead_name};
}

}  // namespace

FIXTURE_TEST_CASE("retry",
                  "retry: counts, backoff inside [min, max] and growing, then a dead letter",
                  "[job][retry][fail][claim][get_job][counts]") {
  auto q = co_await engine_queue(f, fast_retries(6));
  auto id = co_await put_item(q, "flaky");
  std::int64_t last_wait = 0;
  for (std::int64_t n = 1; n <= 5; ++n) {
    auto j = co_await q.async_claim(5s, asio::use_awaitable);
    REQUIRE(j.id == id);
    CHECK(j.failures == n - 1);
    const auto before = thoonk::now_epoch_ms();
    auto r = co_await q.async_fail(j, "error " + std::to_string(n), asio::use_awaitable);
    const auto after = thoonk::now_epoch_ms();
    CHECK(r.outcome == outcome::retry_scheduled);
    CHECK(r.retry_count == n);
    // The wait is measured from the script's `now`, between before and after.
    const auto lo = r.run_at - after, hi = r.run_at - before;
    INFO("failure " << n << ": wait between " << lo << " and " << hi << " ms");
    CHECK(hi >= 20);
    CHECK(lo <= 200);
    // Doubling minus at most 20 %: each wait is more than the last until
    // the cap (20, 40, 80, 160, 200 at most).
    if (n > 1 && hi < 200) CHECK(hi > last_wait);
    last_wait = lo;
    auto info = co_await job_of(q, id);
    CHECK(info.retry_count == n);
    CHECK(info.failures == n);
    CHECK(info.last_error == "error " + std::to_string(n));
    CHECK((info.state == thoonk::job_state::scheduled || info.state == thoonk::job_state::waiting));
  }
  auto j = co_await q.async_claim(5s, asio::use_awaitable);
  auto r = co_await q.async_fail(j, "final", asio::use_awaitable);
  CHECK(r.outcome == outcome::dead_lettered);
  CHECK(r.retry_count == 6);
  auto info = co_await job_of(q, id);
  CHECK(info.state == thoonk::job_state::stalled);
  CHECK(info.item == "flaky");
  CHECK(info.last_error == "final");
  CHECK(info.retry_count == 6);
  // A contract client finds it where the contract puts dead jobs.
  co_await expect_only_stalled(f, q, id);
  // retry() (contract) puts it back.
  co_await q.async_retry(id, asio::use_awaitable);
  auto again = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(again.id == id);
}

FIXTURE_TEST_CASE("retry",
                  "retry: retry_at overrides the backoff; a permanent error skips the retries",
                  "[job][retry][fail][claim][get_job]") {
  auto q = co_await engine_queue(f, fast_retries(10));
  auto id = co_await put_item(q, "x");
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  thoonk::fail_options o;
  o.retry_at = thoonk::now_epoch_ms() + 3600000;
  auto r = co_await q.async_fail(j, "later please", o, asio::use_awaitable);
  CHECK(r.outcome == outcome::retry_scheduled);
  CHECK(r.run_at == *o.retry_at);
  auto id_job = co_await job_of(q, id);
  CHECK(id_job.run_at == *o.retry_at);
  auto claimed = co_await try_claim(q);
  CHECK(!claimed);

  // retry_at in the past: claimable at once.
  auto id2 = co_await put_item(q, "y");
  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  REQUIRE(j2.id == id2);
  thoonk::fail_options now_o;
  now_o.retry_at = thoonk::now_epoch_ms() - 1;
  co_await q.async_fail(j2, "again", now_o, asio::use_awaitable);
  auto j3 = co_await try_claim(q);
  REQUIRE(j3);
  CHECK(j3->id == id2);

  thoonk::fail_options perm;
  perm.permanent = true;
  auto r3 = co_await q.async_fail(*j3, "fatal", perm, asio::use_awaitable);
  CHECK(r3.outcome == outcome::dead_lettered);
  CHECK(r3.retry_count == 2);
  auto info = co_await job_of(q, id2);
  CHECK(info.state == thoonk::job_state::stalled);
  CHECK(info.last_error == "fatal");
}

FIXTURE_TEST_CASE_WITH_CONFIG(
    dead_letter_config(), "retry",
    "retry: the dead-letter record is valid JSON [id, data, error], bytes included",
    "[job][retry][fail][dead_letter][claim]") {
  const auto s = fast_retries(1);
  auto [q, dead, dead_name] = co_await with_dead_letters(f, s);

  const std::string texts[] = {"plain \"quoted\" \\ text\n", std::string("bin\0\xff\xfe", 6),
                               "caf\xc3\xa9 \xe2\x82\xac"};
  for (const auto& data : texts) {
    auto id = co_await put_item(q, data);
    auto j = co_await q.async_claim(1s, asio::use_awaitable);
    auto r = co_await q.async_fail(j, data + " failed", asio::use_awaitable);
    CHECK(r.outcome == outcome::dead_lettered);
    auto rec = co_await dead.async_claim(1s, asio::use_awaitable);
    INFO(rec.item);
    boost::system::error_code jec;
    auto jv = boost::json::parse(rec.item, jec);
    REQUIRE(!jec);
    REQUIRE(jv.is_array());
    const auto& a = jv.as_array();
    REQUIRE(a.size() == 3);
    // A string when the bytes are UTF-8, else {"base64": ...}.
    auto bytes_of = [](const boost::json::value& v) -> std::string {
      if (v.is_string()) return std::string(v.as_string());
      const auto& b64 = v.as_object().at("base64").as_string();
      std::string out;
      int val = 0, bits = -8;
      for (char c : b64) {
        const auto* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        const char* p = std::strchr(alphabet, c);
        if (c == '=' || !p) break;
        val = (val << 6) + static_cast<int>(p - alphabet);
        bits += 6;
        if (bits >= 0) {
          out.push_back(static_cast<char>((val >> bits) & 0xff));
          bits -= 8;
        }
      }
      return out;
    };
    CHECK(bytes_of(a[0]) == id);
    CHECK(bytes_of(a[1]) == data);
    CHECK(bytes_of(a[2]) == data + " failed");
    co_await dead.async_finish(rec, asio::use_awaitable);
    // The job itself is kept as a dead letter too.
    auto id_job = co_await job_of(q, id);
    CHECK(id_job.state == thoonk::job_state::stalled);
  }
  co_await f.c.async_delete_feed(dead_name, asio::use_awaitable);
}

FIXTURE_TEST_CASE_WITH_CONFIG(
    dead_letter_config(), "retry",
    "retry: a dead-letter queue named after the handle was opened is used",
    "[job][retry][fail][dead_letter][set_config]") {
  auto q = co_await engine_queue(f, fast_retries(1));
  auto id = co_await put_item(q, "a");
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_fail(j, "no dead-letter queue yet", asio::use_awaitable);  // none configured

  const auto d1 = dead_letter_name(f.name, unique_name("retry-d1")),
             d2 = dead_letter_name(f.name, unique_name("retry-d2"));
  auto q1 = co_await thoonk::job_queue::async_create_or_open(f.c, d1, asio::use_awaitable);
  auto q2 = co_await thoonk::job_queue::async_create_or_open(f.c, d2, asio::use_awaitable);
  co_await f.c.async_set_config(f.name, "dead_letter_queue", d1, asio::use_awaitable);
  co_await q.async_put("b", asio::use_awaitable);
  j = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_fail(j, "to d1", asio::use_awaitable);
  co_await f.c.async_set_config(f.name, "dead_letter_queue", d2, asio::use_awaitable);
  co_await q.async_put("c", asio::use_awaitable);
  j = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_fail(j, "to d2", asio::use_awaitable);
  auto counts = co_await q1.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 1);
  counts = co_await q2.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 1);
  auto rec1 = co_await q1.async_claim(1s, asio::use_awaitable);
  auto rec2 = co_await q2.async_claim(1s, asio::use_awaitable);
  CHECK(rec1.item.find("to d1") != std::string::npos);
  CHECK(rec2.item.find("to d2") != std::string::npos);
  // A dead-letter queue that does not exist: the job is still kept.
  const auto nowhere = dead_letter_name(f.name, unique_name("nowhere"));
  co_await f.c.async_set_config(f.name, "dead_letter_queue", nowhere, asio::use_awaitable);
  auto lost = co_await put_item(q, "d");
  j = co_await q.async_claim(1s, asio::use_awaitable);
  auto r = co_await q.async_fail(j, "kept", asio::use_awaitable);
  CHECK(r.outcome == outcome::dead_lettered);
  auto lost_job = co_await job_of(q, lost);
  CHECK(lost_job.last_error == "kept");
  auto id_job = co_await job_of(q, id);
  CHECK(id_job.state == thoonk::job_state::stalled);
  co_await f.c.async_delete_feed(d1, asio::use_awaitable);
  co_await f.c.async_delete_feed(d2, asio::use_awaitable);
}

FIXTURE_TEST_CASE_WITH_CONFIG(
    dead_letter_config(), "retry",
    "retry: a lapsed lease is a stall; at max_stalls a dead letter with its error",
    "[job][retry][maintain][claim][get_job][dead_letter]") {
  thoonk::job_queue::settings s;
  s.retry.max_stalls = 2;
  auto [q, dead, dead_name] = co_await with_dead_letters(f, s);
  auto id = co_await put_item(q, "sleepy");
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  co_await lapse(f, id);
  auto r1 = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(r1.requeued == 1);
  auto info = co_await job_of(q, id);
  CHECK(info.state == thoonk::job_state::waiting);  // back at once, no backoff
  CHECK(info.stall_count == 1);
  CHECK(info.retry_count == 0);
  CHECK(info.failures == 1);
  CHECK(info.last_error.find("lease lapsed") != std::string::npos);
  // The worker whose lease lapsed can no longer finish or fail it.
  auto [fec] = co_await q.async_finish(j, nothrow);
  CHECK(fec == E::job_not_claimed);
  auto [fec2, fr] = co_await q.async_fail(j, "late", nothrow);
  CHECK(fec2 == E::job_not_claimed);

  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  co_await lapse(f, id);
  auto r2 = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(r2.stalled == 1);
  info = co_await job_of(q, id);
  CHECK(info.state == thoonk::job_state::stalled);
  CHECK(info.stall_count == 2);
  CHECK(info.last_error.find("lease lapsed") != std::string::npos);
  auto rec = co_await dead.async_claim(1s, asio::use_awaitable);
  CHECK(rec.item.find("sleepy") != std::string::npos);
  auto [fec3] = co_await q.async_finish(j2, nothrow);
  CHECK(fec3 == E::job_not_claimed);
  co_await f.c.async_delete_feed(dead_name, asio::use_awaitable);
}

FIXTURE_TEST_CASE(
    "retry", "retry: a job's own strategy beats the queue's; cancel keeps its contract meaning",
    "[job][retry][fail][cancel][put][get_job]") {
  auto q = co_await engine_queue(f, fast_retries(10));
  thoonk::put_options o;
  o.retry = thoonk::retry_strategy{};
  o.retry->max_retries = 2;
  o.retry->min_backoff = 0ms;
  auto r = co_await q.async_put("own", o, asio::use_awaitable);
  auto info = co_await job_of(q, r.id);
  CHECK(info.retry.max_retries == 2);
  CHECK(info.retry.min_backoff == 0ms);
  CHECK(!info.retry.max_stalls);

  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  // cancel: back to the queue, failure count + 1, no retry counted.
  auto failures = co_await q.async_cancel(j, asio::use_awaitable);
  CHECK(failures == 1);
  info = co_await job_of(q, r.id);
  CHECK(info.retry_count == 0);
  CHECK(info.state == thoonk::job_state::waiting);

  j = co_await q.async_claim(1s, asio::use_awaitable);
  auto f1 = co_await q.async_fail(j, "1", asio::use_awaitable);
  CHECK(f1.outcome == outcome::retry_scheduled);
  j = co_await q.async_claim(2s, asio::use_awaitable);
  auto f2 = co_await q.async_fail(j, "2", asio::use_awaitable);
  CHECK(f2.outcome == outcome::dead_lettered);  // its own max_retries, 2
  auto r_id_job = co_await job_of(q, r.id);
  CHECK(r_id_job.failures == 3);
}

FIXTURE_TEST_CASE("retry",
                  "retry: errors: stale token, wrong state, bad strategy, sizes; nothing changes",
                  "[job][retry][fail][put]") {
  auto q = co_await engine_queue(f, fast_retries(5));
  auto id = co_await put_item(q, "x");
  thoonk::claim_ref waiting{id, 1};
  auto [e1, r1] = co_await q.async_fail(waiting, "no", nothrow);
  CHECK(e1 == E::job_not_claimed);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  thoonk::claim_ref stale{id, j.token + 1};
  auto [e2, r2] = co_await q.async_fail(stale, "no", nothrow);
  CHECK(e2 == E::lost_claim);
  const thoonk::claim_ref unknown{"nope", 1}, empty{"", 1};
  auto [e3, r3] = co_await q.async_fail(unknown, "no", nothrow);
  CHECK(e3 == E::job_not_found);
  auto [e4, r4] = co_await q.async_fail(empty, "no", nothrow);
  CHECK(e4 == E::invalid_id);
  const std::string huge(f.c.get_config().max_item_size + 1, 'e');
  auto [e5, r5] = co_await q.async_fail(j, huge, nothrow);
  CHECK(e5 == E::item_too_large);
  auto info = co_await job_of(q, id);
  CHECK(info.state == thoonk::job_state::claimed);
  CHECK(info.retry_count == 0);
  CHECK(info.failures == 0);
  co_await q.async_finish(j, asio::use_awaitable);
  auto [e6, r6] = co_await q.async_fail(j, "after finish", nothrow);
  CHECK(e6 == E::job_not_found);

  // Invalid strategies and ids are refused before any I/O.
  const auto before = co_await q.async_counts(asio::use_awaitable);
  for (int bad = 0; bad < 4; ++bad) {
    thoonk::put_options o;
    o.retry = thoonk::retry_strategy{};
    if (bad == 0) o.retry->max_retries = 0;
    if (bad == 1) o.retry->max_stalls = -1;
    if (bad == 2) o.retry->min_backoff = -5ms;
    if (bad == 3) {
      o.retry->min_backoff = 2s;
      o.retry->max_backoff = 1s;
    }
    auto [pe, pr] = co_await q.async_put("bad", o, nothrow);
    CHECK(pe == E::invalid_argument);
  }
  thoonk::put_options bad_id;
  bad_id.id = std::string("a\0b", 3);
  auto [pe2, pr2] = co_await q.async_put("x", bad_id, nothrow);
  CHECK(pe2 == E::invalid_id);
  const thoonk::put_options no_options;
  auto [pe3, pr3] = co_await q.async_put(huge, no_options, nothrow);
  CHECK(pe3 == E::item_too_large);
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.puts == before.puts);
}

FIXTURE_TEST_CASE("events", "events: a job's life as typed events, and none when events are off",
                  "[job][events][subscribe_events][put][claim][fail][finish]") {
  auto s = fast_retries(3);
  s.events = true;
  auto q = co_await engine_queue(f, s);
  std::vector<std::string> seen;
  auto sub = co_await q.async_subscribe_events(
      [&](const thoonk::job_event& e) {
        seen.push_back(std::string(thoonk::to_string(e.kind)) + " " + e.id + " " + e.detail);
      },
      asio::use_awaitable);
  auto id = co_await put_item(q, "x");
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  thoonk::fail_options o;
  o.retry_at = thoonk::now_epoch_ms() + 50;
  co_await q.async_fail(j, "oops", o, asio::use_awaitable);
  j = co_await q.async_claim(2s, asio::use_awaitable);
  co_await q.async_finish(j, asio::use_awaitable);
  thoonk::put_options later;
  later.id = "named";
  later.run_at = thoonk::now_epoch_ms() + 3600000;
  co_await q.async_put("n1", later, asio::use_awaitable);
  co_await q.async_put("n2", later, asio::use_awaitable);
  auto arrived = co_await wait_until([&] { return seen.size() >= 9; }, 5s);
  CHECK(arrived);
  const std::vector<std::string> want{
      "put " + id + " ",        "claimed " + id + " 1",
      "failed " + id + " oops", "retry_scheduled " + id + " " + std::to_string(*o.retry_at),
      "promoted " + id + " ",   "claimed " + id + " 2",
      "finished " + id + " ",   "put named " + std::to_string(*later.run_at),
      "updated named ",
  };
  CHECK(seen == want);

  // Events off: nothing is published.
  co_await f.c.async_set_config(f.name, "events", "0", asio::use_awaitable);
  seen.clear();
  co_await q.async_put("quiet", asio::use_awaitable);
  auto jq = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_finish(jq, asio::use_awaitable);
  co_await settle();
  CHECK(seen.empty());
}

FIXTURE_TEST_CASE("retry",
                  "retry: an id put again after a contract client's Finish starts with no "
                  "record; a negative token never matches",
                  "[job][retry][fail][cancel][put][get_job][interop]") {
  auto q = co_await engine_queue(f, fast_retries(10));
  thoonk::put_options o;
  o.id = "reused";
  o.retry = thoonk::retry_strategy{};
  o.retry->max_retries = 9;
  o.retry->min_backoff = 0ms;
  co_await q.async_put("first", o, asio::use_awaitable);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  auto failed = co_await q.async_fail(j, "boom", asio::use_awaitable);
  CHECK(failed.outcome == outcome::retry_scheduled);
  j = co_await q.async_claim(2s, asio::use_awaitable);
  REQUIRE(j.id == "reused");
  auto info = co_await job_of(q, "reused");
  CHECK(info.retry_count == 1);
  CHECK(info.last_error == "boom");

  // The library's cancel ends the claim (its attempts value turns
  // negative); a contract client's Get claims the job with plain commands.
  co_await q.async_cancel(j, asio::use_awaitable);
  auto popped = co_await cmd(f.c.conn(), "RPOP", key("ids", f.name));
  REQUIRE(popped.str == "reused");
  co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
    r.push("ZADD", key("claimed", f.name), std::to_string(ms_now()), "reused");
    r.push("HGET", key("items", f.name), "reused");
  });
  // No token the library gives out is negative: the negated old one is refused.
  const thoonk::claim_ref negated{"reused", -j.token};
  auto [fec] = co_await q.async_finish(negated, nothrow);
  CHECK(fec == E::lost_claim);
  auto [hec] = co_await q.async_heartbeat(negated, nothrow);
  CHECK(hec == E::lost_claim);

  // The contract client's Finish: it cannot know the job's record.
  co_await plain_transaction(f.c.conn(), [&](thoonk::request& r) {
    r.push("ZREM", key("claimed", f.name), "reused");
    r.push("HDEL", key("cancelled", f.name), "reused");
    r.push("INCR", key("finishes", f.name));
    r.push("HDEL", key("items", f.name), "reused");
  });
  auto gone = co_await q.async_get_job("reused", asio::use_awaitable);
  CHECK(!gone);

  // The same id put again is a new job: no strategy, no counts, no error.
  thoonk::put_options again;
  again.id = "reused";
  auto r = co_await q.async_put("second", again, asio::use_awaitable);
  CHECK(r.outcome == thoonk::put_result::outcome_t::added);
  info = co_await job_of(q, "reused");
  CHECK(info.item == "second");
  CHECK(info.retry == thoonk::retry_strategy{});
  CHECK(info.retry_count == 0);
  CHECK(info.stall_count == 0);
  CHECK(info.last_error.empty());
  CHECK(info.failures == 0);
}

FIXTURE_TEST_CASE("retry-limit",
                  "retry: a fail's retry_at beyond 2^53 - 1 ms is refused before any I/O, the "
                  "claim kept; retry_at 2^53 - 1 reads back exactly",
                  "[job][retry][fail][get_job][errors]") {
  auto q = co_await engine_queue(f, fast_retries(5));
  auto id = co_await put_item(q, "x");
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  REQUIRE(j.id == id);
  const auto keys_before = co_await snapshot(f.c.conn(), f.name);
  constexpr thoonk::epoch_ms limit = 9007199254740991;  // 2^53 - 1
  for (const thoonk::epoch_ms at : {std::numeric_limits<thoonk::epoch_ms>::max(), limit + 1,
                                    -limit - 1, std::numeric_limits<thoonk::epoch_ms>::min()}) {
    INFO("retry_at " << at);
    thoonk::fail_options o;
    o.retry_at = at;
    const auto before = f.c.conn().stats().requests;
    auto [ec, r] = co_await q.async_fail(j, "far", o, nothrow);
    CHECK(ec == E::invalid_argument);
    CHECK(ec.message().find("9007199254740991") != std::string::npos);
    CHECK(f.c.conn().stats().requests == before);  // nothing sent
  }
  // Nothing was written: the job is still claimed under the same token.
  const auto keys_after = co_await snapshot(f.c.conn(), f.name);
  CHECK(keys_after == keys_before);
  auto info = co_await job_of(q, id);
  CHECK(info.state == thoonk::job_state::claimed);
  CHECK(info.retry_count == 0);
  CHECK(info.failures == 0);
  auto [hb] = co_await q.async_heartbeat(j, nothrow);
  CHECK(!hb);

  // 2^53 - 1 is a time the scripts hold exactly.
  thoonk::fail_options at_limit;
  at_limit.retry_at = limit;
  auto r = co_await q.async_fail(j, "much later", at_limit, asio::use_awaitable);
  CHECK(r.outcome == outcome::retry_scheduled);
  CHECK(r.run_at == limit);
  CHECK(r.retry_count == 1);
  auto later = co_await job_of(q, id);
  CHECK(later.state == thoonk::job_state::scheduled);
  CHECK(later.run_at == limit);
}
