// jobs/put.lua's hand-off when the line is empty (docs/jobs.md "Hand-off"):
// the jobs a taker gets never enter the line, so the put must leave the
// queue exactly as a put, then a claim for the taker, would have. Checked
// at script level, with a registered worker's offer written by hand: which
// jobs go, in which order the rest wait (normal and high priority), the
// events' order, and the cases that must take the line instead (a paused
// queue, a rate limit, jobs already waiting) or leave a due scheduled job
// for the next claim. A hand-off to a job_queue handle is provisional until
// the handle confirms it: left unconfirmed past its second, it goes back.
// co_await stays out of CHECK and REQUIRE (g++ 12, see job_runner_test.cpp).
#include "detail/client_core.hpp"
#include "support/job_engine.hpp"
#include "support/runner.hpp"

#include "jobs/hand_off.hpp"
#include "jobs/job_keys.hpp"
#include "scripts/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

using namespace thoonk::test;

namespace {

/// The ids in f's line, next out first.
asio::awaitable<std::vector<std::string>> line_of(fixture& f) {
  auto v = co_await cmd(f.c.conn(), "LRANGE", key("ids", f.name), "0", "-1");
  std::vector<std::string> ids;
  for (auto it = v.elements.rbegin(); it != v.elements.rend(); ++it) ids.push_back(it->str);
  co_return ids;
}

std::vector<std::string> items(int n, const std::string& prefix) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(prefix + std::to_string(i));
  return v;
}

/// What a put did: the ids it returned, those handed off, the line after.
struct put_outcome {
  std::vector<std::string> ids, handed, line;
};

/// A registered worker of f's queue that offers idle slots while a claimer
/// sleeps on the queue, and what arrives on the worker's channel. With a
/// `mark` (a job_queue handle's offer is ":c"), the offer carries it and no
/// worker is registered.
struct fake_taker {
  explicit fake_taker(fixture& fx) : f(fx) {}
  fake_taker(fixture& fx, std::string w, std::string m)
      : f(fx), worker(std::move(w)), mark(std::move(m)) {}

  fixture& f;
  std::string worker = unique_name("taker");
  std::string mark;
  std::vector<std::string> messages;
  std::optional<thoonk::subscription> sub;

  asio::awaitable<void> offer(int slots) {
    auto& c = f.c.conn();
    auto t = co_await cmd(c, "TIME");
    const auto later = std::to_string(std::stoll(t.elements.at(0).str) * 1000 + 60000);
    if (mark.empty()) co_await cmd(c, "ZADD", key("workers", f.name), later, worker);
    co_await cmd(c, "HSET", key("takers", f.name), worker,
                 later + ":" + std::to_string(slots) + mark);
    co_await cmd(c, "SET", key("sleepers", f.name), "1");
    if (!sub) {
      auto s = co_await subscribe_notifications(
          f.raw, "job.take:" + channel_name(f.name) + ":" + worker,
          [this](const thoonk::message& m) { messages.emplace_back(m.payload); });
      sub.emplace(std::move(s));
    }
  }
  /// The ids of the one hand-off message that arrives within 2 s (none:
  /// empty, after a short wait), each a first claim (token 1, no failure).
  asio::awaitable<std::vector<std::string>> handed() {
    co_await wait_until([&] { return !messages.empty(); }, 2s);
    co_await settle();
    std::vector<std::string> ids;
    REQUIRE(messages.size() <= 1);
    if (messages.empty()) co_return ids;
    auto jobs = thoonk::detail::jobs::parse_hand_off(messages[0]);
    REQUIRE(jobs);
    for (const auto& j : *jobs) {
      CHECK(j.token == 1);
      CHECK(j.failures == 0);
      ids.push_back(j.id);
    }
    messages.clear();
    co_return ids;
  }
  /// Offers `slots`, puts `jobs` on `q` in one call and says what the put did.
  asio::awaitable<put_outcome> put(thoonk::job_queue& q, int slots, std::vector<std::string> jobs,
                                   thoonk::priority p = thoonk::priority::normal) {
    co_await offer(slots);
    put_outcome o;
    o.ids = co_await q.async_put_many(std::move(jobs), p, asio::use_awaitable);
    o.handed = co_await handed();
    o.line = co_await line_of(f);
    co_return o;
  }
};

using ids = std::vector<std::string>;

}  // namespace

FIXTURE_TEST_CASE("handoffdirect",
                  "put: into an empty line, the oldest of the put's jobs go to the taker, "
                  "claimed under its worker, and the rest wait in put order (normal and high)",
                  "[job][hand_off][put][put_many][events]") {
  thoonk::job_queue::settings s;
  s.events = true;
  auto q = co_await engine_queue(f, s);
  std::vector<std::string> events;
  auto esub = co_await q.async_subscribe_events(
      [&](const thoonk::job_event& e) {
        events.push_back(std::string(thoonk::to_string(e.kind)) + " " + e.id);
      },
      asio::use_awaitable);
  fake_taker t{f};
  auto r = co_await t.put(q, 3, items(5, "n"));
  CHECK(r.handed == ids{r.ids[0], r.ids[1], r.ids[2]});
  CHECK(r.line == ids{r.ids[3], r.ids[4]});
  for (int i = 0; i < 3; ++i) {
    auto record = co_await cmd(f.c.conn(), "HGET", key("worker_jobs", f.name), r.ids[i]);
    CHECK(record.str == t.worker + std::string("\0"
                                               "1",
                                               2));
  }
  auto c = co_await counts_of(q);
  CHECK(c.claimed == 3);
  CHECK(c.waiting == 2);
  // The offer is used up, and the two left woke the sleepers.
  auto offers = co_await cmd(f.c.conn(), "HLEN", key("takers", f.name));
  CHECK(offers.integer == 0);
  auto sleeping = co_await cmd(f.c.conn(), "EXISTS", key("sleepers", f.name));
  CHECK(sleeping.integer == 0);
  // Events as a put and then a claim send them: every put, then the claims.
  co_await wait_until([&] { return events.size() == 8; }, 2s);
  std::vector<std::string> want;
  for (const auto& id : r.ids) want.push_back("put " + id);
  for (int i = 0; i < 3; ++i) want.push_back("claimed " + r.ids[i]);
  CHECK(events == want);

  // High priority, into an empty line again: the put's first jobs go, the
  // rest wait next out, first one first.
  co_await cmd(f.c.conn(), "DEL", key("ids", f.name));
  r = co_await t.put(q, 2, items(4, "h"), thoonk::priority::high);
  CHECK(r.handed == ids{r.ids[0], r.ids[1]});
  CHECK(r.line == ids{r.ids[2], r.ids[3]});
}

FIXTURE_TEST_CASE("handoffline",
                  "put: with jobs already waiting, a taker gets as many as the put added, the "
                  "oldest waiting first, and the put's jobs join the end of the line",
                  "[job][hand_off][put][put_many]") {
  auto q = co_await engine_queue(f);
  auto old =
      co_await q.async_put_many(items(2, "old"), thoonk::priority::normal, asio::use_awaitable);
  fake_taker t{f};
  auto r = co_await t.put(q, 3, items(2, "new"));
  // As many as the put added, the oldest first: the ones that waited.
  CHECK(r.handed == old);
  CHECK(r.line == r.ids);
}

FIXTURE_TEST_CASE("handoffcontrol",
                  "put: a paused queue hands nothing off; a rate-limited one hands off what "
                  "the limit allows and charges it",
                  "[job][hand_off][put][pause][rate_limit]") {
  auto q = co_await engine_queue(f);
  fake_taker t{f};
  co_await q.async_pause(asio::use_awaitable);
  auto r = co_await t.put(q, 2, items(1, "held back"));
  CHECK(r.handed.empty());
  CHECK(r.line == r.ids);
  auto offer = co_await cmd(f.c.conn(), "HGET", key("takers", f.name), t.worker);
  CHECK(offer.type != thoonk::resp3::type::null);  // still offered
  co_await q.async_resume(asio::use_awaitable);
  co_await cmd(f.c.conn(), "DEL", key("ids", f.name));

  // A limit of 10 jobs/s allows a burst of one: one job goes, the other
  // waits, and the schedule of the limit moved.
  co_await cmd(f.c.conn(), "HSET", key("config", f.name), "rate_limit", "10");
  r = co_await t.put(q, 2, items(2, "r"));
  CHECK(r.handed == ids{r.ids[0]});
  CHECK(r.line == ids{r.ids[1]});
  auto charge =
      co_await cmd(f.c.conn(), "HGET", key("attempts", f.name), std::string("\0ratelimit", 10));
  CHECK(charge.type != thoonk::resp3::type::null);
}

FIXTURE_TEST_CASE("handoffdue",
                  "put: a job handed off from an empty line leaves a due scheduled job to the "
                  "next claim, which gets it",
                  "[job][hand_off][put][schedule]") {
  auto q = co_await engine_queue(f);
  auto due = co_await put_at(q, "due", thoonk::now_epoch_ms() + 30);
  co_await sleep_for(80ms);
  fake_taker t{f};
  auto r = co_await t.put(q, 1, items(1, "fresh"));
  CHECK(r.handed == r.ids);
  auto j = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(j.id == due);
  CHECK(j.item == "due");
}

FIXTURE_TEST_CASE("handoffmark",
                  "put: a job_queue handle's offer (marked ':c', no worker registered) gets the "
                  "jobs, keeps its mark while slots are left; an offer with another mark is "
                  "dropped and the put wakes the sleepers instead",
                  "[job][hand_off][put]") {
  auto q = co_await engine_queue(f);
  fake_taker t{f, unique_name("claim"), ":c"};
  auto r = co_await t.put(q, 3, items(2, "c"));
  CHECK(r.handed == ids{r.ids[0], r.ids[1]});
  CHECK(r.line.empty());
  auto record = co_await cmd(f.c.conn(), "HGET", key("worker_jobs", f.name), r.ids[0]);
  CHECK(record.str == t.worker + std::string("\0"
                                             "1",
                                             2));
  // One slot left, still marked.
  auto left = co_await cmd(f.c.conn(), "HGET", key("takers", f.name), t.worker);
  CHECK(left.str.ends_with(":1:c"));
  auto registered = co_await cmd(f.c.conn(), "ZCARD", key("workers", f.name));
  CHECK(registered.integer == 0);

  // An entry with a mark no version writes is not a taker.
  fake_taker odd{f, unique_name("claim"), ":x"};
  co_await cmd(f.c.conn(), "HDEL", key("takers", f.name), t.worker);
  auto r2 = co_await odd.put(q, 1, items(1, "x"));
  CHECK(r2.handed.empty());
  CHECK(r2.line == ids{r2.ids[0]});
  auto gone = co_await cmd(f.c.conn(), "HEXISTS", key("takers", f.name), odd.worker);
  CHECK(gone.integer == 0);
  auto sleeping = co_await cmd(f.c.conn(), "EXISTS", key("sleepers", f.name));
  CHECK(sleeping.integer == 0);
}

namespace {

/// The provisional hand-offs of f's queue: member (`id\0token`) -> when it
/// lapses (server ms).
asio::awaitable<std::map<std::string, std::int64_t>> provisional_of(fixture& f) {
  auto v = co_await cmd(f.c.conn(), "ZRANGE", key("handed", f.name), "0", "-1", "WITHSCORES");
  // RESP3 gives [member, score] pairs, the score a double.
  std::map<std::string, std::int64_t> out;
  for (const auto& e : v.elements) {
    REQUIRE(e.elements.size() == 2);
    const auto& score = e.elements[1];
    out[e.elements[0].str] = static_cast<std::int64_t>(
        score.type == thoonk::resp3::type::double_number ? score.dbl : std::stod(score.str));
  }
  co_return out;
}

asio::awaitable<std::int64_t> server_ms(fixture& f) {
  auto t = co_await cmd(f.c.conn(), "TIME");
  co_return std::stoll(t.elements.at(0).str) * 1000 + std::stoll(t.elements.at(1).str) / 1000;
}

/// jobs/take_confirm.lua for the claims `pairs` (id, token, ...): how many
/// entries went.
asio::awaitable<std::int64_t> confirm(fixture& f, std::vector<std::string> pairs) {
  const thoonk::detail::feed_names names(f.c.get_config(), f.name);
  auto [st, v] = co_await thoonk::detail::run_script(
      thoonk::detail::core_of(f.c), thoonk::detail::scripts::jobs_take_confirm(),
      thoonk::detail::jobs::job_keys(names).keys, std::move(pairs));
  REQUIRE(!st.ec);
  co_return v.integer;
}

std::string member(const std::string& id, std::int64_t token) {
  return id + '\0' + std::to_string(token);
}

}  // namespace

FIXTURE_TEST_CASE("handoffprovisional",
                  "put: a hand-off to a job_queue handle is provisional for a second; left "
                  "unconfirmed past it, the next claim that runs short, put that finds "
                  "sleepers, or maintenance gives it back with no failure counted; a confirmed "
                  "one stays claimed",
                  "[job][hand_off][put][claim][maintain]") {
  auto q = co_await engine_queue(f);
  fake_taker t{f, unique_name("claim"), ":c"};
  for (int how = 0; how < 3; ++how) {
    INFO("path " << how);
    const auto before = co_await server_ms(f);
    auto r = co_await t.put(q, 1, items(1, "p"));
    const auto after = co_await server_ms(f);
    REQUIRE(r.handed.size() == 1);
    const auto id = r.handed[0];
    // Recorded as provisional, due a second after the put by the server's
    // clock.
    auto p = co_await provisional_of(f);
    REQUIRE(p.size() == 1);
    REQUIRE(p.count(member(id, 1)) == 1);
    CHECK(p[member(id, 1)] >= before + 1000);
    CHECK(p[member(id, 1)] <= after + 1000);
    // The fake handle never confirms: its second is made to have passed.
    co_await cmd(f.c.conn(), "ZADD", key("handed", f.name), "1", member(id, 1));
    if (how == 0) {
      // A claim on the dry line finds it and claims it.
      auto [ec, j] = co_await q.async_claim(1s, nothrow);
      REQUIRE(!ec);
      CHECK(j.id == id);
      CHECK(j.token == 2);
      CHECK(j.failures == 0);
      co_await q.async_finish(j, asio::use_awaitable);
    } else {
      if (how == 1) {
        // A put that finds sleepers gives it back first: next out, before
        // the put's own job.
        co_await cmd(f.c.conn(), "SET", key("sleepers", f.name), "1");
        auto other = co_await put_item(q, "after");
        auto line = co_await line_of(f);
        CHECK(line == ids{id, other});
      } else {
        co_await q.async_maintain(no_stats(), asio::use_awaitable);
        auto line = co_await line_of(f);
        CHECK(line == ids{id});
      }
      auto j = co_await job_of(q, id);
      CHECK(j.state == thoonk::job_state::waiting);
      CHECK(j.retry_count == 0);
      CHECK(j.stall_count == 0);
    }
    auto rec = co_await cmd(f.c.conn(), "HEXISTS", key("worker_jobs", f.name), id);
    CHECK(rec.integer == 0);
    auto left = co_await provisional_of(f);
    CHECK(left.empty());
    // Its claim ended: a late confirmation does not restore it.
    std::vector<std::string> claim_of{id, "1"};
    auto late = co_await confirm(f, std::move(claim_of));
    CHECK(late == 0);
    while (auto j = co_await try_claim(q)) co_await q.async_finish(*j, asio::use_awaitable);
  }

  // Confirmed, the hand-off is the handle's under the lease: no claim, put
  // or maintenance gives it back.
  auto r = co_await t.put(q, 1, items(1, "kept"));
  REQUIRE(r.handed.size() == 1);
  const auto id = r.handed[0];
  std::vector<std::string> claim_of{id, "1"};
  auto went = co_await confirm(f, std::move(claim_of));
  CHECK(went == 1);
  auto none = co_await provisional_of(f);
  CHECK(none.empty());
  auto nothing = co_await try_claim(q);
  CHECK(!nothing);
  co_await cmd(f.c.conn(), "SET", key("sleepers", f.name), "1");
  co_await q.async_put("after", asio::use_awaitable);
  co_await q.async_maintain(no_stats(), asio::use_awaitable);
  auto j = co_await job_of(q, id);
  CHECK(j.state == thoonk::job_state::claimed);
  thoonk::claimed_job held;
  held.id = id;
  held.token = 1;
  co_await q.async_finish(held, asio::use_awaitable);
}
