// Aborting a claimed job from any client, and progress reports of the claim
// holder (docs/jobs.md §12): the holder's token ends, the job ends cancelled
// or failed as asked, held puts are applied, `job.abort:[name]` carries the
// id, typed events; every error path changes nothing.
// co_await stays out of CHECK and REQUIRE: Catch2 also passes the
// expression to __builtin_constant_p, and g++ 12 then awaits it twice.
#include "support/job_engine.hpp"

#include <boost/json.hpp>

#include <optional>

using namespace thoonk::test;
using E = thoonk::error;
using thoonk::abort_options;

namespace {

// A client config allowing items of at most 64 bytes: an error or a
// progress text of 65 is item_too_large.
thoonk::config small_items() {
  auto cfg = named_config();
  cfg.max_item_size = 64;
  return cfg;
}

// The default outcome (as cancel()). A function, not `abort_options{}`:
// g++ 12 rejects braced lists inside co_await expressions.
abort_options cancelled() { return abort_options{}; }

abort_options failed_with(std::string error, bool permanent = false) {
  abort_options o;
  o.outcome = abort_options::failed;
  o.error = std::move(error);
  o.permanent = permanent;
  return o;
}

// The raw keys a job of `name` lives in (for "nothing changed" checks).
asio::awaitable<std::string> engine_snapshot(thoonk::connection& c, std::string name) {
  auto out = co_await snapshot(c, name);
  for (const char* k : {"scheduled", "scheduled_items", "jobmeta", "held"}) {
    auto t = co_await cmd(c, "TYPE", key(k, name));
    out += std::string(k) + ":" + t.str;
    if (t.str == "hash") {
      auto v = co_await hash_of(c, key(k, name));
      for (auto& [field, value] : v) out += " " + field + "=" + value;
    } else if (t.str == "zset") {
      auto v = co_await cmd(c, "ZRANGE", key(k, name), 0, -1, "WITHSCORES");
      out += thoonk::resp3::debug_string(v);
    }
    out += "\n";
  }
  co_return out;
}

}  // namespace

TWO_CLIENT_TEST_CASE(
    "abort", "abort: from another client, cancelled: the holder's token ends, the job goes back",
    "[job][control][abort][subscribe_aborts][claim][finish][heartbeat][fail][cancel]["
    "progress]") {
  auto worker = co_await engine_queue(f);
  auto boss = co_await open_on(other, f.name);

  auto seen = std::make_shared<std::vector<std::string>>();
  auto sub = co_await worker.async_subscribe_aborts(
      [&](const std::string& id) { seen->push_back(id); }, asio::use_awaitable);
  auto cap = co_await capture_patterns(f.raw, "job.abort:" + key_name(f.name));

  auto [id, job] = co_await put_and_claim(worker, "long work");
  co_await worker.async_progress(job, "half way", asio::use_awaitable);
  co_await boss.async_abort(id, cancelled(), asio::use_awaitable);

  // The holder learns it from the channel, and from every call it makes.
  auto got1 = co_await wait_until([&] { return seen->size() == 1; });
  CHECK(got1);
  CHECK(*seen == std::vector<std::string>{id});
  auto got2 = co_await wait_until([&] { return cap->msgs.size() == 1; });
  CHECK(got2);
  const auto abort_channel = "job.abort:" + key_name(f.name);
  CHECK(cap->on(abort_channel) == std::vector<msg>{{abort_channel, id}});
  auto [fec] = co_await worker.async_finish(job, nothrow);
  CHECK(fec == E::lost_claim);
  auto [hec] = co_await worker.async_heartbeat(job, nothrow);
  CHECK(hec == E::lost_claim);
  auto [pec] = co_await worker.async_progress(job, "still going", nothrow);
  CHECK(pec == E::lost_claim);
  auto [aec, ar] = co_await worker.async_fail(job, "late", nothrow);
  CHECK(aec == E::lost_claim);
  auto [cec, cf] = co_await worker.async_cancel(job, nothrow);
  CHECK(cec == E::lost_claim);

  // As cancel(): waiting at the end of the line, failure + 1, no retry
  // counted; the progress reported before stays readable.
  auto info = co_await job_of(worker, id);
  CHECK(info.state == thoonk::job_state::waiting);
  CHECK(info.failures == 1);
  CHECK(info.retry_count == 0);
  CHECK(info.progress == "half way");
  auto again = co_await worker.async_claim(1s, asio::use_awaitable);
  CHECK(again.id == id);
  CHECK(again.token > job.token);
  CHECK(again.failures == 1);
  co_await worker.async_finish(again, asio::use_awaitable);
  // A second abort of the finished job: job_not_found.
  auto [nec] = co_await boss.async_abort(id, cancelled(), nothrow);
  CHECK(nec == E::job_not_found);
  co_await fence(f.c.sub(), f.c.conn(), f.name);
  CHECK(seen->size() == 1);
  f.raw.stop();
}

FIXTURE_TEST_CASE_WITH_CONFIG(
    dead_letter_config(), "abort",
    "abort: failed retries after the backoff; permanent makes a dead letter and its record",
    "[job][control][abort][fail][dead_letter][claim][get_job]") {
  co_await f.c.async_connect(asio::use_awaitable);
  const auto dead_name = dead_letter_name(f.name, unique_name("abort-dead"));
  auto dead = co_await thoonk::job_queue::async_create_or_open(f.c, dead_name, asio::use_awaitable);
  thoonk::job_queue::settings s;
  s.retry.max_retries = 5;
  s.retry.min_backoff = 60000ms;
  s.retry.max_backoff = 120000ms;
  s.dead_letter_queue = dead_name;
  auto q = co_await engine_queue(f, s);

  auto [id, job] = co_await put_and_claim(q, "render");
  const auto before = thoonk::now_epoch_ms();
  co_await q.async_abort(id, failed_with("operator said stop"), asio::use_awaitable);
  auto info = co_await job_of(q, id);
  CHECK(info.state == thoonk::job_state::scheduled);
  CHECK(info.retry_count == 1);
  CHECK(info.failures == 1);
  CHECK(info.last_error == "operator said stop");
  // The first backoff: min_backoff (60 s) at least, within max.
  CHECK(info.run_at >= before + 60000);
  CHECK(info.run_at <= thoonk::now_epoch_ms() + 120000);
  auto [fec, fr] = co_await q.async_fail(job, "late", nothrow);
  CHECK(fec == E::lost_claim);

  // Permanent: a dead letter at once, with its JSON record.
  const std::string data = "caf\xc3\xa9 \"quoted\"";
  auto [id2, job2] = co_await put_and_claim(q, data);
  co_await q.async_abort(id2, failed_with("bad input \xff", true), asio::use_awaitable);
  auto dl = co_await job_of(q, id2);
  CHECK(dl.state == thoonk::job_state::stalled);
  CHECK(dl.last_error == "bad input \xff");
  CHECK(dl.retry_count == 1);
  // Both old holders get lost_claim, the job scheduled or a dead letter.
  auto [f2] = co_await q.async_finish(job2, nothrow);
  CHECK(f2 == E::lost_claim);
  std::vector<thoonk::claim_ref> both{job, job2};
  auto st = co_await q.async_heartbeat_many(both, asio::use_awaitable);
  CHECK(st == std::vector<boost::system::error_code>{E::lost_claim, E::lost_claim});
  auto rec = co_await dead.async_claim(1s, asio::use_awaitable);
  boost::system::error_code jec;
  auto jv = boost::json::parse(rec.item, jec);
  INFO(rec.item);
  REQUIRE(!jec);
  REQUIRE(jv.is_array());
  const auto& a = jv.as_array();
  REQUIRE(a.size() == 3);
  CHECK(a[0].as_string() == id2);
  CHECK(a[1].as_string() == data);
  // Not UTF-8: base64 of the bytes ("bad input \xff").
  REQUIRE(a[2].is_object());
  CHECK(a[2].as_object().at("base64").as_string() == "YmFkIGlucHV0IP8=");
  co_await dead.async_finish(rec, asio::use_awaitable);

  // Out of retries: the failure that reaches max_retries is final.
  co_await f.c.async_set_config(f.name, "max_retries", "1", asio::use_awaitable);
  auto [id3, job3] = co_await put_and_claim(q, "third");
  co_await q.async_abort(id3, failed_with("no more"), asio::use_awaitable);
  auto got3 = co_await job_of(q, id3);
  CHECK(got3.state == thoonk::job_state::stalled);
  auto rec3 = co_await dead.async_claim(1s, asio::use_awaitable);
  CHECK(rec3.item == "[\"" + id3 + "\",\"third\",\"no more\"]");
  co_await f.c.async_delete_feed(dead_name, asio::use_awaitable);
}

FIXTURE_TEST_CASE("abort", "abort: a put held for the job is applied after the abort",
                  "[job][control][abort][held][put]") {
  auto q = co_await engine_queue(f);
  auto r = co_await put_id(q, "report", "v1", 0);
  CHECK(r.outcome == thoonk::put_result::outcome_t::added);
  auto job = co_await q.async_claim(1s, asio::use_awaitable);
  REQUIRE(job.id == "report");
  auto held = co_await put_id(q, "report", "v2", 0);
  CHECK(held.outcome == thoonk::put_result::outcome_t::held);
  co_await q.async_abort("report", cancelled(), asio::use_awaitable);
  auto info = co_await job_of(q, "report");
  CHECK(info.state == thoonk::job_state::waiting);
  CHECK(info.item == "v2");
  CHECK(!info.held);
  auto got4 = co_await q.async_counts(asio::use_awaitable);
  CHECK(got4.held == 0);
  auto next = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(next.id == "report");
  CHECK(next.item == "v2");

  // Failed with retries left: the retry is scheduled, then the held put
  // applies its own run_at (0: at once) and item.
  auto held2 = co_await put_id(q, "report", "v3", 0);
  CHECK(held2.outcome == thoonk::put_result::outcome_t::held);
  co_await q.async_abort("report", failed_with("stop"), asio::use_awaitable);
  info = co_await job_of(q, "report");
  CHECK(info.item == "v3");
  CHECK(info.state == thoonk::job_state::waiting);
  CHECK(info.retry_count == 1);
  CHECK(!info.held);
}

TEST_CASE("abort: a job that is not claimed, unknown ids and bad arguments change nothing",
          "[job][control][abort][errors]") {
  fixture f("abort", small_items());
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto q = co_await engine_queue(f);
    auto [stalled, sj] = co_await put_and_claim(q, "x");
    co_await q.async_stall(sj, asio::use_awaitable);
    auto waiting = co_await put_item(q, "w");
    auto scheduled = co_await put_at(q, "s", thoonk::now_epoch_ms() + 3600000);
    const auto before = co_await engine_snapshot(f.c.conn(), f.name);
    const std::vector<abort_options> all_opts{abort_options{}, failed_with("e"),
                                              failed_with("e", true)};
    const std::vector<std::string> not_claimed{waiting, scheduled, stalled};
    for (const auto& opts : all_opts) {
      for (const auto& id : not_claimed) {
        INFO(id);
        auto [ec] = co_await q.async_abort(id, opts, nothrow);
        CHECK(ec == E::job_not_claimed);
      }
      auto [nf] = co_await q.async_abort("no-such-job", opts, nothrow);
      CHECK(nf == E::job_not_found);
      auto [inv] = co_await q.async_abort("", opts, nothrow);
      CHECK(inv == E::invalid_id);
    }
    auto [big] = co_await q.async_abort(waiting, failed_with(std::string(65, 'e')), nothrow);
    CHECK(big == E::item_too_large);
    auto got5 = co_await engine_snapshot(f.c.conn(), f.name);
    CHECK(got5 == before);

    // Not a job queue, no such queue, a bad name.
    const auto feed = co_await make_feed(f.c, "abort-feed", thoonk::feed_type::feed);
    // Named handles: g++ 12 mishandles some temporaries in co_await
    // expressions.
    thoonk::job_queue on_feed(f.c, feed), missing(f.c, unique_name("abort-none")), bad(f.c, "");
    auto [wt] = co_await on_feed.async_abort(waiting, cancelled(), nothrow);
    CHECK(wt == E::wrong_feed_type);
    auto [nq] = co_await missing.async_abort(waiting, cancelled(), nothrow);
    CHECK(nq == E::feed_not_found);
    auto [bn] = co_await bad.async_abort(waiting, cancelled(), nothrow);
    CHECK(bn == E::invalid_name);
    co_await f.c.async_delete_feed(feed, asio::use_awaitable);
  });
}

FIXTURE_TEST_CASE("abort", "abort: a job claimed with the contract's plain commands is aborted too",
                  "[job][control][abort][interop]") {
  auto q = co_await engine_queue(f);
  auto id = co_await put_item(q, "plain");
  // The contract's Get: pop the id, mark it claimed (no token).
  co_await cmd(f.c.conn(), "RPOP", key("ids", f.name));
  co_await cmd(f.c.conn(), "ZADD", key("claimed", f.name), std::to_string(ms_now()), id);
  auto got6 = co_await job_of(q, id);
  CHECK(got6.state == thoonk::job_state::claimed);
  co_await q.async_abort(id, cancelled(), asio::use_awaitable);
  auto info = co_await job_of(q, id);
  CHECK(info.state == thoonk::job_state::waiting);
  CHECK(info.failures == 1);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j.id == id);
  co_await q.async_finish(j, asio::use_awaitable);
}

FIXTURE_TEST_CASE("abort",
                  "abort: typed events with events on; job.abort is published with events off",
                  "[job][control][abort][events][subscribe_events]") {
  thoonk::job_queue::settings s;
  s.events = true;
  s.retry.min_backoff = 60000ms;
  s.retry.max_backoff = 60000ms;
  auto q = co_await engine_queue(f, s);
  auto events = std::make_shared<std::vector<std::string>>();
  auto sub = co_await q.async_subscribe_events(
      [&](const thoonk::job_event& e) {
        events->push_back(std::string(thoonk::to_string(e.kind)) + " " + e.detail);
      },
      asio::use_awaitable);
  auto [id, job] = co_await put_and_claim(q, "a");
  co_await q.async_abort(id, cancelled(), asio::use_awaitable);
  job = co_await q.async_claim(1s, asio::use_awaitable);
  co_await q.async_abort(id, failed_with("why"), asio::use_awaitable);
  auto got7 = co_await wait_until([&] { return events->size() >= 7; });
  CHECK(got7);
  co_await fence(f.c.sub(), f.c.conn(), f.name);
  const auto retry_event = "retry_scheduled " + std::to_string((co_await job_of(q, id)).run_at);
  CHECK(*events == std::vector<std::string>{"put ", "claimed 1", "aborted cancelled", "claimed 2",
                                            "aborted failed", "failed why", retry_event});
  (void)job;

  // Events off: no typed event, the abort channel still carries the id.
  co_await f.c.async_set_config(f.name, "events", "0", asio::use_awaitable);
  auto cap = co_await capture_patterns(f.raw, "job.abort:" + key_name(f.name));
  auto [id2, job2] = co_await put_and_claim(q, "b");
  events->clear();
  co_await q.async_abort(id2, cancelled(), asio::use_awaitable);
  auto got8 = co_await wait_until([&] { return cap->msgs.size() == 1; });
  REQUIRE(got8);  // front() below needs it
  co_await fence(f.c.sub(), f.c.conn(), f.name);
  CHECK(events->empty());
  CHECK(cap->msgs.front().second == id2);
  (void)job2;
  f.raw.stop();
}

TEST_CASE("abort: a user who may not PUBLISH on job.abort gets no_channel_permission",
          "[job][control][abort][acl]") {
  fixture f("abort");
  gap_user user;
  std::optional<thoonk::client> uc;
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto q = co_await engine_queue(f);
    // Every channel of the queue but job.abort.
    co_await user.create_with(f.c.conn(), "~*", "&feed.wake:*", "&job.event:*", "+@all");
    uc.emplace(f.ioc.get_executor(), user.config());
    co_await uc->async_connect(asio::use_awaitable);
    thoonk::job_queue uq(*uc, f.name);
    auto [id, job] = co_await put_and_claim(q, "x");
    const auto before = co_await engine_snapshot(f.c.conn(), f.name);
    const std::vector<abort_options> all_opts{abort_options{}, failed_with("e", true)};
    for (const auto& opts : all_opts) {
      auto [ec] = co_await uq.async_abort(id, opts, nothrow);
      CHECK(ec == E::no_channel_permission);
    }
    auto got9 = co_await engine_snapshot(f.c.conn(), f.name);
    CHECK(got9 == before);
    // The holder still holds it.
    co_await q.async_heartbeat(job, asio::use_awaitable);
    // With the permission, the same call works.
    co_await cmd(f.c.conn(), "ACL", "SETUSER", user.name, "&job.abort:*");
    co_await uq.async_abort(id, cancelled(), asio::use_awaitable);
    auto got10 = co_await job_of(q, id);
    CHECK(got10.state == thoonk::job_state::waiting);
    uc->stop();
    co_await user.remove(f.c.conn());
  });
}

FIXTURE_TEST_CASE("abort", "subscribe_aborts: an empty message is ignored and counted; errors",
                  "[job][control][subscribe_aborts]") {
  auto q = co_await engine_queue(f);
  auto seen = std::make_shared<std::vector<std::string>>();
  auto sub = co_await q.async_subscribe_aborts([&](const std::string& id) { seen->push_back(id); },
                                               asio::use_awaitable);
  co_await raw_notify(f.c.conn(), "job.abort:" + key_name(f.name), "");
  co_await raw_notify(f.c.conn(), "job.abort:" + key_name(f.name), "some-id");
  auto got11 = co_await wait_until([&] { return seen->size() == 1; });
  REQUIRE(got11);  // front() below needs it
  CHECK(seen->front() == "some-id");
  CHECK(q.malformed_finish_events() == 1);
  // Destroying the subscription unsubscribes.
  sub = thoonk::subscription{};
  co_await raw_notify(f.c.conn(), "job.abort:" + key_name(f.name), "later");
  co_await fence(f.c.sub(), f.c.conn(), f.name);
  CHECK(seen->size() == 1);
  thoonk::job_queue bad(f.c, "");
  auto [ec, none] = co_await bad.async_subscribe_aborts([](const std::string&) {}, nothrow);
  CHECK(ec == E::invalid_name);
}

TEST_CASE("progress: only the claim holder; kept on the job, published as an event",
          "[job][control][progress][get_job][events][subscribe_events]") {
  fixture f("progress", small_items());
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    thoonk::job_queue::settings s;
    s.events = true;
    auto q = co_await engine_queue(f, s);
    auto events = std::make_shared<std::vector<thoonk::job_event>>();
    auto sub = co_await q.async_subscribe_events(
        [&](const thoonk::job_event& e) {
          if (e.kind == thoonk::job_event::kind_t::progress) events->push_back(e);
        },
        asio::use_awaitable);
    auto [id, job] = co_await put_and_claim(q, "encode");
    auto got12 = co_await job_of(q, id);
    CHECK(got12.progress.empty());
    co_await q.async_progress(job, "10%", asio::use_awaitable);
    auto got13 = co_await job_of(q, id);
    CHECK(got13.progress == "10%");
    const std::string bytes("50%\0\xff\"\\", 7);
    co_await q.async_progress(job, bytes, asio::use_awaitable);
    auto info = co_await job_of(q, id);
    CHECK(info.progress == bytes);
    CHECK(info.state == thoonk::job_state::claimed);
    auto got14 = co_await wait_until([&] { return events->size() == 2; });
    CHECK(got14);
    CHECK(events->at(0).id == id);
    CHECK(events->at(0).detail == "10%");
    CHECK(events->at(1).detail == bytes);

    // Errors: a stale token, too large, not claimed, unknown, bad id.
    auto w = co_await put_item(q, "waiting");
    const auto before = co_await engine_snapshot(f.c.conn(), f.name);
    thoonk::claim_ref stale{id, job.token + 1};
    auto [lc] = co_await q.async_progress(stale, "no", nothrow);
    CHECK(lc == E::lost_claim);
    auto [big] = co_await q.async_progress(job, std::string(65, 'p'), nothrow);
    CHECK(big == E::item_too_large);
    const thoonk::claim_ref not_claimed{w, 1}, unknown{"no-such-job", 1}, bad_id{"", 1};
    auto [nc] = co_await q.async_progress(not_claimed, "no", nothrow);
    CHECK(nc == E::job_not_claimed);
    auto [nf] = co_await q.async_progress(unknown, "no", nothrow);
    CHECK(nf == E::job_not_found);
    auto [inv] = co_await q.async_progress(bad_id, "no", nothrow);
    CHECK(inv == E::invalid_id);
    auto got15 = co_await engine_snapshot(f.c.conn(), f.name);
    CHECK(got15 == before);
    co_await q.async_retract(w, asio::use_awaitable);

    // Kept across a retry; gone with the job.
    co_await q.async_cancel(job, asio::use_awaitable);
    auto got16 = co_await job_of(q, id);
    CHECK(got16.progress == bytes);
    auto again = co_await q.async_claim(1s, asio::use_awaitable);
    co_await q.async_progress(again, "done", asio::use_awaitable);
    co_await q.async_finish(again, asio::use_awaitable);
    auto got17 = co_await cmd(f.c.conn(), "HEXISTS", key("jobmeta", f.name), id);
    CHECK(got17.integer == 0);
    // Events off: stored, not published.
    co_await f.c.async_set_config(f.name, "events", "0", asio::use_awaitable);
    events->clear();
    auto [id2, job2] = co_await put_and_claim(q, "quiet");
    co_await q.async_progress(job2, "1/3", asio::use_awaitable);
    auto got18 = co_await job_of(q, id2);
    CHECK(got18.progress == "1/3");
    co_await fence(f.c.sub(), f.c.conn(), f.name);
    CHECK(events->empty());
  });
}
