// The admin server over HTTP against a real redis-server holding jobs in
// every state: each endpoint, each error path, the access rules and the
// limits. co_await stays out of CHECK and REQUIRE (g++ 12 awaits twice).
#include "admin/admin_fixture.hpp"

using namespace thoonk::test;
using namespace thoonk::test::admin;
using thoonk::test::run_coro;

namespace {

// The ids of a jobs or items page, in order.
std::vector<std::string> ids_of(const reply& r, const char* list = "jobs") {
  std::vector<std::string> out;
  for (const auto& j : r.json.at(list).as_array()) out.emplace_back(j.at("id").as_string());
  return out;
}

std::string str(const json::value& v, const char* key) {
  return std::string(v.at(key).as_string());
}

thoonk::config url_config(const std::string& url) {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url(url, ec);
  if (ec) throw boost::system::system_error(ec, url);
  return cfg;
}

// One header, built outside the co_await's full expression: g++ 12 cannot
// keep a braced initializer list alive across a suspension.
std::map<std::string, std::string> hdr(std::string k, std::string v) {
  std::map<std::string, std::string> m;
  m.emplace(std::move(k), std::move(v));
  return m;
}

// A job handler that holds its job until *release (a free coroutine with
// its arguments by value: it outlives the lambda that starts it).
asio::awaitable<std::optional<std::string>> hold_job(std::shared_ptr<bool> release,
                                                     thoonk::job_context) {
  for (int i = 0; i < 1000 && !*release; ++i) co_await sleep_for(std::chrono::milliseconds(10));
  co_return std::string("result of r1");
}

std::string jobs_path(const std::string& q, const std::string& rest = "") {
  return "/api/queues/" + q + "/jobs" + rest;
}

}  // namespace

TEST_CASE("admin: the read endpoints list queues, jobs by state, jobs, workers and feeds",
          "[admin][http]") {
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    thoonk::client c(ioc.get_executor(), test_config());
    co_await c.async_connect(asio::use_awaitable);
    auto s = co_await seed(c);
    running_server srv(c, {});
    const auto port = srv.port();

    // Every queue, with counts per state (paged by SSCAN: follow the cursor).
    std::map<std::string, json::object> queues;
    std::string cursor;
    int pages = 0;
    do {
      std::string path = "/api/queues?count=1";
      if (!cursor.empty()) path += "&cursor=" + cursor;
      auto r = co_await get(port, path);
      REQUIRE(r.status == 200);
      for (const auto& q : r.json.at("queues").as_array())
        queues[std::string(q.at("name").as_string())] = q.as_object();
      cursor = str(r.json, "next");
      ++pages;
    } while (!cursor.empty() && pages < 1000);
    CHECK(cursor.empty());
    REQUIRE(queues.count(s.jobs) == 1);
    REQUIRE(queues.count(s.plain) == 1);
    CHECK(queues.count(s.feed) == 0);  // feeds are under /api/feeds
    const auto& jc = queues[s.jobs].at("counts");
    CHECK(jc.at("waiting").as_int64() == 3);
    CHECK(jc.at("claimed").as_int64() == 1);
    CHECK(jc.at("scheduled").as_int64() == 1);
    CHECK(jc.at("dead").as_int64() == 1);
    CHECK(jc.at("held").as_int64() == 1);
    CHECK(queues[s.jobs].at("type").as_string() == "job");
    CHECK(queues[s.jobs].at("paused").as_bool() == false);
    CHECK(queues[s.plain].at("counts").at("waiting").as_int64() == 2);
    CHECK(queues[s.plain].at("type").as_string() == "queue");

    auto bad_count = co_await get(port, "/api/queues?count=0");
    CHECK(bad_count.status == 400);
    CHECK(bad_count.code() == "invalid_count");
    auto bad_cursor = co_await get(port, "/api/queues?cursor=abc");
    CHECK(bad_cursor.status == 400);
    CHECK(bad_cursor.code() == "invalid_cursor");

    // One queue, with its settings.
    auto one = co_await get(port, "/api/queues/" + s.jobs);
    REQUIRE(one.status == 200);
    CHECK(one.json.at("counts").at("waiting").as_int64() == 3);
    CHECK(one.json.at("settings").at("claim_timeout_ms").as_string() == "3600000");
    auto plain = co_await get(port, "/api/queues/" + s.plain);
    CHECK(plain.status == 200);
    auto missing = co_await get(port, "/api/queues/no-such-queue-" + s.jobs);
    CHECK(missing.status == 404);
    CHECK(missing.code() == "feed_not_found");
    auto not_queue = co_await get(port, "/api/queues/" + s.feed);
    CHECK(not_queue.status == 409);
    CHECK(not_queue.code() == "wrong_feed_type");
    auto bad_name = co_await get(port, "/api/queues/%7Bbraces%7D");
    CHECK(bad_name.status == 400);
    CHECK(bad_name.code() == "invalid_name");

    // Jobs by state: waiting next out first, paged by cursor.
    auto w = co_await get(port, jobs_path(s.jobs, "?state=waiting&count=2"));
    REQUIRE(w.status == 200);
    CHECK(ids_of(w) == std::vector<std::string>{"w1", "w2"});
    CHECK(str(w.json, "next") == "2");
    auto w2 = co_await get(port, jobs_path(s.jobs, "?state=waiting&count=2&cursor=2"));
    CHECK(ids_of(w2) == std::vector<std::string>{"wx"});
    CHECK(str(w2.json, "next").empty());
    CHECK(w2.json.at("jobs").at(0).at("item").as_string() == hostile);
    auto dflt = co_await get(port, jobs_path(s.jobs));  // state defaults to waiting
    CHECK(ids_of(dflt) == std::vector<std::string>{"w1", "w2", "wx"});
    auto cl = co_await get(port, jobs_path(s.jobs, "?state=claimed"));
    CHECK(ids_of(cl) == std::vector<std::string>{"c1"});
    CHECK(cl.json.at("jobs").at(0).at("held").as_bool());
    auto sc = co_await get(port, jobs_path(s.jobs, "?state=scheduled"));
    CHECK(ids_of(sc) == std::vector<std::string>{"s1"});
    CHECK(sc.json.at("jobs").at(0).at("run_at").as_int64() > ms_now() + 3000000);
    auto dead = co_await get(port, jobs_path(s.jobs, "?state=dead"));
    CHECK(ids_of(dead) == std::vector<std::string>{"d1"});
    CHECK(dead.json.at("jobs").at(0).at("last_error").as_string() == "boom");
    CHECK(dead.json.at("state").as_string() == "dead");
    auto stalled = co_await get(port, jobs_path(s.jobs, "?state=stalled"));
    CHECK(ids_of(stalled) == std::vector<std::string>{"d1"});
    auto held = co_await get(port, jobs_path(s.jobs, "?state=held"));
    CHECK(ids_of(held) == std::vector<std::string>{"c1"});
    auto bad_state = co_await get(port, jobs_path(s.jobs, "?state=gone"));
    CHECK(bad_state.status == 400);
    CHECK(bad_state.code() == "invalid_state");
    auto bad_jcount = co_await get(port, jobs_path(s.jobs, "?count=501"));
    CHECK(bad_jcount.status == 400);
    auto bad_jcursor = co_await get(port, jobs_path(s.jobs, "?state=claimed&cursor=-1"));
    CHECK(bad_jcursor.status == 400);
    CHECK(bad_jcursor.code() == "invalid_cursor");
    auto pw = co_await get(port, jobs_path(s.plain));
    REQUIRE(pw.status == 200);
    CHECK(ids_of(pw).size() == 2);
    CHECK(pw.json.at("jobs").at(0).at("item").as_string() == "p-one");
    auto pdead = co_await get(port, jobs_path(s.plain, "?state=dead"));
    CHECK(pdead.status == 400);
    auto jmissing = co_await get(port, jobs_path("nope-" + s.jobs));
    CHECK(jmissing.status == 404);

    // One job.
    // A handle's own claim names no worker; a runner's does (its record in
    // feed.worker_jobs, `worker\0token`, written here as a runner would).
    auto c1_handle = co_await get(port, jobs_path(s.jobs, "/c1"));
    CHECK(!c1_handle.json.as_object().contains("worker"));
    co_await cmd(c.conn(), "HSET", key("worker_jobs", s.jobs), "c1", nul_join("runner-7", "1"));
    auto c1 = co_await get(port, jobs_path(s.jobs, "/c1"));
    REQUIRE(c1.status == 200);
    CHECK(c1.json.at("state").as_string() == "claimed");
    CHECK(c1.json.at("item").as_string() == "being worked on");
    CHECK(c1.json.at("held").as_bool());
    CHECK(c1.json.at("worker").as_string() == "runner-7");
    CHECK(c1.json.at("claimed_at").as_int64() > ms_now() - 600000);
    auto d1 = co_await get(port, jobs_path(s.jobs, "/d1"));
    CHECK(d1.json.at("state").as_string() == "dead");
    CHECK(d1.json.at("last_error").as_string() == "boom");
    auto nojob = co_await get(port, jobs_path(s.jobs, "/zzz"));
    CHECK(nojob.status == 404);
    CHECK(nojob.code() == "job_not_found");
    auto plain_job = co_await get(port, jobs_path(s.plain, "/x"));
    CHECK(plain_job.status == 409);

    // Workers (none run here) and their errors.
    auto ws = co_await get(port, "/api/queues/" + s.jobs + "/workers");
    REQUIRE(ws.status == 200);
    CHECK(ws.json.at("workers").as_array().empty());
    auto pws = co_await get(port, "/api/queues/" + s.plain + "/workers");
    CHECK(pws.status == 409);

    // Feeds and their newest items.
    auto fs = co_await get(port, "/api/feeds?count=500");
    REQUIRE(fs.status == 200);
    // One SSCAN page of 500 covers a test server's feeds, but follow the
    // cursor all the same.
    std::map<std::string, json::object> feeds;
    for (const auto& f : fs.json.at("feeds").as_array())
      feeds[std::string(f.at("name").as_string())] = f.as_object();
    for (auto next = str(fs.json, "next"); !next.empty();) {
      auto more = co_await get(port, "/api/feeds?count=500&cursor=" + next);
      for (const auto& f : more.json.at("feeds").as_array())
        feeds[std::string(f.at("name").as_string())] = f.as_object();
      next = str(more.json, "next");
    }
    REQUIRE(feeds.count(s.feed) == 1);
    CHECK(feeds[s.feed].at("length").as_int64() == 3);
    CHECK(feeds[s.sorted].at("type").as_string() == "sorted_feed");
    CHECK(feeds.count(s.jobs) == 0);
    auto items = co_await get(port, "/api/feeds/" + s.feed + "/items?count=2");
    REQUIRE(items.status == 200);
    CHECK(ids_of(items, "items") == std::vector<std::string>{"n3", "n2"});
    CHECK(items.json.at("items").at(0).at("item").as_string() == hostile);
    CHECK(str(items.json, "next") == "2");
    auto older = co_await get(port, "/api/feeds/" + s.feed + "/items?count=2&cursor=2");
    CHECK(ids_of(older, "items") == std::vector<std::string>{"n1"});
    auto sorted = co_await get(port, "/api/feeds/" + s.sorted + "/items");
    REQUIRE(sorted.status == 200);
    REQUIRE(sorted.json.at("items").as_array().size() == 2);
    CHECK(sorted.json.at("items").at(0).at("item").as_string() == "second");
    auto fq = co_await get(port, "/api/feeds/" + s.jobs + "/items");
    CHECK(fq.status == 409);
    auto fmissing = co_await get(port, "/api/feeds/nope-" + s.feed + "/items");
    CHECK(fmissing.status == 404);
    auto fbad = co_await get(port, "/api/feeds/" + s.feed + "/items?cursor=x");
    CHECK(fbad.status == 400);

    auto stopped = co_await srv.stop();
    CHECK(stopped == asio::error::operation_aborted);
  });
}

TEST_CASE(
    "admin: the actions retry, retract, abort, run now, pause, resume, rate limit, "
    "retry all dead and delete",
    "[admin][http]") {
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    thoonk::client c(ioc.get_executor(), test_config());
    co_await c.async_connect(asio::use_awaitable);
    auto s = co_await seed(c);
    running_server srv(c, {});
    const auto port = srv.port();
    auto state_of = [&](std::string id) -> asio::awaitable<std::string> {
      auto r = co_await get(port, jobs_path(s.jobs, "/" + id));
      if (r.status == 200) co_return str(r.json, "state");
      co_return std::to_string(r.status);
    };

    // Retry a dead letter; again: not a dead letter any more.
    auto r1 = co_await post(port, jobs_path(s.jobs, "/d1/retry"));
    CHECK(r1.status == 200);
    auto st1 = co_await state_of("d1");
    CHECK(st1 == "waiting");
    auto r2 = co_await post(port, jobs_path(s.jobs, "/d1/retry"));
    CHECK(r2.status == 409);
    CHECK(r2.code() == "job_not_stalled");
    auto r3 = co_await post(port, jobs_path(s.jobs, "/none/retry"));
    CHECK(r3.status == 404);

    // Retract.
    auto x1 = co_await post(port, jobs_path(s.jobs, "/w2/retract"));
    CHECK(x1.status == 200);
    auto st2 = co_await state_of("w2");
    CHECK(st2 == "404");
    auto x2 = co_await post(port, jobs_path(s.jobs, "/w2/retract"));
    CHECK(x2.status == 404);

    // Abort: only a claimed job; a bad outcome is refused before anything.
    auto a0 = co_await post(port, jobs_path(s.jobs, "/c1/abort"), R"({"outcome":"maybe"})");
    CHECK(a0.status == 400);
    auto st3 = co_await state_of("c1");
    CHECK(st3 == "claimed");
    auto a1 = co_await post(port, jobs_path(s.jobs, "/w1/abort"));
    CHECK(a1.status == 409);
    CHECK(a1.code() == "job_not_claimed");
    auto a2 = co_await post(port, jobs_path(s.jobs, "/c1/abort"), R"({"outcome":"cancelled"})");
    CHECK(a2.status == 200);
    auto st4 = co_await state_of("c1");
    CHECK(st4 == "waiting");
    auto bad_body = co_await post(port, jobs_path(s.jobs, "/c1/abort"), "[1,2]");
    CHECK(bad_body.status == 400);
    CHECK(bad_body.code() == "invalid_body");

    // Run a scheduled job now; a waiting one is refused.
    auto p0 = co_await post(port, jobs_path(s.jobs, "/w1/promote"));
    CHECK(p0.status == 409);
    CHECK(p0.code() == "job_not_scheduled");
    auto p1 = co_await post(port, jobs_path(s.jobs, "/s1/promote"));
    CHECK(p1.status == 200);
    auto s1 = co_await get(port, jobs_path(s.jobs, "/s1"));
    CHECK(str(s1.json, "state") == "waiting");
    CHECK(str(s1.json, "item") == "later");
    auto p2 = co_await post(port, jobs_path(s.jobs, "/nope/promote"));
    CHECK(p2.status == 404);

    // Pause and resume.
    auto pa = co_await post(port, "/api/queues/" + s.jobs + "/pause");
    CHECK(pa.status == 200);
    auto q1 = co_await get(port, "/api/queues/" + s.jobs);
    CHECK(q1.json.at("paused").as_bool());
    auto re = co_await post(port, "/api/queues/" + s.jobs + "/resume");
    CHECK(re.status == 200);
    auto q2 = co_await get(port, "/api/queues/" + s.jobs);
    CHECK(!q2.json.at("paused").as_bool());
    auto pplain = co_await post(port, "/api/queues/" + s.plain + "/pause");
    CHECK(pplain.status == 409);
    auto pmissing = co_await post(port, "/api/queues/nope-" + s.jobs + "/pause");
    CHECK(pmissing.status == 404);

    // Rate limit.
    auto rl = co_await post(port, "/api/queues/" + s.jobs + "/rate_limit", R"({"rate_limit":5})");
    CHECK(rl.status == 200);
    auto q3 = co_await get(port, "/api/queues/" + s.jobs);
    CHECK(q3.json.at("rate_limit").as_int64() == 5);
    const std::vector<std::string> bad_limits{R"({"rate_limit":-1})", R"({"rate_limit":"5"})",
                                              R"({})", R"({"rate_limit":1000001})", "not json"};
    for (const auto& bad : bad_limits) {
      auto r = co_await post(port, "/api/queues/" + s.jobs + "/rate_limit", bad);
      CHECK(r.status == 400);
    }

    // Retry all dead letters, in bounded steps that follow a cursor.
    std::string dq = unique_name("adm-dead");
    auto q = co_await thoonk::job_queue::async_create_or_open(c, dq, {}, asio::use_awaitable);
    thoonk::fail_options perm;
    perm.permanent = true;
    for (int i = 0; i < 5; ++i) {
      co_await q.async_put("x" + std::to_string(i), asio::use_awaitable);
      auto j = co_await q.async_claim(1s, asio::use_awaitable);
      co_await q.async_fail(j, "bad", perm, asio::use_awaitable);
    }
    std::int64_t retried = 0;
    std::string cursor;
    int calls = 0;
    do {
      json::object body;
      body["count"] = 2;
      body["cursor"] = cursor;
      auto r = co_await post(port, "/api/queues/" + dq + "/retry_dead", json::serialize(body));
      REQUIRE(r.status == 200);
      retried += r.json.at("retried").as_int64();
      cursor = str(r.json, "next");
      ++calls;
    } while (!cursor.empty() && calls < 50);
    CHECK(retried == 5);
    auto counts = co_await q.async_counts(asio::use_awaitable);
    CHECK(counts.stalled == 0);
    CHECK(counts.waiting == 5);
    auto rd_bad = co_await post(port, "/api/queues/" + dq + "/retry_dead", R"({"count":100000})");
    CHECK(rd_bad.status == 400);

    // Delete: only with the queue's name as confirmation.
    auto d0 = co_await post(port, "/api/queues/" + dq + "/delete");
    CHECK(d0.status == 400);
    CHECK(d0.code() == "confirmation_required");
    auto d1 = co_await post(port, "/api/queues/" + dq + "/delete", R"({"confirm":"other"})");
    CHECK(d1.status == 400);
    auto still = co_await get(port, "/api/queues/" + dq);
    CHECK(still.status == 200);
    json::object confirm;
    confirm["confirm"] = dq;
    auto d2 = co_await post(port, "/api/queues/" + dq + "/delete", json::serialize(confirm));
    CHECK(d2.status == 200);
    auto gone = co_await get(port, "/api/queues/" + dq);
    CHECK(gone.status == 404);
    auto dfeed = co_await post(port, "/api/queues/" + s.feed + "/delete");
    CHECK(dfeed.status == 409);

    co_await srv.stop();
  });
}

TEST_CASE("admin: access rules: CSRF header, read-only, token, Host, and the options' checks",
          "[admin][http][security]") {
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    thoonk::client c(ioc.get_executor(), test_config());
    co_await c.async_connect(asio::use_awaitable);
    auto s = co_await seed(c);

    {
      running_server srv(c, {});
      const auto port = srv.port();
      // A write without the CSRF header changes nothing.
      auto r = co_await call(port, http::verb::post, "/api/queues/" + s.jobs + "/pause", "{}");
      CHECK(r.status == 403);
      CHECK(r.code() == "csrf_header_missing");
      auto q = co_await get(port, "/api/queues/" + s.jobs);
      CHECK(!q.json.at("paused").as_bool());
      // DNS rebinding: a page of another site that resolves to 127.0.0.1.
      auto host =
          co_await get(port, "/api/queues", hdr("Host", "evil.example:" + std::to_string(port)));
      CHECK(host.status == 421);
      auto lh = co_await get(port, "/api/queues", hdr("Host", "localhost:" + std::to_string(port)));
      CHECK(lh.status == 200);
      auto method = co_await call(port, http::verb::delete_, "/api/queues/" + s.jobs);
      CHECK(method.status == 405);
      CHECK(method.headers[http::field::allow] == "GET");
      auto get_on_post = co_await get(port, "/api/queues/" + s.jobs + "/pause");
      CHECK(get_on_post.status == 405);
      auto unknown = co_await get(port, "/api/nothing");
      CHECK(unknown.status == 404);
      CHECK(unknown.code() == "not_found");
      auto bad_escape = co_await get(port, "/api/queues/%zz");
      CHECK(bad_escape.status == 400);
      co_await srv.stop();
    }
    {
      thoonk::admin::options o;
      o.read_only = true;
      running_server srv(c, o);
      auto r = co_await post(srv.port(), jobs_path(s.jobs, "/d1/retry"));
      CHECK(r.status == 405);
      CHECK(r.code() == "read_only");
      auto d = co_await get(srv.port(), jobs_path(s.jobs, "/d1"));
      CHECK(str(d.json, "state") == "dead");
      co_await srv.stop();
    }
    {
      thoonk::admin::options o;
      o.token = "0123456789abcdef-secret";
      running_server srv(c, o);
      const auto port = srv.port();
      auto none = co_await get(port, "/api/queues");
      CHECK(none.status == 401);
      CHECK(none.headers[http::field::www_authenticate] == "Bearer");
      auto wrong =
          co_await get(port, "/api/queues", hdr("Authorization", "Bearer 0123456789abcdef-secreT"));
      CHECK(wrong.status == 401);
      auto prefix =
          co_await get(port, "/api/queues", hdr("Authorization", "Bearer 0123456789abcdef"));
      CHECK(prefix.status == 401);
      auto basic =
          co_await get(port, "/api/queues", hdr("Authorization", "Basic 0123456789abcdef-secret"));
      CHECK(basic.status == 401);
      auto right = co_await get(port, "/api/queues", hdr("Authorization", "Bearer " + o.token));
      CHECK(right.status == 200);
      auto write = co_await post(port, "/api/queues/" + s.jobs + "/pause", "{}");
      CHECK(write.status == 401);
      auto page = co_await get(port, "/");  // the page holds no data
      CHECK(page.status == 200);
      co_await srv.stop();
    }
    // Options refused before anything is bound.
    auto refused = [&](thoonk::admin::options o) {
      thoonk::admin::server srv(c, o);
      auto ec = srv.listen();
      CHECK(srv.local_endpoint().port() == 0);
      return ec;
    };
    thoonk::admin::options open;
    open.address = "0.0.0.0";
    CHECK(refused(open) == thoonk::admin::errc::token_required);
    CHECK(refused(open).message().find("options::token") != std::string::npos);
    open.token = "short";
    CHECK(refused(open) == thoonk::admin::errc::token_too_short);
    thoonk::admin::options name;
    name.address = "localhost";
    CHECK(refused(name) == thoonk::admin::errc::invalid_address);
    thoonk::admin::options zero;
    zero.max_body_bytes = 0;
    CHECK(refused(zero) == thoonk::admin::errc::invalid_limit);
    thoonk::admin::options big;
    big.max_retry_batch = 5000;
    CHECK(refused(big) == thoonk::admin::errc::invalid_limit);
    {
      auto cluster_cfg = test_config();
      cluster_cfg.cluster = true;
      thoonk::client cc(ioc.get_executor(), cluster_cfg);  // never connected
      thoonk::admin::server on_cluster(cc, {});
      CHECK(on_cluster.listen() == thoonk::admin::errc::cluster_not_supported);
    }
    // The port is taken: bind's own error, and async_run reports it too.
    running_server first(c, {});
    thoonk::admin::options same;
    same.port = first.port();
    thoonk::admin::server second(c, same);
    auto [ec] = co_await second.async_run(asio::as_tuple(asio::use_awaitable));
    CHECK(ec == asio::error::address_in_use);
    co_await first.stop();
  });
}

TEST_CASE("admin: limits: body, headers, slow clients, bad HTTP, and a running async_run twice",
          "[admin][http][security]") {
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    thoonk::client c(ioc.get_executor(), test_config());
    co_await c.async_connect(asio::use_awaitable);
    auto s = co_await seed(c);
    thoonk::admin::options o;
    o.max_body_bytes = 100;
    o.max_header_bytes = 2000;
    o.max_header_fields = 10;
    o.request_timeout = 500ms;
    running_server srv(c, o);
    const auto port = srv.port();

    auto big = co_await post(port, "/api/queues/" + s.jobs + "/pause", std::string(200, ' '));
    CHECK(big.status == 413);
    auto long_header = co_await get(port, "/api/queues", hdr("X-Long", std::string(3000, 'a')));
    CHECK(long_header.status == 431);
    std::map<std::string, std::string> many;
    for (int i = 0; i < 12; ++i) many["X-H" + std::to_string(i)] = "v";
    auto fields = co_await get(port, "/api/queues", many);
    CHECK(fields.status == 431);
    CHECK(fields.code() == "too_many_headers");

    // Not HTTP: a 400 and the connection closed.
    {
      beast::tcp_stream raw(ioc.get_executor());
      raw.expires_after(5s);
      co_await raw.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
      std::string junk = "HELLO THERE\r\n\r\n";
      co_await asio::async_write(raw, asio::buffer(junk), asio::use_awaitable);
      beast::flat_buffer buf;
      http::response<http::string_body> res;
      co_await http::async_read(raw, buf, res, asio::use_awaitable);
      CHECK(res.result_int() == 400);
    }

    // A slowloris client: half a request, then nothing. The server cuts it
    // after request_timeout, and serves others meanwhile.
    beast::tcp_stream slow(ioc.get_executor());
    co_await slow.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
    std::string part = "GET /api/queues HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ";
    co_await asio::async_write(slow, asio::buffer(part), asio::use_awaitable);
    auto other = co_await get(port, "/api/queues/" + s.jobs);
    CHECK(other.status == 200);
    const auto t0 = std::chrono::steady_clock::now();
    char byte = 0;
    slow.expires_after(5s);
    auto [rec, n] =
        co_await slow.async_read_some(asio::buffer(&byte, 1), asio::as_tuple(asio::use_awaitable));
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(rec == asio::error::eof);  // closed by the server, not by our 5 s
    CHECK(waited < 3s);

    // A keep-alive connection serves several requests.
    {
      beast::tcp_stream ka(ioc.get_executor());
      ka.expires_after(5s);
      co_await ka.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
      beast::flat_buffer buf;
      for (int i = 0; i < 3; ++i) {
        http::request<http::empty_body> req{http::verb::get, "/api/queues/" + s.jobs, 11};
        req.set(http::field::host, "127.0.0.1");
        co_await http::async_write(ka, req, asio::use_awaitable);
        http::response<http::string_body> res;
        co_await http::async_read(ka, buf, res, asio::use_awaitable);
        CHECK(res.result_int() == 200);
      }
    }

    // The page and its files, with a policy that runs only the page's own
    // script.
    auto page = co_await get(port, "/");
    CHECK(page.status == 200);
    CHECK(page.headers[http::field::content_type] == "text/html; charset=utf-8");
    CHECK(std::string(page.headers["Content-Security-Policy"]).find("script-src 'self'") !=
          std::string::npos);
    CHECK(page.body.find("<script src=\"/app.js\"") != std::string::npos);
    auto js = co_await get(port, "/app.js");
    CHECK(js.status == 200);
    CHECK(js.body.find("textContent") != std::string::npos);
    CHECK(js.body.find("innerHTML") == std::string::npos);
    auto css = co_await get(port, "/style.css");
    CHECK(css.headers[http::field::content_type] == "text/css; charset=utf-8");
    auto nofile = co_await get(port, "/nothing.js");
    CHECK(nofile.status == 404);

    // A stop cuts connections still open (an idle keep-alive one here).
    beast::tcp_stream idle(ioc.get_executor());
    co_await idle.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
    {
      http::request<http::empty_body> req{http::verb::get, "/api/queues/" + s.jobs, 11};
      req.set(http::field::host, "127.0.0.1");
      co_await http::async_write(idle, req, asio::use_awaitable);
      beast::flat_buffer buf;
      http::response<http::string_body> res;
      co_await http::async_read(idle, buf, res, asio::use_awaitable);
      CHECK(res.result_int() == 200);
    }
    auto stopped = co_await srv.stop();
    CHECK(stopped == asio::error::operation_aborted);
    idle.expires_after(2s);
    char one = 0;
    auto [iec, in] =
        co_await idle.async_read_some(asio::buffer(&one, 1), asio::as_tuple(asio::use_awaitable));
    CHECK(iec == asio::error::eof);
    // Stopped: the port is closed.
    beast::tcp_stream after(ioc.get_executor());
    auto [cec] = co_await after.async_connect({asio::ip::make_address("127.0.0.1"), port},
                                              asio::as_tuple(asio::use_awaitable));
    CHECK(cec == asio::error::connection_refused);
  });
}

TEST_CASE(
    "admin: Redis errors come back as JSON with the server's words; an unreachable "
    "Redis is 503",
    "[admin][http][errors]") {
  asio::io_context ioc;
  thoonk::test::redis_server own;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        // A user who may not SSCAN: the listing fails with Redis's own text.
        thoonk::client root(ioc.get_executor(), url_config(own.url()));
        co_await root.async_connect(asio::use_awaitable);
        co_await cmd(root.conn(), "ACL", "SETUSER", "limited", "on", ">pw", "~*", "&*", "+@all",
                     "-sscan");
        auto cfg = url_config("redis://limited:pw@127.0.0.1:" + std::to_string(own.port()));
        cfg.request_timeout = 1s;
        cfg.connect_timeout = 1s;
        thoonk::client c(ioc.get_executor(), cfg);
        co_await c.async_connect(asio::use_awaitable);
        running_server srv(c, {});
        auto r = co_await get(srv.port(), "/api/queues");
        CHECK(r.status == 502);
        CHECK(r.code() == "server_error");
        auto server_text = r.json.at("error").at("server").as_string();
        CHECK(std::string(server_text).find("NOPERM") != std::string::npos);

        // Redis gone: 503, as JSON, within the request timeout.
        own.stop();
        auto down = co_await get(srv.port(), "/api/queues");
        CHECK(down.status == 503);
        CHECK(!down.code().empty());
        co_await srv.stop();
      },
      30s);
}

TEST_CASE("admin: /api/queues/{q}/events streams a queue's job events as Server-Sent Events",
          "[admin][http][events]") {
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    thoonk::client c(ioc.get_executor(), test_config());
    co_await c.async_connect(asio::use_awaitable);
    auto s = co_await seed(c);
    const std::string name = unique_name("adm-events");
    thoonk::job_queue::settings set;
    set.events = true;
    auto q = co_await thoonk::job_queue::async_create_or_open(c, name, set, asio::use_awaitable);
    running_server srv(c, {});
    const auto port = srv.port();

    // Not a job queue, or none: a JSON error, as for every route.
    auto missing = co_await get(port, "/api/queues/nope-" + name + "/events");
    CHECK(missing.status == 404);
    auto plain = co_await get(port, "/api/queues/" + s.plain + "/events");
    CHECK(plain.status == 409);

    beast::tcp_stream es(ioc.get_executor());
    es.expires_after(10s);
    co_await es.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
    std::string req = "GET /api/queues/" + name + "/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    co_await asio::async_write(es, asio::buffer(req), asio::use_awaitable);
    std::string got;
    co_await asio::async_read_until(es, asio::dynamic_buffer(got), "event: ready",
                                    asio::use_awaitable);
    co_await asio::async_read_until(es, asio::dynamic_buffer(got), "\n\n", asio::use_awaitable);
    CHECK(got.starts_with("HTTP/1.1 200"));
    CHECK(got.find("Content-Type: text/event-stream") != std::string::npos);
    CHECK(got.find("\"events\":true") != std::string::npos);

    // A put and a claim arrive as frames.
    thoonk::put_options o;
    o.id = "e1";
    co_await q.async_put("evt item", o, asio::use_awaitable);
    co_await asio::async_read_until(es, asio::dynamic_buffer(got), "\"kind\":\"put\"",
                                    asio::use_awaitable);
    CHECK(got.find("event: job\ndata: {\"kind\":\"put\",\"id\":\"e1\"") != std::string::npos);
    auto j = co_await q.async_claim(1s, asio::use_awaitable);
    co_await asio::async_read_until(es, asio::dynamic_buffer(got), "\"kind\":\"claimed\"",
                                    asio::use_awaitable);
    CHECK(j.id == "e1");

    // A queue without the events setting says so in its first frame.
    beast::tcp_stream quiet(ioc.get_executor());
    quiet.expires_after(10s);
    co_await quiet.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
    std::string req2 = "GET /api/queues/" + s.jobs + "/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    co_await asio::async_write(quiet, asio::buffer(req2), asio::use_awaitable);
    std::string got2;
    co_await asio::async_read_until(quiet, asio::dynamic_buffer(got2), "}\n\n",
                                    asio::use_awaitable);
    CHECK(got2.find("\"events\":false") != std::string::npos);

    // A stop ends the streams: both connections see the end.
    auto stopped = co_await srv.stop();
    CHECK(stopped == asio::error::operation_aborted);
    auto [e1, n1] = co_await asio::async_read(es, asio::dynamic_buffer(got),
                                              asio::as_tuple(asio::use_awaitable));
    CHECK(e1 == asio::error::eof);
    auto [e2, n2] = co_await asio::async_read(quiet, asio::dynamic_buffer(got2),
                                              asio::as_tuple(asio::use_awaitable));
    CHECK(e2 == asio::error::eof);
  });
}

TEST_CASE("admin: workers and the worker holding a job, from a running job runner",
          "[admin][http][workers]") {
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    thoonk::client c(ioc.get_executor(), test_config());
    co_await c.async_connect(asio::use_awaitable);
    const std::string name = unique_name("adm-workers");
    auto q = co_await thoonk::job_queue::async_create_or_open(c, name, {}, asio::use_awaitable);
    thoonk::put_options o;
    o.id = "r1";
    co_await q.async_put("for the runner", o, asio::use_awaitable);
    auto release = std::make_shared<bool>(false);
    thoonk::run_options ro;
    ro.worker_name = "adm-worker-1";
    ro.stop_timeout = 2s;
    asio::cancellation_signal stop_runner;
    bool runner_done = false;
    q.async_run(
        thoonk::job_coroutine(
            [release](thoonk::job_context ctx) { return hold_job(release, std::move(ctx)); }),
        ro,
        asio::bind_cancellation_slot(
            stop_runner.slot(),
            [&runner_done](boost::system::error_code, thoonk::run_report) { runner_done = true; }));
    running_server srv(c, {});
    const auto port = srv.port();
    // The runner claims r1 and holds it.
    bool claimed = co_await wait_until(
        [&]() -> asio::awaitable<bool> {
          auto j = co_await q.async_get_job("r1", asio::use_awaitable);
          co_return j && j->state == thoonk::job_state::claimed;
        },
        10s);
    REQUIRE(claimed);
    auto ws = co_await get(port, "/api/queues/" + name + "/workers");
    REQUIRE(ws.status == 200);
    REQUIRE(ws.json.at("workers").as_array().size() == 1);
    const auto& w = ws.json.at("workers").at(0);
    CHECK(w.at("name").as_string() == "adm-worker-1");
    CHECK(w.at("alive").as_bool());
    CHECK(w.at("last_heartbeat").as_int64() > 0);
    REQUIRE(w.at("claims").as_array().size() == 1);
    CHECK(w.at("claims").at(0).as_string() == "r1");
    CHECK(std::string(w.at("description").as_string()).find("pid") != std::string::npos);
    auto j = co_await get(port, jobs_path(name, "/r1"));
    CHECK(str(j.json, "worker") == "adm-worker-1");
    auto qs = co_await get(port, "/api/queues/" + name);
    CHECK(qs.json.at("workers").as_int64() == 1);

    // Finished: its kept result is what the job's page shows.
    *release = true;
    bool finished = co_await wait_until(
        [&]() -> asio::awaitable<bool> {
          auto gone = co_await q.async_get_job("r1", asio::use_awaitable);
          co_return !gone.has_value();
        },
        10s);
    REQUIRE(finished);
    auto done = co_await get(port, jobs_path(name, "/r1"));
    CHECK(done.status == 200);
    CHECK(str(done.json, "state") == "finished");
    CHECK(str(done.json, "result") == "result of r1");
    stop_runner.emit(asio::cancellation_type::terminal);
    bool ended = co_await wait_until([&] { return runner_done; }, 10s);
    CHECK(ended);
    co_await srv.stop();
  });
}

TEST_CASE("admin: max_connections: a connection beyond it waits until one closes",
          "[admin][http][security]") {
  asio::io_context ioc;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    thoonk::client c(ioc.get_executor(), test_config());
    co_await c.async_connect(asio::use_awaitable);
    thoonk::admin::options o;
    o.max_connections = 1;
    o.request_timeout = 600ms;
    running_server srv(c, o);
    const auto port = srv.port();
    // A connection that sends nothing holds the only slot until the
    // request timeout cuts it; the next request is served after that.
    beast::tcp_stream idle(ioc.get_executor());
    co_await idle.async_connect({asio::ip::make_address("127.0.0.1"), port}, asio::use_awaitable);
    co_await sleep_for(100ms);  // accepted before the next one arrives
    const auto t0 = std::chrono::steady_clock::now();
    auto r = co_await get(port, "/api/queues");
    const auto waited = std::chrono::steady_clock::now() - t0;
    CHECK(r.status == 200);
    CHECK(waited >= 400ms);
    CHECK(waited < 5s);
    co_await srv.stop();
  });
}
