// Config values the library reads are validated by create_feed, set_config
// and set_config_json (error::invalid_argument, nothing written); values
// written with plain commands that validation would refuse are read as the
// defaults by the job scripts. docs/jobs.md §1, docs/feeds.md §2.
#include "support/helpers.hpp"

#include <boost/json/value.hpp>

using namespace thoonk::test;
using thoonk::test::run_coro;
using thoonk::test::sleep_for;
using thoonk::test::unique_name;

namespace {

struct field_case {
  std::string field;
  std::vector<std::string> bad;  // a bad type, a negative, out of range
  std::string good;
};

const std::vector<field_case>& field_cases() {
  static const std::vector<field_case> c{
      {"claim_timeout_ms", {"banana", "-3", "0", "9007199254740992", "1.5"}, "1500"},
      {"max_stalls", {"banana", "-3", "0", "9007199254740992", "2e3"}, "1"},
      {"max_retries", {"banana", "0", "9007199254740992", "1.0"}, "10"},
      {"min_backoff_ms", {"banana", "-1", "9007199254740992"}, "0"},
      {"max_backoff_ms", {"banana", "-1", "1e5"}, "300000"},
      {"events", {"banana", "2", "yes"}, "1"},
      {"result_ttl_ms", {"banana", "-3", "0", "9007199254740992", " 60000"}, "60000"},
      {"published", {"banana", "-1", "2", "true"}, "1"},
      {"max_length", {"banana", "-3", "9007199254740992"}, "10"},
      {"retraction_log", {"banana", "-3", "9007199254740992"}, "0"},
  };
  return c;
}

}  // namespace

FIXTURE_TEST_CASE(
    "jobs-config",
    "job config: every field the library reads is validated by create_feed and set_config",
    "[job][config][create_feed][delete_feed][get_config][set_config][set_config_json]") {
  co_await f.c.async_connect(asio::use_awaitable);
  for (const auto& fc : field_cases()) {
    for (const auto& bad : fc.bad) {
      INFO(fc.field << " = '" << bad << "'");
      // create_feed: refused before any I/O, no feed made.
      const auto name = unique_name("jobs-config-create");
      const thoonk::feed_config cfg{{fc.field, bad}};
      auto [ec] = co_await f.c.async_create_feed(name, thoonk::feed_type::job, cfg, nothrow);
      CHECK(ec == thoonk::error::invalid_argument);
      auto member = co_await cmd(f.c.conn(), "SISMEMBER", "feeds", name);
      CHECK(member.integer == 0);
    }
    // A good value is accepted and stored.
    const auto name = unique_name("jobs-config");
    const thoonk::feed_config good{{fc.field, fc.good}};
    co_await f.c.async_create_feed(name, thoonk::feed_type::job, good, asio::use_awaitable);
    auto stored = co_await f.c.async_get_config(name, fc.field, asio::use_awaitable);
    CHECK(stored == fc.good);
    for (const auto& bad : fc.bad) {
      INFO(fc.field << " = '" << bad << "'");
      // set_config: refused, the stored value unchanged.
      auto [ec] = co_await f.c.async_set_config(name, fc.field, bad, nothrow);
      CHECK(ec == thoonk::error::invalid_argument);
      auto now = co_await f.c.async_get_config(name, fc.field, asio::use_awaitable);
      CHECK(now == fc.good);
    }
    // set_config_json stores JSON text: a JSON string or boolean is not an
    // integer; a JSON number is.
    auto [je1] =
        co_await f.c.async_set_config_json(name, fc.field, boost::json::value("5"), nothrow);
    CHECK(je1 == thoonk::error::invalid_argument);
    auto [je2] =
        co_await f.c.async_set_config_json(name, fc.field, boost::json::value(true), nothrow);
    CHECK(je2 == thoonk::error::invalid_argument);
    auto [je3] =
        co_await f.c.async_set_config_json(name, fc.field, boost::json::value(-3), nothrow);
    CHECK(je3 == thoonk::error::invalid_argument);
    auto [je4] = co_await f.c.async_set_config_json(name, fc.field, boost::json::value(1), nothrow);
    CHECK(!je4);
    auto now = co_await f.c.async_get_config(name, fc.field, asio::use_awaitable);
    CHECK(now == "1");
    co_await f.c.async_delete_feed(name, asio::use_awaitable);
  }
}

FIXTURE_TEST_CASE("jobs-config",
                  "job config: a validated claim_timeout_ms and max_stalls take effect",
                  "[job][config][claim][create_feed][maintain][put][set_config]") {
  co_await f.c.async_connect(asio::use_awaitable);
  const thoonk::feed_config cfg{{"claim_timeout_ms", "60000"}};
  co_await f.c.async_create_feed(f.name, thoonk::feed_type::job, cfg, asio::use_awaitable);
  // "banana" is refused, not stored (a stored one would read as 60000).
  auto [ec] = co_await f.c.async_set_config(f.name, "claim_timeout_ms", "banana", nothrow);
  CHECK(ec == thoonk::error::invalid_argument);
  co_await f.c.async_set_config(f.name, "claim_timeout_ms", "50", asio::use_awaitable);
  co_await f.c.async_set_config(f.name, "max_stalls", "1", asio::use_awaitable);
  thoonk::job_queue q(f.c, f.name);
  auto id = co_await put_item(q, "x");
  co_await q.async_claim(1s, asio::use_awaitable);
  co_await sleep_for(120ms);
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.stalled == 1);  // max_stalls 1: the first lapse makes it a dead letter
  co_await expect_only_stalled(f, q, id);
}

FIXTURE_TEST_CASE(
    "jobs-config",
    "job config: values written with plain commands that validation refuses read as defaults",
    "[job][config][claim][finish][get_result][maintain][put_many]") {
  co_await f.c.async_connect(asio::use_awaitable);
  // A contract client (plain HSET) writes values create_feed would refuse.
  fields cfg{{"claim_timeout_ms", "-5"}, {"max_stalls", "-3"}, {"result_ttl_ms", "1.5"}};
  co_await create_feed(f.c.conn(), f.name, "job", cfg);
  thoonk::job_queue q(f.c, f.name);
  std::vector<std::string> items{"a", "b"};
  co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);

  // result_ttl_ms "1.5" is read as the default 300000: a fraction would
  // make the finish fail in PEXPIRE after its writes (job gone, no result).
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  auto [fec] = co_await q.async_finish(j, std::string("done"), nothrow);
  CHECK(!fec);
  const std::string rkey = key("jobfinished", f.name) + std::string(1, '\0') + j.id;
  auto ttl = co_await cmd(f.c.conn(), "PTTL", rkey);
  CHECK(ttl.integer > 200000);
  CHECK(ttl.integer <= 300000);
  auto res = co_await q.async_get_result(j.id, 1s, asio::use_awaitable);
  CHECK(res == "done");

  // claim_timeout_ms "-5" and max_stalls "-3" are read as the defaults,
  // 60000 and 3: taken as they are, every claim would lapse at once and be
  // dead-lettered.
  auto j2 = co_await q.async_claim(1s, asio::use_awaitable);
  co_await sleep_for(20ms);
  auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(rep.requeued == 0);
  CHECK(rep.stalled == 0);
  CHECK(rep.counts.claimed == 1);
  co_await q.async_finish(j2, asio::use_awaitable);
}

namespace {

// Values of claim_timeout_ms that are not plain decimal integers in range,
// each one tonumber() in a script reads as a number (1000, 16, 5, 5, 1e20,
// 1000, 1000, 1000): the library reads every one as unset, in C++ and in
// the scripts, so the default lease (60 s) applies.
const std::vector<std::string>& config_not_plain_values() {
  static const std::vector<std::string> v{"1e3",   "0x10",  " 5",  "5.0", "99999999999999999999",
                                          "+1000", "1000 ", "1E3", "-0"};
  return v;
}

// A job queue made with plain commands, with claim_timeout_ms = value, and
// one job claimed from it.
struct plain_lease {
  std::string value;
  std::string name;
  thoonk::job_queue q;
  thoonk::claimed_job job;
  std::optional<std::chrono::milliseconds> read;  // read_settings' claim_timeout
};

asio::awaitable<plain_lease> claimed_under(fixture& f, std::string value) {
  plain_lease p;
  p.value = value;
  p.name = unique_name("jobs-config-plain");
  const fields cfg{{"claim_timeout_ms", std::move(value)}};
  co_await create_feed(f.c.conn(), p.name, "job", cfg);
  p.q = thoonk::job_queue(f.c, p.name);
  auto s = co_await p.q.async_read_settings(asio::use_awaitable);
  p.read = s.claim_timeout;
  co_await p.q.async_put("x", asio::use_awaitable);
  p.job = co_await p.q.async_claim(1s, asio::use_awaitable);
  co_return p;
}

}  // namespace

FIXTURE_TEST_CASE_WITHIN(
    30s, "jobs-config",
    "job config: a claim_timeout_ms that is no plain decimal integer ('1e3', '0x10', ' 5', "
    "'5.0', too large) is the default for read_settings and for the scripts alike",
    "[job][config][read_settings][claim][maintain][heartbeat]") {
  co_await f.c.async_connect(asio::use_awaitable);
  std::vector<plain_lease> leases;
  for (const auto& v : config_not_plain_values()) {
    auto p = co_await claimed_under(f, v);
    leases.push_back(std::move(p));
  }
  // The control: a plain "1000" is 1000 ms on both sides, and lapses.
  auto control = co_await claimed_under(f, "1000");
  CHECK(control.read == std::chrono::milliseconds(1000));

  // Wait (on the clock the claim times are stored by) until every claim is
  // 1.5 s old: past 1000 ms, far from 60 s.
  // The control's claim is the newest.
  auto score = co_await cmd(f.c.conn(), "ZSCORE", key("claimed", control.name), control.job.id);
  const auto newest = static_cast<thoonk::epoch_ms>(
      score.type == thoonk::resp3::type::double_number ? score.dbl : std::stod(score.str));
  auto old_enough = co_await wait_until([&] { return thoonk::now_epoch_ms() > newest + 1500; });
  REQUIRE(old_enough);

  auto lapsed = co_await control.q.async_maintain(no_stats(), asio::use_awaitable);
  CHECK(lapsed.requeued == 1);  // the wait was long enough for a 1000 ms lease
  for (auto& p : leases) {
    INFO("claim_timeout_ms = '" << p.value << "'");
    CHECK(!p.read);  // read_settings: unset, the default
    auto rep = co_await p.q.async_maintain(no_stats(), asio::use_awaitable);
    CHECK(rep.requeued == 0);
    CHECK(rep.stalled == 0);
    CHECK(rep.counts.claimed == 1);
    // Still claimed by the same token.
    auto [hb] = co_await p.q.async_heartbeat(p.job, nothrow);
    CHECK(!hb);
    auto [fin] = co_await p.q.async_finish(p.job, nothrow);
    CHECK(!fin);
  }
  co_await f.c.async_delete_feed(control.name, asio::use_awaitable);
  for (auto& p : leases) co_await f.c.async_delete_feed(p.name, asio::use_awaitable);
}

FIXTURE_TEST_CASE("jobs-config",
                  "feed config: a max_length of '1e1' is the default (no limit) for "
                  "read_settings and for the publish script alike",
                  "[feed][config][read_settings][publish]") {
  co_await f.c.async_connect(asio::use_awaitable);
  const fields cfg{{"max_length", "1e1"}};
  co_await create_feed(f.c.conn(), f.name, "feed", cfg);
  thoonk::feed fd(f.c, f.name);
  auto s = co_await fd.async_read_settings(asio::use_awaitable);
  CHECK(!s.max_length);
  std::size_t evicted = 0;
  for (int i = 0; i < 12; ++i) {
    auto r = co_await fd.async_publish("item " + std::to_string(i), asio::use_awaitable);
    evicted += r.evicted.size();
  }
  CHECK(evicted == 0);
  auto n = co_await fd.async_length(asio::use_awaitable);
  CHECK(n == 12);
  co_await f.c.async_delete_feed(f.name, asio::use_awaitable);
}
