// The handle API of queues and job queues as a new user meets it: open and
// create_or_open with typed settings, typed finish events, reads by id,
// operations on the claimed job itself, move-only completion handlers, and
// the server's text through capture_diagnostics.
#include "support/helpers.hpp"

#include <thoonk/diagnostics.hpp>

#include <memory>
#include <optional>

using namespace thoonk::test;
using thoonk::test::run_coro;
using E = thoonk::error;
using jq = thoonk::job_queue;

// An operation with an effect is awaited before CHECK, never inside it: g++
// 12 also evaluates a co_await in the macro's never-taken `(false) && expr`
// branch, so the operation would run twice.

namespace {

// Claims one job that must be there.
asio::awaitable<thoonk::claimed_job> claim_one(jq& q) {
  co_return co_await q.async_claim(1s, asio::use_awaitable);
}

// The config hash of a feed, as field=value lines, sorted.
asio::awaitable<std::string> config_of(thoonk::connection& c, const std::string& name) {
  auto v = co_await cmd(c, "HGETALL", key("config", name));
  std::vector<std::string> parts;
  for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2)
    parts.push_back(v.elements[i].str + "=" + v.elements[i + 1].str);
  std::sort(parts.begin(), parts.end());
  std::string out;
  for (auto& p : parts) out += p + "\n";
  co_return out;
}

// Connects f's client and creates (or opens) f.name as a job queue.
asio::awaitable<jq> connected_job_queue(fixture& f) {
  co_await f.c.async_connect(asio::use_awaitable);
  co_return co_await jq::async_create_or_open(f.c, f.name, asio::use_awaitable);
}

// A completion handler that is move-only: it owns a unique_ptr, and counts
// its calls through it.
template <class... Args>
auto move_only(int& calls) {
  return [p = std::make_unique<int*>(&calls)](Args...) { ++**p; };
}

}  // namespace

FIXTURE_TEST_CASE(
    "jobapi", "job_queue::create_or_open: creates with settings, opens an existing one as it is",
    "[job][job_api][create_or_open][read_settings][open]") {
  co_await f.c.async_connect(asio::use_awaitable);
  jq::settings s;
  s.claim_timeout = 1500ms;
  s.retry.max_stalls = 2;
  s.retry.min_backoff = 10ms;
  const auto dead = dead_letter_name(f.name, "dead");  // in f.name's slot on a cluster
  s.dead_letter_queue = dead;
  s.events = true;
  s.result_ttl = 60s;
  s.published = true;
  auto q = co_await jq::async_create_or_open(f.c, f.name, s, asio::use_awaitable);
  CHECK(q.name() == f.name);
  auto config = co_await config_of(f.c.conn(), f.name);
  CHECK(config == "claim_timeout_ms=1500\ndead_letter_queue=" + dead +
                      "\nevents=1\nmax_stalls=2\nmin_backoff_ms=10\n"
                      "published=1\nresult_ttl_ms=60000\ntype=job\n");

  // Round trip: the same values come back typed.
  auto back = co_await q.async_read_settings(asio::use_awaitable);
  CHECK(back.claim_timeout == 1500ms);
  CHECK(back.retry.max_stalls == 2);
  CHECK(back.retry.min_backoff == 10ms);
  CHECK(!back.retry.max_retries);
  CHECK(back.dead_letter_queue == dead);
  CHECK(back.events == true);
  CHECK(back.result_ttl == 60s);
  CHECK(back.published == true);

  // Opening it again with other settings leaves its config alone.
  jq::settings other;
  other.retry.max_stalls = 9;
  auto again = co_await jq::async_create_or_open(f.c, f.name, other, asio::use_awaitable);
  auto settings = co_await again.async_read_settings(asio::use_awaitable);
  CHECK(settings.retry.max_stalls == 2);

  // Without settings: the defaults, i.e. no fields written.
  const auto plain = unique_name("jobapi-plain");
  auto p = co_await jq::async_create_or_open(f.c, plain, asio::use_awaitable);
  config = co_await config_of(f.c.conn(), plain);
  CHECK(config == "type=job\n");
  auto ps = co_await p.async_read_settings(asio::use_awaitable);
  CHECK(!ps.claim_timeout);
  CHECK(ps.retry == thoonk::retry_strategy{});
  CHECK(!ps.dead_letter_queue);
  CHECK(!ps.result_ttl);
  CHECK(!ps.published);

  // open() finds both; a handle from open works.
  auto o = co_await jq::async_open(f.c, plain, asio::use_awaitable);
  auto id = co_await put_item(o, "x");
  auto claimed = co_await o.async_claim(1s, asio::use_awaitable);
  CHECK(claimed.id == id);
}

FIXTURE_TEST_CASE("jobapi", "create_or_open / open: the wrong type and bad settings are refused",
                  "[job][queue][job_api][create_or_open][open]") {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "queue");
  const auto before = co_await config_of(f.c.conn(), f.name);
  auto [ec1, q1] = co_await jq::async_create_or_open(f.c, f.name, nothrow);
  CHECK(ec1 == E::wrong_feed_type);
  auto [ec2, q2] = co_await jq::async_open(f.c, f.name, nothrow);
  CHECK(ec2 == E::wrong_feed_type);
  auto config = co_await config_of(f.c.conn(), f.name);
  CHECK(config == before);
  // The queue itself opens both ways.
  auto [ec3, q3] = co_await thoonk::queue::async_open(f.c, f.name, nothrow);
  CHECK(!ec3);
  auto [ec4, q4] = co_await thoonk::queue::async_create_or_open(f.c, f.name, nothrow);
  CHECK(!ec4);
  auto [ec5, qs] = co_await q4.async_read_settings(nothrow);
  CHECK(!ec5);

  // Missing: open fails, nothing is created.
  const auto missing = unique_name("jobapi-missing");
  auto [ec6, q6] = co_await jq::async_open(f.c, missing, nothrow);
  CHECK(ec6 == E::feed_not_found);
  auto [ec7, q7] = co_await thoonk::queue::async_open(f.c, missing, nothrow);
  CHECK(ec7 == E::feed_not_found);

  // Out of range settings: refused before any I/O, nothing created.
  for (int bad = 0; bad < 6; ++bad) {
    jq::settings s;
    if (bad == 0) s.claim_timeout = 0ms;
    if (bad == 1) s.retry.max_stalls = 0;
    if (bad == 3) s.retry.max_retries = 0;
    if (bad == 4) s.retry.min_backoff = -1ms;
    if (bad == 5) {
      s.retry.min_backoff = 5s;
      s.retry.max_backoff = 1s;
    }
    if (bad == 2) s.result_ttl = -5ms;
    CHECK(!s.problem().empty());
    auto [ec, q] = co_await jq::async_create_or_open(f.c, missing, s, nothrow);
    CHECK(ec == E::invalid_argument);
  }
  auto exists = co_await cmd(f.c.conn(), "EXISTS", key("config", missing));
  CHECK(exists.integer == 0);
  auto [ec8, q8] = co_await jq::async_create_or_open(f.c, std::string("a\0b", 3), nothrow);
  CHECK(ec8 == E::invalid_name);
}

TEST_CASE("job_queue::settings: fields in the contract's string form",
          "[job][job_api][read_settings]") {
  jq::settings s;
  CHECK(s.to_fields().empty());
  CHECK(s.problem().empty());
  s.claim_timeout = 2s;
  s.published = false;
  CHECK(s.to_fields() == thoonk::feed_config{{"claim_timeout_ms", "2000"}, {"published", "0"}});
  auto p = jq::settings::from_fields(
      {{"claim_timeout_ms", "250"}, {"max_stalls", "x"}, {"published", "1"}, {"other", "1"}});
  CHECK(p.claim_timeout == 250ms);
  CHECK(!p.retry.max_stalls);  // not a number: the scripts use the default too
  CHECK(p.published == true);
  CHECK(!p.result_ttl);
}

FIXTURE_TEST_CASE("jobapi",
                  "job_queue::subscribe_finished: one typed event per finish with a result",
                  "[job][job_api][subscribe_finished][finish]") {
  auto q = co_await connected_job_queue(f);
  std::vector<thoonk::job_finished> seen;
  auto sub = co_await q.async_subscribe_finished(
      [&](const thoonk::job_finished& e) { seen.push_back(e); }, asio::use_awaitable);

  const std::string nul_result("a\0b\0", 4);
  std::vector<std::string> items{"one", "two", "three"};
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto j1 = co_await claim_one(q);
  auto j2 = co_await claim_one(q);
  auto j3 = co_await claim_one(q);
  co_await q.async_finish(j1, "r1", asio::use_awaitable);
  co_await q.async_finish(j2, asio::use_awaitable);  // no result: no event
  co_await q.async_finish(j3, nul_result, asio::use_awaitable);
  // Another client's payload without a NUL is ignored and counted.
  co_await raw_notify(f.c.conn(), job_finish_channel(f.name), "no-separator");
  auto arrived = co_await wait_until([&] { return seen.size() >= 2; });
  CHECK(arrived);
  co_await settle();

  REQUIRE(seen.size() == 2);
  CHECK(seen[0].id == j1.id);
  CHECK(seen[0].result == "r1");
  CHECK(seen[1].id == j3.id);
  CHECK(seen[1].result == nul_result);
  CHECK(q.malformed_finish_events() == 1);

  // Dropping the subscription ends the events.
  sub.reset();
  co_await q.async_put("four", asio::use_awaitable);
  auto j4 = co_await claim_one(q);
  co_await q.async_finish(j4, "r4", asio::use_awaitable);
  co_await settle();
  CHECK(seen.size() == 2);
}

namespace {

// Puts a job with an id long enough that std::string keeps it on the heap
// (a double free of a short id would go unseen) and claims it.
asio::awaitable<thoonk::claimed_job> claimed_long_id(jq& q, std::string id) {
  thoonk::put_options o;
  o.id = std::move(id);
  co_await q.async_put(std::string("x"), o, asio::use_awaitable);
  auto j = co_await claim_one(q);
  REQUIRE(j.id == *o.id);
  co_return j;
}

}  // namespace

// g++ 12 destroys an aggregate temporary with a std::string member twice
// when it is built inside a co_await expression; claim_ref has
// constructors so that the form docs/jobs.md shows is safe. AddressSanitizer
// (the test build) reports the double free, and without it the heap is
// corrupted ("munmap_chunk(): invalid pointer").
FIXTURE_TEST_CASE("jobapi",
                  "claim_ref(id, token) and claim_ref{id, token} built inside the co_await of "
                  "heartbeat, finish, cancel, fail and finish_and_claim",
                  "[job][job_api][finish][heartbeat][cancel][fail][finish_and_claim]") {
  auto q = co_await connected_job_queue(f);
  const std::string tail(48, 'x');

  auto a = co_await claimed_long_id(q, "inline-a-" + tail);
  const std::string a_id = a.id;
  const auto a_token = a.token;
  co_await q.async_heartbeat(thoonk::claim_ref(a_id, a_token), asio::use_awaitable);
  co_await q.async_finish(thoonk::claim_ref(a_id, a_token), asio::use_awaitable);
  auto a_gone = co_await q.async_get_job(a_id, asio::use_awaitable);
  CHECK(!a_gone);

  auto b = co_await claimed_long_id(q, "inline-b-" + tail);
  const std::string b_id = b.id;
  co_await q.async_finish(thoonk::claim_ref{b_id, b.token}, "done", asio::use_awaitable);
  auto b_result = co_await q.async_get_result(b_id, 1s, asio::use_awaitable);
  CHECK(b_result == "done");

  auto c = co_await claimed_long_id(q, "inline-c-" + tail);
  const std::string c_id = c.id;
  auto failures = co_await q.async_cancel(thoonk::claim_ref(c_id, c.token), asio::use_awaitable);
  CHECK(failures == 1);
  auto c2 = co_await claim_one(q);
  REQUIRE(c2.id == c_id);
  auto failed = co_await q.async_fail(thoonk::claim_ref(c_id, c2.token), std::string("no"),
                                      asio::use_awaitable);
  CHECK(failed.retry_count == 1);

  auto d = co_await claimed_long_id(q, "inline-d-" + tail);
  const std::string d_id = d.id;
  auto [ec, next] = co_await q.async_finish_and_claim(thoonk::claim_ref(d_id, d.token), nothrow);
  CHECK(ec == E::queue_empty);  // d is finished; nothing else waits
  auto d_gone = co_await q.async_get_job(d_id, asio::use_awaitable);
  CHECK(!d_gone);
}

FIXTURE_TEST_CASE("jobapi", "job_queue::get_job / get_jobs: item, state and failures in one read",
                  "[job][job_api][get_job][get_jobs][cancel][stall][heartbeat][finish]") {
  auto q = co_await connected_job_queue(f);
  std::vector<std::string> items{"a", "b", "c", "d"};
  auto ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);

  auto w = co_await q.async_get_job(ids[0], asio::use_awaitable);
  REQUIRE(w);
  CHECK(w->id == ids[0]);
  CHECK(w->item == "a");
  CHECK(w->state == thoonk::job_state::waiting);
  CHECK(w->failures == 0);

  // a: claimed, given back (failure 1), claimed again and held.
  auto a = co_await claim_one(q);
  auto fails = co_await q.async_cancel(a, asio::use_awaitable);
  CHECK(fails == 1);
  auto b = co_await claim_one(q);  // b
  auto c = co_await claim_one(q);  // c
  auto d = co_await claim_one(q);  // d
  auto a2 = co_await claim_one(q);
  REQUIRE(a2.id == ids[0]);
  co_await q.async_heartbeat(a2, asio::use_awaitable);
  co_await q.async_stall(b, asio::use_awaitable);
  co_await q.async_finish(c, asio::use_awaitable);
  co_await q.async_cancel(d, asio::use_awaitable);  // waiting again, failure 1

  auto ja = co_await q.async_get_job(ids[0], asio::use_awaitable);
  REQUIRE(ja);
  CHECK(ja->state == thoonk::job_state::claimed);
  CHECK(ja->failures == 1);
  auto jb = co_await q.async_get_job(ids[1], asio::use_awaitable);
  REQUIRE(jb);
  CHECK(jb->state == thoonk::job_state::stalled);
  CHECK(jb->item == "b");
  auto job = co_await q.async_get_job(ids[2], asio::use_awaitable);
  CHECK(!job);  // finished
  auto jd = co_await q.async_get_job(ids[3], asio::use_awaitable);
  REQUIRE(jd);
  CHECK(jd->state == thoonk::job_state::waiting);
  CHECK(jd->failures == 1);
  job = co_await q.async_get_job("no-such-id", asio::use_awaitable);
  CHECK(!job);
  auto [eid, none] = co_await q.async_get_job("", nothrow);
  CHECK(eid == E::invalid_id);

  auto all = co_await q.async_get_jobs(asio::use_awaitable);
  std::sort(all.begin(), all.end(), [](const auto& x, const auto& y) { return x.id < y.id; });
  REQUIRE(all.size() == 3);
  std::vector<std::string> summary;
  for (const auto& j : all)
    summary.push_back(j.item + ":" + std::to_string(static_cast<int>(j.state)) + ":" +
                      std::to_string(j.failures));
  std::sort(summary.begin(), summary.end());
  CHECK(summary == std::vector<std::string>{"a:1:1", "b:2:0", "d:0:1"});

  // On another kind of feed: wrong_feed_type.
  const auto other = co_await make_feed(f.c, "jobapi-feed", thoonk::feed_type::feed);
  jq wrong(f.c, other);
  auto [ew, jw] = co_await wrong.async_get_job(ids[0], nothrow);
  CHECK(ew == E::wrong_feed_type);
  auto [ews, jws] = co_await wrong.async_get_jobs(nothrow);
  CHECK(ews == E::wrong_feed_type);
}

FIXTURE_TEST_CASE("qapi", "queue::get_item: the item of a waiting id",
                  "[queue][job_api][get_item]") {
  co_await f.c.async_connect(asio::use_awaitable);
  auto q = co_await thoonk::queue::async_create_or_open(f.c, f.name, asio::use_awaitable);
  auto id = co_await put_item(q, std::string("it\0em", 5));
  auto item = co_await q.async_get_item(id, asio::use_awaitable);
  CHECK(item == std::string("it\0em", 5));
  co_await q.async_get(1s, asio::use_awaitable);
  item = co_await q.async_get_item(id, asio::use_awaitable);
  CHECK(!item);
  auto [ec, none] = co_await q.async_get_item("", nothrow);
  CHECK(ec == E::invalid_id);
  thoonk::queue wrong(f.c, co_await make_feed(f.c, "qapi-job", thoonk::feed_type::job));
  auto [ew, nw] = co_await wrong.async_get_item(id, nothrow);
  CHECK(ew == E::wrong_feed_type);
}

TEST_CASE("queue and job_queue operations take move-only completion handlers",
          "[job][queue][job_api][open][create_or_open][read_settings][put][put_many][get]"
          "[get_item][get_ids][length][claim][finish][cancel][stall][heartbeat][heartbeat_many]"
          "[retry][retract][failures][get_job][get_jobs][counts][subscribe_finished][get_result]"
          "[maintain][run_maintenance]") {
  fixture f("jobapi");
  int calls = 0;
  int expected = 0;
  using ec_t = boost::system::error_code;
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto q = co_await connected_job_queue(f);
    auto qq =
        co_await thoonk::queue::async_create_or_open(f.c, unique_name("qapi"), asio::use_awaitable);
    auto id = co_await put_item(q, "x");
    auto qid = co_await put_item(qq, "y");
    auto j = co_await claim_one(q);

    // Queue.
    thoonk::queue::async_open(f.c, qq.name(), move_only<ec_t, thoonk::queue>(calls));
    thoonk::queue::async_create_or_open(f.c, qq.name(), move_only<ec_t, thoonk::queue>(calls));
    qq.async_read_settings(move_only<ec_t, thoonk::queue::settings>(calls));
    qq.async_put("z", move_only<ec_t, thoonk::put_result>(calls));
    qq.async_put_many({"1", "2"}, thoonk::priority::high,
                      move_only<ec_t, std::vector<std::string>>(calls));
    qq.async_get_item(qid, move_only<ec_t, std::optional<std::string>>(calls));
    qq.async_get_ids(move_only<ec_t, std::vector<std::string>>(calls));
    qq.async_length(move_only<ec_t, std::size_t>(calls));
    qq.async_get(1s, move_only<ec_t, thoonk::queue_item>(calls));
    expected += 9;
    // Job queue.
    jq::async_open(f.c, q.name(), move_only<ec_t, jq>(calls));
    jq::async_create_or_open(f.c, q.name(), jq::settings{}, move_only<ec_t, jq>(calls));
    q.async_read_settings(move_only<ec_t, jq::settings>(calls));
    q.async_put("p", move_only<ec_t, thoonk::put_result>(calls));
    q.async_put_many({"m"}, thoonk::priority::normal,
                     move_only<ec_t, std::vector<std::string>>(calls));
    q.async_heartbeat(j, move_only<ec_t>(calls));
    q.async_heartbeat_many({j}, move_only<ec_t, std::vector<ec_t>>(calls));
    q.async_failures(id, move_only<ec_t, std::int64_t>(calls));
    q.async_get_job(id, move_only<ec_t, std::optional<thoonk::job_info>>(calls));
    q.async_get_jobs(move_only<ec_t, std::vector<thoonk::job_info>>(calls));
    q.async_get_ids(move_only<ec_t, std::vector<std::string>>(calls));
    q.async_counts(move_only<ec_t, thoonk::job_counts>(calls));
    q.async_subscribe_finished([](const thoonk::job_finished&) {},
                               move_only<ec_t, thoonk::subscription>(calls));
    q.async_retry(id, move_only<ec_t>(calls));  // job_not_stalled
    q.async_get_result(id, 0ms, move_only<ec_t, std::string>(calls));
    thoonk::maintenance_options mo;
    mo.publish_stats = false;
    q.async_maintain(mo, move_only<ec_t, thoonk::maintenance_report>(calls));
    expected += 16;
    auto arrived = co_await wait_until([&] { return calls == expected; });
    CHECK(arrived);
    // The claimed job's own operations, one after the other.
    q.async_stall(j, move_only<ec_t>(calls));
    ++expected;
    arrived = co_await wait_until([&] { return calls == expected; });
    CHECK(arrived);
    q.async_retry(j.id, move_only<ec_t>(calls));
    ++expected;
    arrived = co_await wait_until([&] { return calls == expected; });
    CHECK(arrived);
    auto k = co_await claim_one(q);
    q.async_cancel(k, move_only<ec_t, std::int64_t>(calls));
    ++expected;
    arrived = co_await wait_until([&] { return calls == expected; });
    CHECK(arrived);
    auto l = co_await claim_one(q);
    q.async_finish(l, "r", move_only<ec_t>(calls));
    q.async_claim(1s, move_only<ec_t, thoonk::claimed_job>(calls));
    q.async_retract(id, move_only<ec_t>(calls));
    expected += 3;
    arrived = co_await wait_until([&] { return calls == expected; });
    CHECK(arrived);
    q.async_finish(j, move_only<ec_t>(calls));  // lost claim: still completes
    ++expected;
    arrived = co_await wait_until([&] { return calls == expected; });
    CHECK(arrived);
    asio::cancellation_signal stop;
    q.async_run_maintenance(1h, mo,
                            asio::bind_cancellation_slot(stop.slot(), move_only<ec_t>(calls)));
    co_await sleep_for(50ms);
    stop.emit(asio::cancellation_type::terminal);
    ++expected;
    arrived = co_await wait_until([&] { return calls == expected; });
    CHECK(arrived);
  });
  CHECK(calls == expected);
}

TEST_CASE("job_queue: the server's text reaches capture_diagnostics",
          "[job][job_api][acl][put]"
          "[claim][finish][cancel][get_job]") {
  fixture f("jobapi");
  const auto user = unique_name("jobapi-user");
  const auto pass = "pw-" + unique_name("x");
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    co_await f.c.async_connect(asio::use_awaitable);
    auto admin_q = co_await jq::async_create_or_open(f.c, f.name, asio::use_awaitable);
    co_await admin_q.async_put("held", asio::use_awaitable);
    auto held = co_await claim_one(admin_q);
    co_await cmd(f.c.conn(), "ACL", "SETUSER", user, "on", ">" + pass, "~*", "&*", "+@all",
                 "-evalsha", "-fcall");
    auto cfg = named_config("thoonk-jobapi-acl");
    cfg.username = user;
    cfg.password = pass;
    thoonk::client uc(f.ioc.get_executor(), cfg);
    co_await uc.async_connect(asio::use_awaitable);
    jq uq(uc, f.name);

    // Each path: a coroutine op, the put batcher, the claim dispatcher, the
    // finish batcher.
    thoonk::diagnostics d1, d2, d3, d4;
    auto [e1, j] = co_await uq.async_get_job(held.id, thoonk::capture_diagnostics(d1, nothrow));
    auto [e2, id] = co_await uq.async_put("x", thoonk::capture_diagnostics(d2, nothrow));
    auto [e3, c] = co_await uq.async_claim(0ms, thoonk::capture_diagnostics(d3, nothrow));
    auto [e4] = co_await uq.async_finish(held, "r", thoonk::capture_diagnostics(d4, nothrow));
    for (auto* e : {&e1, &e2, &e3, &e4}) CHECK(*e == E::no_script_permission);
    for (auto* d : {&d1, &d2, &d3, &d4}) {
      INFO(d->server_message());
      CHECK(d->server_message().find("evalsha") != std::string::npos);
    }
    // A success clears what an earlier failure left.
    auto [e5, n] = co_await admin_q.async_cancel(held, thoonk::capture_diagnostics(d4, nothrow));
    CHECK(!e5);
    CHECK(d4.server_message().empty());
    uc.stop();
    co_await cmd(f.c.conn(), "ACL", "DELUSER", user);
  });
}
