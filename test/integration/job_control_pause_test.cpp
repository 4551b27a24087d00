// Pausing and resuming a job queue (docs/jobs.md §12): claims stop for
// every client and every claim path (prefetch top-ups too), puts go on,
// resume wakes waiting claimers at once; both announce the config change on
// conffeed; the paused state is readable; the config fields rate_limit and
// paused are validated.
// co_await stays out of CHECK and REQUIRE: Catch2 also passes the
// expression to __builtin_constant_p, and g++ 12 then awaits it twice.
#include "support/job_engine.hpp"

#include <boost/json/value.hpp>

#include <optional>

using namespace thoonk::test;
using E = thoonk::error;

TWO_CLIENT_TEST_CASE(
    "pause", "pause: claims stop for two clients and prefetch; puts go on; resume wakes at once",
    "[job][control][pause][resume][claim][prefetch][put][read_settings]") {
  // Polls only every 60 s: a claim served sooner was woken by a message.
  thoonk::job_queue_options slow;
  slow.poll_interval = 60s;
  const thoonk::job_queue::settings defaults;
  auto a = co_await engine_queue(f, defaults, slow);
  co_await other.async_connect(asio::use_awaitable);
  thoonk::job_queue_options ahead = slow;
  ahead.prefetch = 4;
  auto b = co_await thoonk::job_queue::async_open(other, f.name, ahead, asio::use_awaitable);
  auto b_plain = co_await thoonk::job_queue::async_open(other, f.name, slow, asio::use_awaitable);

  std::vector<std::string> items{"1", "2", "3", "6", "7", "8", "9", "10", "11", "12"};
  co_await a.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
  auto got1 = co_await a.async_read_settings(asio::use_awaitable);
  CHECK(!got1.paused.value_or(false));
  co_await a.async_pause(asio::use_awaitable);
  co_await b.async_pause(asio::use_awaitable);  // idempotent, from the other client
  auto got2 = co_await b.async_read_settings(asio::use_awaitable);
  CHECK(got2.paused == true);
  auto got3 = co_await f.c.async_get_config(f.name, "paused", asio::use_awaitable);
  CHECK(got3 == "1");

  // No claim path hands out a job: one attempt, a wait, a prefetching
  // object, on both clients.
  auto got4 = co_await try_claim(a);
  CHECK(!got4);
  auto got5 = co_await try_claim(b_plain);
  CHECK(!got5);
  auto [e1, j1] = co_await a.async_claim(300ms, nothrow);
  CHECK(e1 == E::queue_empty);
  auto [e2, j2] = co_await b.async_claim(300ms, nothrow);
  CHECK(e2 == E::queue_empty);
  // Puts go on, and their wake-ups do not get jobs out either.
  co_await put_item(b, "4");
  co_await a.async_put("5", thoonk::priority::high, asio::use_awaitable);
  auto [e3, j3] = co_await b_plain.async_claim(200ms, nothrow);
  CHECK(e3 == E::queue_empty);
  auto counts = co_await a.async_counts(asio::use_awaitable);
  CHECK(counts.waiting == 12);
  CHECK(counts.claimed == 0);
  CHECK(counts.puts == 12);

  // A claimer waits (up to 20 s) on the other client while the queue is
  // paused; resume wakes it without waiting for its 60 s poll.
  struct outcome {
    bool done = false;
    boost::system::error_code ec;
    thoonk::claimed_job job;
  };
  auto waited = std::make_shared<outcome>();
  asio::co_spawn(
      f.ioc,
      [](thoonk::job_queue q, std::shared_ptr<outcome> out) -> asio::awaitable<void> {
        auto [ec, job] = co_await q.async_claim(20s, nothrow);
        out->ec = ec;
        out->job = std::move(job);
        out->done = true;
      }(b_plain, waited),
      asio::detached);
  co_await settle();
  CHECK(!waited->done);
  co_await a.async_resume(asio::use_awaitable);
  auto got6 = co_await a.async_read_settings(asio::use_awaitable);
  CHECK(!got6.paused.value_or(false));
  auto got7 = co_await wait_until([&] { return waited->done; }, 15s);
  CHECK(got7);
  CHECK(!waited->ec);
  CHECK(waited->job.item == "5");  // high priority: next out
  co_await b_plain.async_finish(waited->job, asio::use_awaitable);

  // Claims work again everywhere, prefetch included.
  auto jb = co_await b.async_claim(1s, asio::use_awaitable);
  CHECK(jb.item == "1");
  auto ja = co_await a.async_claim(1s, asio::use_awaitable);
  CHECK(!ja.item.empty());
  co_await a.async_resume(asio::use_awaitable);  // idempotent
}

FIXTURE_TEST_CASE("pause",
                  "pause: the claim script answers a paused queue with no job and no due time",
                  "[job][control][pause][scheduled]") {
  auto q = co_await engine_queue(f);
  co_await q.async_put("now", asio::use_awaitable);
  co_await put_at(q, "later", thoonk::now_epoch_ms() + 3600000);
  co_await q.async_pause(asio::use_awaitable);
  // Nothing set for sleepers (a put then sends no useless wake-up), no
  // claim recorded.
  co_await cmd(f.c.conn(), "DEL", key("sleepers", f.name));
  auto got8 = co_await try_claim(q);
  CHECK(!got8);
  auto got9 = co_await cmd(f.c.conn(), "EXISTS", key("sleepers", f.name));
  CHECK(got9.integer == 0);
  auto got10 = co_await cmd(f.c.conn(), "ZCARD", key("claimed", f.name));
  CHECK(got10.integer == 0);
  // A scheduled job that became due is still promoted while paused (it
  // becomes waiting), but not claimed.
  const auto soon = co_await put_at(q, "soon", thoonk::now_epoch_ms() + 100);
  co_await sleep_for(200ms);
  auto got11 = co_await try_claim(q);
  CHECK(!got11);
  auto got12 = co_await job_of(q, soon);
  CHECK(got12.state == thoonk::job_state::waiting);
  co_await q.async_resume(asio::use_awaitable);
  auto j = co_await try_claim(q);
  REQUIRE(j);
  CHECK(j->item == "now");
}

FIXTURE_TEST_CASE("pause", "pause: contract clients' plain claims are not stopped",
                  "[job][control][pause][interop]") {
  auto q = co_await engine_queue(f);
  auto id = co_await put_item(q, "x");
  co_await q.async_pause(asio::use_awaitable);
  // The contract's Get is RPOP (BRPOP) + ZADD claimed: no script, no check.
  auto popped = co_await cmd(f.c.conn(), "RPOP", key("ids", f.name));
  CHECK(popped.str == id);
}

FIXTURE_TEST_CASE("pauseconf",
                  "pause, resume: each announces the config change on conffeed "
                  "(name, NUL, the client's instance id), as set_config does",
                  "[job][control][pause][resume][conffeed]") {
  auto q = co_await engine_queue(f);
  auto cap = co_await capture_patterns(f.raw, "conffeed");
  const msg announced{"conffeed", nul_join(f.name, f.c.instance_id())};
  auto ours = [&] {
    const auto all = cap->on("conffeed");
    return static_cast<std::size_t>(std::count(all.begin(), all.end(), announced));
  };
  co_await q.async_pause(asio::use_awaitable);
  auto paused = co_await wait_until([&] { return ours() == 1; }, 5s);
  CHECK(paused);
  co_await q.async_resume(asio::use_awaitable);
  auto resumed = co_await wait_until([&] { return ours() == 2; }, 5s);
  CHECK(resumed);
  co_await settle();
  CHECK(ours() == 2);
}

TEST_CASE("pause and resume: errors", "[job][control][pause][resume][errors][acl]") {
  fixture f("pause");
  gap_user user;
  std::optional<thoonk::client> uc;
  run_coro(f.ioc, [&]() -> asio::awaitable<void> {
    auto q = co_await engine_queue(f);
    const auto feed = co_await make_feed(f.c, "pause-feed", thoonk::feed_type::feed);
    thoonk::job_queue on_feed(f.c, feed), missing(f.c, unique_name("pause-none")), bad(f.c, "");
    // Pause and resume each fail with the error of what the name is.
    const std::pair<thoonk::job_queue*, boost::system::error_code> refused[] = {
        {&on_feed, E::wrong_feed_type}, {&missing, E::feed_not_found}, {&bad, E::invalid_name}};
    for (const auto& [target, error] : refused) {
      INFO(target->name());
      co_await expect_each_fails(
          error, [&] { return target->async_pause(nothrow); },
          [&] { return target->async_resume(nothrow); });
    }
    auto got13 = co_await cmd(f.c.conn(), "EXISTS", key("config", feed));
    CHECK(got13.integer == 1);
    auto got14 = co_await f.c.async_get_config(feed, "paused", asio::use_awaitable);
    CHECK(!got14.has_value());

    // A user who may not PUBLISH on conffeed cannot pause or resume, even
    // when it may PUBLISH the wake-up, and one who may PUBLISH on neither
    // cannot either: nothing changes.
    for (const char* wake : {"&feed.wake:*", "resetchannels"}) {
      INFO(wake);
      co_await user.create_with(f.c.conn(), "~*", "resetchannels", wake, "+@all");
      uc.emplace(f.ioc.get_executor(), user.config());
      co_await uc->async_connect(asio::use_awaitable);
      thoonk::job_queue uq(*uc, f.name);
      auto [r3] = co_await uq.async_pause(nothrow);
      CHECK(r3 == E::no_channel_permission);
      auto got15 = co_await f.c.async_get_config(f.name, "paused", asio::use_awaitable);
      CHECK(!got15.has_value());
      co_await q.async_pause(asio::use_awaitable);
      auto [r4] = co_await uq.async_resume(nothrow);
      CHECK(r4 == E::no_channel_permission);
      auto got16 = co_await f.c.async_get_config(f.name, "paused", asio::use_awaitable);
      CHECK(got16 == "1");
      co_await q.async_resume(asio::use_awaitable);
      uc->stop();
      uc.reset();
      co_await user.remove(f.c.conn());
    }
    co_await f.c.async_delete_feed(feed, asio::use_awaitable);
  });
}

FIXTURE_TEST_CASE("control-config",
                  "control config: rate_limit and paused are validated; settings round-trip",
                  "[job][control][config][create_or_open][read_settings][set_config]") {
  co_await f.c.async_connect(asio::use_awaitable);
  struct field_case {
    std::string field;
    std::vector<std::string> bad;
    std::string good;
  };
  const std::vector<field_case> cases{
      {"rate_limit", {"banana", "-1", "1000001", "1.5", " 10", "1e3"}, "1000000"},
      {"paused", {"2", "yes", "true", ""}, "1"},
  };
  for (const auto& fc : cases) {
    for (const auto& bad : fc.bad) {
      INFO(fc.field << " = '" << bad << "'");
      const auto name = unique_name("control-config");
      const thoonk::feed_config cfg{{fc.field, bad}};
      auto [ec] = co_await f.c.async_create_feed(name, thoonk::feed_type::job, cfg, nothrow);
      CHECK(ec == E::invalid_argument);
      auto got16 = co_await cmd(f.c.conn(), "SISMEMBER", "feeds", name);
      CHECK(got16.integer == 0);
      auto why = thoonk::config_field_problem(fc.field, bad);
      CHECK(why.find(fc.field) != std::string::npos);
    }
    CHECK(thoonk::config_field_problem(fc.field, fc.good).empty());
    const auto name = unique_name("control-config");
    const thoonk::feed_config no_fields;
    co_await f.c.async_create_feed(name, thoonk::feed_type::job, no_fields, asio::use_awaitable);
    co_await f.c.async_set_config(name, fc.field, fc.good, asio::use_awaitable);
    for (const auto& bad : fc.bad) {
      auto [ec] = co_await f.c.async_set_config(name, fc.field, bad, nothrow);
      CHECK(ec == E::invalid_argument);
      auto got17 = co_await f.c.async_get_config(name, fc.field, asio::use_awaitable);
      CHECK(got17 == fc.good);
    }
    auto [je] =
        co_await f.c.async_set_config_json(name, fc.field, boost::json::value("1"), nothrow);
    CHECK(je == E::invalid_argument);
    co_await f.c.async_delete_feed(name, asio::use_awaitable);
  }
  CHECK(thoonk::config_field_problem("rate_limit", "1000001").find("1000000") != std::string::npos);

  // Typed settings: refused before any I/O; valid ones round-trip.
  thoonk::job_queue::settings bad;
  bad.rate_limit = 2000000;
  CHECK(!bad.problem().empty());
  auto [ce, none] = co_await thoonk::job_queue::async_create_or_open(f.c, f.name, bad, nothrow);
  CHECK(ce == E::invalid_argument);
  auto got18 = co_await cmd(f.c.conn(), "EXISTS", key("config", f.name));
  CHECK(got18.integer == 0);
  bad.rate_limit = -1;
  CHECK(!bad.problem().empty());
  thoonk::job_queue::settings good;
  good.rate_limit = 250;
  good.paused = true;
  auto q = co_await thoonk::job_queue::async_create_or_open(f.c, f.name, good, asio::use_awaitable);
  auto back = co_await q.async_read_settings(asio::use_awaitable);
  CHECK(back.rate_limit == 250);
  CHECK(back.paused == true);
  // Created paused: nothing is claimed until resume.
  co_await put_item(q, "x");
  auto got19 = co_await try_claim(q);
  CHECK(!got19);
  co_await q.async_resume(asio::use_awaitable);
  auto got = co_await try_claim(q);
  CHECK(got.has_value());
  co_await f.c.async_delete_feed(f.name, asio::use_awaitable);
}
