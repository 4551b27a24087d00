// The least-privilege ACL roles of docs/security.md ("ACL roles"), made on
// the test server with ACL SETUSER exactly as the page shows them: each role
// can do its work, and what it may not do fails with the error naming the
// permission, changes nothing (raw key dumps before and after), does not
// hang and does not make the connection reconnect.
#include "support/acl.hpp"
#include "support/doc_snippet.hpp"
#include "support/helpers.hpp"
#include "support/runner.hpp"
#include "thoonk_lua_scripts.hpp"

#include <thoonk/diagnostics.hpp>

#include <cctype>
#include <map>
#include <optional>
#include <sstream>

using namespace thoonk::test;
using E = thoonk::error;

namespace {

// acl-roles-begin
// ACL SETUSER <user> on ><password> followed by these rules (Redis 7.0+).
// Every role: the connection's setup and health check (+role: the
// primary check with several addresses, config::endpoints), and the scripts
// (as functions; EVALSHA where FCALL or FUNCTION LOAD is not granted).
const std::string acl_connection = "+hello +auth +ping +client|setname +select +role";
const std::string acl_scripts = "+fcall +function|load +evalsha +script|load";
// The commands of the library's scripts and reads.
const std::string acl_reads =
    "+exists +get +hexists +hget +hgetall +hkeys +hlen +hmget +hscan +lindex +llen +lpos "
    "+lrange +scard +sismember +smembers +sscan +time +zcard +zrange +zrangebyscore +zscore";
const std::string acl_writes =
    "+del +hdel +hincrby +hset +incr +incrby +linsert +lpush +lrem +pexpire +rpop +rpush +sadd "
    "+set +srem +unlink +zadd +zrem +zremrangebyrank";
// What each role adds to acl_connection, acl_scripts and acl_reads.
const std::map<std::string, std::string> acl_roles{
    // Publishes to feeds, puts queue items and jobs.
    // (job.take: the hand-off of its jobs to waiting claimers.)
    {"producer", acl_writes + " +publish resetchannels ~feed.* &feed.publish:* &feed.retract:* "
                              "&feed.edit:* &feed.position:* &feed.wake:* &job.take:*"},
    // Claims, finishes (with results), stalls, retries, cancels; waits for
    // wake-ups, hand-offs and results.
    {"worker", acl_writes + " +publish +subscribe +unsubscribe resetchannels ~feed.* &feed.wake:* "
                            "&job.finish:* &job.abort:* &job.event:* &job.take:*"},
    // Reads feeds and subscribes to them, catch-up included (its marker is
    // a PUBLISH on the client's own thoonk.sync channel). No write command.
    {"feed_subscriber",
     "+publish +subscribe +unsubscribe +psubscribe +punsubscribe "
     "resetchannels ~feed.* &feed.publish:* &feed.retract:* &feed.edit:* "
     "&feed.position:* &thoonk.sync:*"},
    // Creates, configures and deletes feeds (the `feeds` index, newfeed,
    // delfeed, conffeed), and everything the others do.
    {"admin", acl_writes +
                  " +publish +subscribe +unsubscribe +psubscribe +punsubscribe resetchannels "
                  "~feeds ~feed.* &newfeed &delfeed &conffeed &feed.* &job.* &thoonk.sync:*"},
};
// acl-roles-end

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

std::vector<std::string> role_rules(const std::string& role) {
  auto out = words(acl_connection);
  for (const auto* part : {&acl_scripts, &acl_reads, &acl_roles.at(role)})
    for (auto& w : words(*part)) out.push_back(std::move(w));
  return out;
}

// A user of one role, with its own connected client.
struct role_user {
  std::string name = unique_name("role");
  std::string pass = "pw-" + unique_name("x");
  thoonk::config config() const {
    auto cfg = named_config("thoonk-role-test");
    cfg.username = name;
    cfg.password = pass;
    return cfg;
  }
};

// Every raw key of a feed or queue, rendered whatever its type.
asio::awaitable<std::string> dump_keys(thoonk::connection& c, std::string name) {
  auto ks = co_await cmd(c, "KEYS", "feed.*:" + name + "*");
  std::vector<std::string> keys;
  for (auto& k : ks.elements) keys.push_back(k.str);
  std::sort(keys.begin(), keys.end());
  std::string out;
  for (const auto& k : keys) {
    auto d = co_await cmd(c, "DUMP", k);
    out += k + "=" + d.str + "\n";
  }
  auto member = co_await cmd(c, "SISMEMBER", "feeds", name);
  out += "member=" + std::to_string(member.integer);
  co_return out;
}

// Runs `body(admin, user_client)` with a user of `rules`, then checks the
// user's connection never reconnected (a refusal is an answer, not a lost
// connection) and is still up.
template <class Body>
void as_user(std::vector<std::string> rules, Body body) {
  asio::io_context ioc;
  thoonk::client admin(ioc.get_executor(), named_config("thoonk-role-admin"));
  role_user user;
  std::optional<thoonk::client> uc;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await admin.async_connect(asio::use_awaitable);
        std::vector<std::string> all{"reset", "on", ">" + user.pass};
        for (auto& r : rules) all.push_back(std::move(r));
        co_await acl_setuser(admin.conn(), user.name, std::move(all));
        uc.emplace(ioc.get_executor(), user.config());
        co_await uc->async_connect(asio::use_awaitable);
        co_await body(admin, *uc);
        CHECK(uc->conn().is_connected());
        CHECK(uc->conn().stats().reconnects == 0);
        CHECK(uc->conn().stats().client_name_refusals == 0);
        uc->stop();
        co_await cmd(admin.conn(), "ACL", "DELUSER", user.name);
        admin.stop();
      },
      30s);
}

}  // namespace

TEST_CASE("acl roles: docs/security.md shows the rules the tests use", "[acl][acl_roles]") {
  check_tutorial_shown(__FILE__, "docs/security.md", "acl-roles");
}

TEST_CASE(
    "acl roles: a producer publishes and puts, and may not manage feeds or finish "
    "with results",
    "[acl][acl_roles][publish][put][create_feed][delete_feed][finish]") {
  as_user(
      role_rules("producer"),
      [](thoonk::client& admin, thoonk::client& uc) -> asio::awaitable<void> {
        const auto fname = unique_name("role-feed");
        const auto jname = unique_name("role-jobs");
        const auto qname = unique_name("role-queue");
        co_await admin.async_create_feed(fname, thoonk::feed_type::feed, {}, asio::use_awaitable);
        co_await admin.async_create_feed(jname, thoonk::feed_type::job, {}, asio::use_awaitable);
        co_await admin.async_create_feed(qname, thoonk::feed_type::queue, {}, asio::use_awaitable);

        // Its work.
        thoonk::feed f(uc, fname);
        auto r = co_await f.async_publish(thoonk::item_id("a"), "x", asio::use_awaitable);
        CHECK(!r.edited);
        auto r2 = co_await f.async_publish(thoonk::item_id("a"), "y", asio::use_awaitable);
        CHECK(r2.edited);
        thoonk::job_queue jq(uc, jname);
        auto jid = co_await put_item(jq, "job");
        CHECK(!jid.empty());
        thoonk::queue q(uc, qname);
        auto qid = co_await put_item(q, "item");
        CHECK(!qid.empty());

        // Not its work: feed management (the `feeds` index is not its key).
        const auto other = unique_name("role-new");
        const auto before_new = co_await dump_keys(admin.conn(), other);
        thoonk::diagnostics diag;
        auto [cec] = co_await uc.async_create_feed(other, thoonk::feed_type::feed, {},
                                                   thoonk::capture_diagnostics(diag, nothrow));
        CHECK(cec == E::no_key_permission);
        CHECK(diag.server_message().starts_with("NOPERM"));
        auto keys_now_1 = co_await dump_keys(admin.conn(), other);
        CHECK(keys_now_1 == before_new);
        const auto before_del = co_await dump_keys(admin.conn(), fname);
        auto [dec] = co_await uc.async_delete_feed(fname, nothrow);
        CHECK(dec == E::no_key_permission);
        auto [sec] = co_await uc.async_set_config(fname, "max_length", "3", nothrow);
        CHECK(sec == E::no_key_permission);
        auto keys_now_2 = co_await dump_keys(admin.conn(), fname);
        CHECK(keys_now_2 == before_del);

        // A finish with a result is a worker's: job.finish is not its channel.
        thoonk::job_queue ajq(admin, jname);
        auto job = co_await ajq.async_claim(1s, asio::use_awaitable);
        const auto before_finish = co_await dump_keys(admin.conn(), jname);
        auto [fec] = co_await jq.async_finish(job, std::string("result"), nothrow);
        CHECK(fec == E::no_channel_permission);
        auto keys_now_3 = co_await dump_keys(admin.conn(), jname);
        CHECK(keys_now_3 == before_finish);
        co_await ajq.async_finish(job, asio::use_awaitable);

        // Still working after the refusals.
        auto r3 = co_await f.async_publish(thoonk::item_id("b"), "z", asio::use_awaitable);
        CHECK(!r3.edited);
        for (const auto* n : {&fname, &jname, &qname})
          co_await admin.async_delete_feed(*n, asio::use_awaitable);
      });
}

TEST_CASE(
    "acl roles: a worker claims, finishes and waits for results, and may not publish "
    "to feeds",
    "[acl][acl_roles][claim][finish][get_result][stall][retry][publish]") {
  as_user(role_rules("worker"),
          [](thoonk::client& admin, thoonk::client& uc) -> asio::awaitable<void> {
            const auto jname = co_await make_feed(admin, "role-jobs", thoonk::feed_type::job);
            const auto fname = co_await make_feed(admin, "role-feed", thoonk::feed_type::feed);
            thoonk::job_queue ajq(admin, jname);
            thoonk::job_queue jq(uc, jname);

            // Its work: a claim that waits (SUBSCRIBE feed.wake) is woken by a put.
            std::optional<thoonk::claimed_job> got;
            asio::co_spawn(
                uc.get_executor(),
                [&]() -> asio::awaitable<void> {
                  auto [ec, j] = co_await jq.async_claim(10s, nothrow);
                  CHECK(!ec);
                  if (!ec) got = j;
                },
                asio::detached);
            // The claimer sleeps (its subscription to feed.wake is up) ...
            auto sleeping = co_await wait_until([&]() -> asio::awaitable<bool> {
              auto sleepers = co_await cmd(admin.conn(), "EXISTS", key("sleepers", jname));
              co_return sleepers.integer == 1;
            });
            CHECK(sleeping);
            auto id = co_await put_item(ajq, "work");
            auto arrived_4 = co_await wait_until([&] { return got.has_value(); });
            CHECK(arrived_4);
            REQUIRE(got);
            CHECK(got->id == id);
            co_await jq.async_heartbeat(*got, asio::use_awaitable);
            co_await jq.async_stall(*got, asio::use_awaitable);
            co_await jq.async_retry(got->id, asio::use_awaitable);
            auto again = co_await jq.async_claim(1s, asio::use_awaitable);
            co_await jq.async_finish(again, std::string("done"), asio::use_awaitable);
            auto res = co_await jq.async_get_result(again.id, 1s, asio::use_awaitable);
            CHECK(res == "done");

            // The runner (job_queue::run) works with the role's rules: it
            // registers, claims, finishes and stops.
            co_await ajq.async_put("run me", asio::use_awaitable);
            thoonk::job_coroutine noop =
                [](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
              co_return std::nullopt;
            };
            thoonk::run_options ro;
            ro.concurrency = 1;
            auto run = start_run(jq, noop, ro);
            auto ran = co_await wait_finishes(ajq, 2);
            CHECK(ran);
            co_await stop_run_cleanly(*run);
            CHECK(run->report.finished == 1);
            auto workers = co_await ajq.async_get_workers(asio::use_awaitable);
            CHECK(workers.empty());

            // Not its work: publishing to a feed, creating one.
            thoonk::feed f(uc, fname);
            const auto before = co_await dump_keys(admin.conn(), fname);
            auto [pec, pr] = co_await f.async_publish(thoonk::item_id("a"), "x", nothrow);
            CHECK(pec == E::no_channel_permission);
            auto keys_now_5 = co_await dump_keys(admin.conn(), fname);
            CHECK(keys_now_5 == before);
            const auto other = unique_name("role-new");
            auto [cec] = co_await uc.async_create_feed(other, thoonk::feed_type::job, {}, nothrow);
            CHECK(cec == E::no_key_permission);
            auto keys_now_6 = co_await dump_keys(admin.conn(), other);
            CHECK(keys_now_6 == "member=0");
            co_await admin.async_delete_feed(jname, asio::use_awaitable);
            co_await admin.async_delete_feed(fname, asio::use_awaitable);
          });
}

TEST_CASE("acl roles: a feed subscriber reads and follows a feed, and may not change it",
          "[acl][acl_roles][subscribe][get_all][publish][put]") {
  as_user(
      role_rules("feed_subscriber"),
      [](thoonk::client& admin, thoonk::client& uc) -> asio::awaitable<void> {
        const auto fname = unique_name("role-feed");
        const auto jname = unique_name("role-jobs");
        co_await admin.async_create_feed(fname, thoonk::feed_type::feed, {}, asio::use_awaitable);
        co_await admin.async_create_feed(jname, thoonk::feed_type::job, {}, asio::use_awaitable);
        thoonk::feed af(admin, fname);
        co_await af.async_publish(thoonk::item_id("old"), "1", asio::use_awaitable);

        // Its work: read, and subscribe with catch-up.
        thoonk::feed f(uc, fname);
        auto all = co_await f.async_get_all(asio::use_awaitable);
        CHECK(all.size() == 1);
        std::vector<std::string> seen;
        thoonk::feed_subscribe_options o;
        o.catch_up = true;
        o.resume_from = 0;
        auto sub = co_await f.async_subscribe(
            [&](const thoonk::feed_event& e) { seen.emplace_back(e.id); }, o, asio::use_awaitable);
        co_await af.async_publish(thoonk::item_id("new"), "2", asio::use_awaitable);
        auto arrived_7 = co_await wait_until([&] { return seen.size() >= 2; });
        CHECK(arrived_7);
        CHECK(seen == std::vector<std::string>{"old", "new"});

        // Not its work: any change (refused at the script's first write).
        const auto before = co_await dump_keys(admin.conn(), fname);
        auto [pec, pr] = co_await f.async_publish(thoonk::item_id("x"), "3", nothrow);
        CHECK(pec == E::no_permission);
        auto [rec, gone] = co_await f.async_retract("old", nothrow);
        CHECK(rec == E::no_permission);
        auto keys_now_8 = co_await dump_keys(admin.conn(), fname);
        CHECK(keys_now_8 == before);
        const auto jbefore = co_await dump_keys(admin.conn(), jname);
        thoonk::job_queue jq(uc, jname);
        auto [jec, jid] = co_await jq.async_put("x", nothrow);
        CHECK((jec == E::no_permission || jec == E::no_channel_permission));
        auto keys_now_9 = co_await dump_keys(admin.conn(), jname);
        CHECK(keys_now_9 == jbefore);
        // Nor a job's channels.
        auto [sec, s] = co_await uc.sub().async_subscribe(
            "job.finish:" + jname, [](const thoonk::message&) {}, nothrow);
        CHECK(sec == E::subscribe_refused);
        co_await admin.async_delete_feed(fname, asio::use_awaitable);
        co_await admin.async_delete_feed(jname, asio::use_awaitable);
      });
}

TEST_CASE("acl roles: an admin manages feeds", "[acl][acl_roles][create_feed][delete_feed]") {
  as_user(role_rules("admin"),
          [](thoonk::client& admin, thoonk::client& uc) -> asio::awaitable<void> {
            const auto name = unique_name("role-admin");
            co_await uc.async_create_feed(name, thoonk::feed_type::feed, {}, asio::use_awaitable);
            co_await uc.async_set_config(name, "max_length", "3", asio::use_awaitable);
            auto v = co_await uc.async_get_config(name, "max_length", asio::use_awaitable);
            CHECK(v == "3");
            auto names = co_await uc.async_list_feeds(asio::use_awaitable);
            CHECK(std::find(names.begin(), names.end(), name) != names.end());
            co_await uc.async_delete_feed(name, asio::use_awaitable);
            auto keys_now_10 = co_await dump_keys(admin.conn(), name);
            CHECK(keys_now_10 == "member=0");
          });
}

TEST_CASE(
    "acl roles: after SCRIPT FLUSH a user without SCRIPT LOAD runs scripts with EVAL, "
    "or learns why it cannot",
    "[acl][acl_roles][scripts][publish]") {
  // Both users: a producer whose scripts can only be reached by EVALSHA
  // (and, for the first, EVAL).
  auto base = role_rules("producer");
  std::erase(base, "+script|load");
  std::erase(base, "+fcall");  // the EVALSHA path (the first call learns it)
  SECTION("EVAL allowed: the operation works, once") {
    auto rules = base;
    rules.push_back("+eval");
    as_user(rules, [](thoonk::client& admin, thoonk::client& uc) -> asio::awaitable<void> {
      const auto name = unique_name("role-flush");
      co_await admin.async_create_feed(name, thoonk::feed_type::feed, {}, asio::use_awaitable);
      co_await cmd(admin.conn(), "SCRIPT", "FLUSH");
      thoonk::feed f(uc, name);
      auto r = co_await f.async_publish(thoonk::item_id("a"), "x", asio::use_awaitable);
      CHECK(!r.edited);
      auto n = co_await cmd(admin.conn(), "ZCARD", key("ids", name));
      CHECK(n.integer == 1);
      // EVAL cached the script: the next call is a plain EVALSHA again.
      auto r2 = co_await f.async_publish(thoonk::item_id("b"), "y", asio::use_awaitable);
      CHECK(!r2.edited);
      co_await admin.async_delete_feed(name, asio::use_awaitable);
    });
  }
  SECTION("neither SCRIPT LOAD nor EVAL: no_script_permission naming both, nothing changed") {
    as_user(base, [](thoonk::client& admin, thoonk::client& uc) -> asio::awaitable<void> {
      const auto name = unique_name("role-flush");
      co_await admin.async_create_feed(name, thoonk::feed_type::feed, {}, asio::use_awaitable);
      co_await cmd(admin.conn(), "SCRIPT", "FLUSH");
      const auto before = co_await dump_keys(admin.conn(), name);
      thoonk::feed f(uc, name);
      thoonk::diagnostics diag;
      auto [ec, r] = co_await f.async_publish(thoonk::item_id("a"), "x",
                                              thoonk::capture_diagnostics(diag, nothrow));
      CHECK(ec == E::no_script_permission);
      INFO(diag.server_message());
      CHECK(diag.server_message().find("NOSCRIPT") != std::string::npos);
      CHECK(diag.server_message().find("script|load") != std::string::npos);
      CHECK(diag.server_message().find("'eval'") != std::string::npos);
      auto keys_now_11 = co_await dump_keys(admin.conn(), name);
      CHECK(keys_now_11 == before);
      // Once someone loads the script (here the admin, by hand: the admin's
      // own publish runs as a function and leaves the script cache alone),
      // it works.
      thoonk::feed af(admin, name);
      co_await af.async_publish(thoonk::item_id("b"), "y", asio::use_awaitable);
      co_await cmd(admin.conn(), "SCRIPT", "LOAD",
                   thoonk::detail::scripts::feeds_publish().source());
      auto r2 = co_await f.async_publish(thoonk::item_id("a"), "x", asio::use_awaitable);
      CHECK(!r2.edited);
      co_await admin.async_delete_feed(name, asio::use_awaitable);
    });
  }
}

TEST_CASE("acl: a user denied one command a script runs is refused before the script writes",
          "[acl][acl_roles][fail][put][finish][register_worker]") {
  // Every command but one: Redis would refuse it only when the script got
  // there, after its first writes (fail() runs HDEL on the job's item
  // before the ZADD that schedules its retry).
  for (const char* denied : {"zadd", "hset", "lpush", "hdel"}) {
    INFO(denied);
    as_user({"+@all", std::string("-") + denied, "~*", "&*"},
            [denied](thoonk::client& admin, thoonk::client& uc) -> asio::awaitable<void> {
              const auto jname = co_await make_feed(admin, "role-deny", thoonk::feed_type::job);
              thoonk::job_queue ajq(admin, jname);
              thoonk::job_queue jq(uc, jname);
              co_await ajq.async_put("a", asio::use_awaitable);
              auto job = co_await ajq.async_claim(1s, asio::use_awaitable);
              const auto before = co_await dump_keys(admin.conn(), jname);
              std::string named = "may not run ";
              for (const char* ch = denied; *ch; ++ch)
                named += static_cast<char>(std::toupper(static_cast<unsigned char>(*ch)));

              thoonk::diagnostics diag;
              auto [fec, fr] =
                  co_await jq.async_fail(job, "boom", thoonk::capture_diagnostics(diag, nothrow));
              CHECK(fec == E::no_permission);
              CHECK(diag.server_message().find(named) != std::string::npos);
              auto [rec] = co_await jq.async_finish(job, std::string("result"), nothrow);
              CHECK(rec == E::no_permission);
              auto [pec, pid] = co_await jq.async_put("b", nothrow);
              CHECK(pec == E::no_permission);
              auto after = co_await dump_keys(admin.conn(), jname);
              CHECK(after == before);

              // A runner's start is refused whole: no registration is left
              // to block its name.
              thoonk::job_coroutine noop =
                  [](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
                co_return std::nullopt;
              };
              thoonk::run_options ro;
              ro.worker_name = "denied-worker";
              auto run = start_run(jq, noop, ro);
              auto ended = co_await wait_until([&] { return run->done; }, 10s);
              CHECK(ended);
              CHECK(run->ec == E::no_permission);
              auto workers = co_await ajq.async_get_workers(asio::use_awaitable);
              CHECK(workers.empty());

              co_await ajq.async_finish(job, asio::use_awaitable);
              co_await admin.async_delete_feed(jname, asio::use_awaitable);
            });
  }
}
