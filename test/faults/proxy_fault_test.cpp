// A fault proxy between the client and redis-server (fault_proxy.hpp):
// blackhole, reset, one byte at a time, and a cut in the middle of a large
// reply, each while eight coroutines run SET/GET pairs with unique values
// through one connection. Every reply must be the one its request asked
// for (a reply given to the wrong request would show as another key's
// value), every acknowledged SET must be on the server, every SET reported
// as failed must not be, and the ones that died in flight must come back
// as unknown outcomes. The blackhole must be detected by the health check
// within health_check_interval plus health_check_timeout.
#include "fault_proxy.hpp"
#include "fault_support.hpp"
#include "support/helpers.hpp"

#include <functional>
#include <optional>
#include <random>
#include <sstream>

using namespace thoonk::test;
using namespace thoonk::faults;

namespace {

constexpr auto health_interval = 200ms;
constexpr auto health_timeout = 400ms;

// Everything the workload saw. One thread: no locking.
struct kv_history {
  struct set_op {
    std::string key, value;
    outcome result;
  };
  std::vector<set_op> sets;
  tally ops;
  std::uint64_t mismatches = 0;
  std::vector<std::int64_t> ok_times;  // completion of every successful operation
  int running = 0;

  void done(outcome o) {
    ops.add(o);
    if (o == outcome::ok) ok_times.push_back(now_ms());
  }
  // The first successful operation that completed after t, minus t.
  std::int64_t first_ok_after(std::int64_t t) const {
    for (auto x : ok_times)
      if (x > t) return x - t;
    return -1;
  }
};

// SET k v + GET k in one request (the reply must be [OK, v]), then GET k
// alone (v if the SET happened, nil if it did not, either if unknown).
asio::awaitable<void> kv_worker(thoonk::connection& c, kv_history* h, const bool* stop, int n) {
  ++h->running;
  std::mt19937_64 rng{std::random_device{}()};
  for (int i = 0; !*stop; ++i) {
    const std::string key = "k:" + std::to_string(n) + ":" + std::to_string(i);
    const std::string value =
        "v:" + std::to_string(n) + ":" + std::to_string(i) + ":" + std::to_string(rng());
    thoonk::request set;
    set.push("SET", key, value);
    set.push("GET", key);
    auto [ec, resp] = co_await c.async_exec(set, nothrow);
    const auto o = classify(ec);
    h->done(o);
    h->sets.push_back({key, value, o});
    if (o == outcome::ok && (resp.size() != 2 || resp[0].str != "OK" || resp[1].str != value))
      ++h->mismatches;
    thoonk::request get;
    get.push("GET", key);
    auto [gec, gresp] = co_await c.async_exec(get, nothrow);
    const auto g = classify(gec);
    h->done(g);
    if (g == outcome::ok) {
      const bool has = gresp.size() == 1 && !gresp[0].is_null();
      const bool right = has && gresp[0].str == value;
      const bool allowed = o == outcome::ok ? right : o == outcome::failed ? !has : (right || !has);
      if (!allowed) ++h->mismatches;
    }
  }
  --h->running;
}

// What one proxied scenario gives back.
struct proxy_result {
  kv_history h;
  std::uint64_t lost = 0;     // acknowledged SETs missing on the server
  std::uint64_t phantom = 0;  // SETs reported failed that happened anyway
  std::uint64_t reconnects = 0;
};

struct rig {
  thoonk::test::redis_server srv;
  asio::io_context ioc;
  fault_proxy proxy{ioc.get_executor(), srv.port()};
  thoonk::connection conn{ioc.get_executor(), proxied_config()};
  thoonk::connection direct{ioc.get_executor(), fault_config(srv.url())};
  // connection events with their times
  std::vector<std::pair<std::int64_t, thoonk::connection_event>> events;

  rig() {
    conn.on_event([this](const thoonk::connection_event& e) { events.emplace_back(now_ms(), e); });
  }
  thoonk::config proxied_config() const {
    auto cfg = fault_config("redis://127.0.0.1:" + std::to_string(proxy.port()));
    cfg.health_check_interval = health_interval;
    cfg.health_check_timeout = health_timeout;
    cfg.connect_timeout = 1s;
    return cfg;
  }

  // Runs the workload while `fault` runs, then checks every SET on the
  // server directly (not through the proxy).
  proxy_result run(std::function<asio::awaitable<void>(kv_history&)> fault) {
    proxy_result r;
    bool stop = false;
    run_coro(
        ioc,
        [&]() -> asio::awaitable<void> {
          co_await connect_all(conn, direct);
          for (int i = 0; i < 8; ++i)
            asio::co_spawn(ioc, kv_worker(conn, &r.h, &stop, i), asio::detached);
          co_await sleep_for(200ms);
          co_await fault(r.h);
          co_await sleep_for(200ms);
          stop = true;
          const bool ended = co_await wait_until([&] { return r.h.running == 0; }, 10s);
          REQUIRE(ended);
          for (std::size_t i = 0; i < r.h.sets.size(); i += 1000) {
            thoonk::request check;
            const auto end = std::min(r.h.sets.size(), i + 1000);
            for (auto j = i; j < end; ++j) check.push("GET", r.h.sets[j].key);
            auto values = co_await direct.async_exec(check, asio::use_awaitable);
            for (auto j = i; j < end; ++j) {
              const auto& s = r.h.sets[j];
              const auto& v = values[j - i];
              const bool applied = !v.is_null() && v.str == s.value;
              if (!v.is_null() && v.str != s.value) ++r.h.mismatches;
              if (s.result == outcome::ok && !applied) ++r.lost;
              if (s.result == outcome::failed && applied) ++r.phantom;
            }
          }
          r.reconnects = conn.stats().reconnects;
          conn.stop();
          direct.stop();
          proxy.stop();
        },
        current_profile().scenario_limit);
    return r;
  }
};

void check_history(const proxy_result& r) {
  INFO("operations " << r.h.ops.total() << " (" << r.h.ops.ok << " ok, " << r.h.ops.failed
                     << " failed, " << r.h.ops.unknown << " unknown), reconnects " << r.reconnects);
  CHECK(r.h.ops.ok > 0);
  CHECK(r.h.mismatches == 0);
  CHECK(r.lost == 0);
  CHECK(r.phantom == 0);
}

}  // namespace

TEST_CASE("faults: proxy blackhole: the dead peer is detected by the health check",
          "[faults][proxy][blackhole]") {
  rig t;
  // An idle subscriber through the same proxy: its silence is found by the
  // PING sent after health_check_interval, then health_check_timeout.
  thoonk::subscriber sub(t.ioc.get_executor(), t.proxied_config());
  std::vector<std::pair<std::int64_t, thoonk::subscriber_event>> sub_events;
  std::vector<std::string> messages;
  std::vector<std::int64_t> detections, sub_detections, recoveries;
  std::uint64_t delivered_after_heal = 0;
  const int rounds = current_profile().name == "full" ? 3 : 1;
  // The first `disconnected` at or after index `from` of `events`: when
  // (minus `start`) and why.
  auto detected =
      [](const auto& events, std::size_t from, std::int64_t start,
         auto disconnected) -> std::optional<std::pair<std::int64_t, boost::system::error_code>> {
    for (auto i = from; i < events.size(); ++i)
      if (events[i].second.kind == disconnected)
        return std::pair(events[i].first - start, events[i].second.error);
    return std::nullopt;
  };
  std::vector<boost::system::error_code> reasons;
  auto r = t.run([&](kv_history& h) -> asio::awaitable<void> {
    auto listener = sub.on_event(
        [&](const thoonk::subscriber_event& e) { sub_events.emplace_back(now_ms(), e); });
    thoonk::subscriber::callback on_message = [&](const thoonk::message& m) {
      messages.emplace_back(m.payload);
    };
    auto subscribed =
        co_await sub.async_subscribe("faults-blackhole", on_message, asio::use_awaitable);
    for (int round = 0; round < rounds; ++round) {
      co_await sleep_for(health_interval);  // the subscriber is idle
      const auto before = t.events.size();
      const auto sub_before = sub_events.size();
      const auto start = now_ms();
      t.proxy.plan().set_mode(fault_mode::blackhole);
      co_await wait_until(
          [&] {
            return detected(t.events, before, start, thoonk::connection_event::disconnected) &&
                   detected(sub_events, sub_before, start, thoonk::subscriber_event::disconnected);
          },
          5s);
      if (auto d = detected(t.events, before, start, thoonk::connection_event::disconnected)) {
        detections.push_back(d->first);
        reasons.push_back(d->second);
      }
      if (auto d =
              detected(sub_events, sub_before, start, thoonk::subscriber_event::disconnected)) {
        sub_detections.push_back(d->first);
        reasons.push_back(d->second);
      }
      co_await sleep_for(300ms);
      t.proxy.plan().set_mode(fault_mode::pass);
      const auto healed = now_ms();
      co_await wait_until([&] { return h.first_ok_after(healed) >= 0; }, 10s);
      recoveries.push_back(h.first_ok_after(healed));
      // The subscriber came back with its subscription: a message
      // published now is delivered.
      co_await wait_until([&] { return sub.is_connected(); }, 10s);
      const auto seen = messages.size();
      const std::string payload = "after heal " + std::to_string(round);
      co_await cmd(t.direct, "PUBLISH", "faults-blackhole", payload);
      co_await wait_until([&] { return messages.size() > seen; }, 5s);
      delivered_after_heal += messages.size() > seen && messages.back() == payload;
    }
    subscribed = {};
    listener = {};
    sub.stop();
  });
  check_history(r);
  REQUIRE(detections.size() == static_cast<std::size_t>(rounds));
  REQUIRE(sub_detections.size() == static_cast<std::size_t>(rounds));
  CHECK(delivered_after_heal == static_cast<std::uint64_t>(rounds));
  // Both found the silence through the health check (not an error of the
  // proxy's making).
  for (const auto& ec : reasons) CHECK(ec == thoonk::error::health_check_timeout);
  // Requests were in flight when the peer went silent: each is reported
  // as an unknown outcome, not as a success or a definite failure.
  CHECK(r.h.ops.unknown >= 1);
  // The health check looks every tick = min(interval, timeout / 4). A busy
  // connection is closed once a reply has been due for health_check_timeout;
  // an idle one sends a PING after health_check_interval, then waits the
  // timeout. Each step may wait one tick more. The last 250 ms are for a
  // loaded machine's timers, not the library's.
  const auto tick = std::min(health_interval, health_timeout / 4);
  const auto busy_bound = (health_timeout + tick + 250ms).count();
  const auto idle_bound = (health_interval + health_timeout + 2 * tick + 250ms).count();
  for (auto d : detections) CHECK(d <= busy_bound);
  for (auto d : sub_detections) CHECK(d <= idle_bound);
  const auto worst = *std::max_element(detections.begin(), detections.end());
  const auto sub_worst = *std::max_element(sub_detections.begin(), sub_detections.end());
  const auto heal = *std::max_element(recoveries.begin(), recoveries.end());
  report({"proxy blackhole ×" + std::to_string(rounds) + " (health check " +
              std::to_string(health_interval.count()) + " + " +
              std::to_string(health_timeout.count()) + " ms)",
          r.h.ops.total(), r.lost, r.h.mismatches, r.h.ops.unknown,
          "detected ≤ " + std::to_string(worst) + " ms busy, ≤ " + std::to_string(sub_worst) +
              " ms idle (subscriber); first reply after healing ≤ " + std::to_string(heal) +
              " ms"});
}

TEST_CASE("faults: proxy resets every connection repeatedly", "[faults][proxy][reset]") {
  rig t;
  std::vector<std::int64_t> recoveries;
  const int resets = current_profile().proxy_resets;
  auto r = t.run([&](kv_history& h) -> asio::awaitable<void> {
    std::mt19937 rng{std::random_device{}()};
    for (int i = 0; i < resets; ++i) {
      co_await sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(100, 300)(rng)));
      const auto at = now_ms();
      t.proxy.reset_all();
      co_await wait_until([&] { return h.first_ok_after(at) >= 0; }, 10s);
      recoveries.push_back(h.first_ok_after(at));
    }
  });
  check_history(r);
  CHECK(r.reconnects >= static_cast<std::uint64_t>(resets));
  REQUIRE(recoveries.size() == static_cast<std::size_t>(resets));
  CHECK(*std::min_element(recoveries.begin(), recoveries.end()) >= 0);
  const auto worst = *std::max_element(recoveries.begin(), recoveries.end());
  report({"proxy resets every connection ×" + std::to_string(resets), r.h.ops.total(), r.lost,
          r.h.mismatches, r.h.ops.unknown,
          "reset → next reply ≤ " + std::to_string(worst) + " ms"});
}

TEST_CASE("faults: proxy forwards one byte at a time", "[faults][proxy][trickle]") {
  rig t;
  auto r = t.run([&](kv_history&) -> asio::awaitable<void> {
    t.proxy.plan().set_mode(fault_mode::trickle);
    co_await sleep_for(current_profile().trickle_time);
    t.proxy.plan().set_mode(fault_mode::pass);
  });
  check_history(r);
  // Slow is not broken: nothing fails, nothing is unknown, no reconnect.
  CHECK(r.h.ops.failed == 0);
  CHECK(r.h.ops.unknown == 0);
  CHECK(r.reconnects == 0);
  report({"proxy one byte per write for " + std::to_string(current_profile().trickle_time.count()) +
              " ms",
          r.h.ops.total(), r.lost, r.h.mismatches, r.h.ops.unknown, "no fault to recover from"});
}

TEST_CASE("faults: proxy cuts the connection in the middle of a large reply",
          "[faults][proxy][cut]") {
  rig t;
  const int cuts = current_profile().proxy_cuts;
  constexpr std::size_t big_size = 1 << 20;
  std::string big(big_size, '\0');
  {
    std::mt19937 rng{42};
    for (auto& ch : big) ch = static_cast<char>('a' + rng() % 26);
  }
  std::vector<boost::system::error_code> cut_results;
  std::vector<std::int64_t> recoveries;
  std::uint64_t intact = 0;
  auto r = t.run([&](kv_history&) -> asio::awaitable<void> {
    co_await cmd(t.direct, "SET", "big", big);
    std::mt19937 rng{std::random_device{}()};
    for (int i = 0; i < cuts; ++i) {
      // Far enough in for the small replies sent meanwhile not to reach it,
      // far enough from the end to land inside the 1 MiB reply.
      t.proxy.plan().arm_cut(std::uniform_int_distribution<std::size_t>(64 << 10, 900 << 10)(rng));
      thoonk::request get;
      get.push("GET", "big");
      auto [ec, resp] = co_await t.conn.async_exec(get, nothrow);
      const auto cut_at = now_ms();
      cut_results.push_back(ec);
      // The same request again, after the reconnect: the whole value.
      auto [ec2, resp2] = co_await t.conn.async_exec(get, nothrow);
      recoveries.push_back(now_ms() - cut_at);
      if (!ec2 && resp2.size() == 1 && resp2[0].str == big) ++intact;
    }
  });
  check_history(r);
  REQUIRE(cut_results.size() == static_cast<std::size_t>(cuts));
  // A reply cut short is never handed out: the request is an unknown outcome.
  for (const auto& ec : cut_results) CHECK(ec == thoonk::error::unknown_outcome);
  CHECK(intact == static_cast<std::uint64_t>(cuts));
  CHECK(t.proxy.plan().cuts() == static_cast<std::uint64_t>(cuts));
  const auto worst = *std::max_element(recoveries.begin(), recoveries.end());
  report({"proxy cuts a 1 MiB reply in the middle ×" + std::to_string(cuts),
          r.h.ops.total() + 2 * cut_results.size(), r.lost, r.h.mismatches,
          r.h.ops.unknown + static_cast<std::uint64_t>(std::count(
                                cut_results.begin(), cut_results.end(),
                                boost::system::error_code(thoonk::error::unknown_outcome))),
          "cut → whole value read again ≤ " + std::to_string(worst) + " ms"});
}

TEST_CASE("faults: the fault plan's decisions", "[faults][proxy][plan]") {
  fault_plan p;
  auto a = p.on_read(direction::to_client, 10);
  CHECK(a.forward == 10);
  CHECK(a.chunk == 10);
  CHECK(!a.reset);
  p.set_mode(fault_mode::trickle);
  a = p.on_read(direction::to_server, 5);
  CHECK(a.forward == 5);
  CHECK(a.chunk == 1);
  p.set_mode(fault_mode::blackhole);
  a = p.on_read(direction::to_client, 7);
  CHECK(a.forward == 0);
  CHECK(!a.reset);
  p.set_mode(fault_mode::pass);
  p.arm_cut(15);
  a = p.on_read(direction::to_server, 100);  // requests do not count
  CHECK(a.forward == 100);
  CHECK(!a.reset);
  a = p.on_read(direction::to_client, 10);
  CHECK(a.forward == 10);
  CHECK(!a.reset);
  a = p.on_read(direction::to_client, 10);
  CHECK(a.forward == 5);
  CHECK(a.reset);
  CHECK(p.cuts() == 1);
  CHECK(!p.cut_armed());
  a = p.on_read(direction::to_client, 10);  // one-shot
  CHECK(a.forward == 10);
  CHECK(!a.reset);
  // Refusals: a connection's first bytes towards the server, nothing else.
  p.refuse_next(2);
  a = p.on_read(direction::to_client, 10, true);
  CHECK(a.forward == 10);
  CHECK(!a.reset);
  a = p.on_read(direction::to_server, 10, false);
  CHECK(a.forward == 10);
  CHECK(!a.reset);
  for (int i = 0; i < 2; ++i) {
    a = p.on_read(direction::to_server, 10, true);
    CHECK(a.forward == 0);
    CHECK(a.reset);
  }
  CHECK(p.refused() == 2);
  a = p.on_read(direction::to_server, 10, true);  // spent
  CHECK(a.forward == 10);
  CHECK(!a.reset);
}
