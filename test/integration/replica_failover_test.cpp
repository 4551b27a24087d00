// A primary and a replica on two loopback ports started by the test; a
// client configured with both addresses (config::endpoints). A failover
// done by hand (writes paused on the primary until the replica caught up,
// REPLICAOF NO ONE on the replica, REPLICAOF on the old primary) is followed
// by the client by itself: puts and claims around it neither fail with
// READONLY nor get lost (docs/reliability.md, "Replicas and failover").
#include "support/helpers.hpp"
#include "support/replica_pair.hpp"

#include <algorithm>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <set>

#include <signal.h>
#include <sys/types.h>

using namespace thoonk::test;
using E = thoonk::error;
using thoonk::feed_event;
using thoonk::feed_type;
using clock_type = std::chrono::steady_clock;

namespace {

thoonk::config both(const replica_pair& s) {
  auto cfg = replica_pair::config_for(s.primary);
  cfg.endpoints = {{s.primary.host(), s.primary.port()}, {s.replica.host(), s.replica.port()}};
  return cfg;
}

asio::awaitable<std::string> role_of(thoonk::connection& c) {
  auto v = co_await cmd(c, "ROLE");
  co_return v.elements.empty() ? std::string() : v.elements[0].str;
}

asio::awaitable<std::int64_t> repl_offset(thoonk::connection& c) {
  auto v = co_await cmd(c, "INFO", "replication");
  auto field = info_field(v.str, "master_repl_offset");
  co_return field.empty() ? -1 : std::stoll(field);
}

// The manual failover: writes paused on the old primary until the replica
// has everything, the replica promoted, the old primary made its replica.
asio::awaitable<void> fail_over(thoonk::connection& old_primary, thoonk::connection& old_replica,
                                const redis_server& new_primary) {
  co_await cmd(old_primary, "CLIENT", "PAUSE", 5000, "WRITE");
  const auto target = co_await repl_offset(old_primary);
  for (int i = 0; i < 500; ++i) {
    auto v = co_await cmd(old_replica, "INFO", "replication");
    auto got = info_field(v.str, "slave_repl_offset");
    if (!got.empty() && std::stoll(got) >= target) break;
    co_await sleep_for(10ms);
  }
  co_await cmd(old_replica, "REPLICAOF", "NO", "ONE");
  co_await cmd(old_primary, "REPLICAOF", new_primary.host(), new_primary.port());
  co_await cmd(old_primary, "CLIENT", "UNPAUSE");
}

// A feed publisher running through a failover: ids k00000, k00001, ... in
// order, one at a time. Each outcome is recorded: acknowledged, or failed
// (the publish may or may not have run: its id is "unknown").
struct feed_publisher {
  std::vector<std::string> acked, unknown;
  std::map<std::string, int> failures;  // error message -> count
  bool done = false;

  static std::string id_of(int i) {
    char id[16];
    std::snprintf(id, sizeof id, "k%05d", i);
    return id;
  }

  asio::awaitable<void> run(thoonk::client& c, std::string name, int total,
                            std::chrono::milliseconds pause) {
    thoonk::feed f(c, name);
    for (int i = 0; i < total; ++i) {
      auto id = id_of(i);
      thoonk::item_id as(id);
      auto [ec, r] = co_await f.async_publish(std::move(as), "item", nothrow);
      if (ec) {
        ++failures[ec.message()];
        unknown.push_back(id);
      } else {
        acked.push_back(id);
      }
      if (pause.count() > 0) co_await sleep_for(pause);
    }
    done = true;
  }
};

// What a catch-up feed subscription delivered.
struct feed_recorder {
  std::vector<std::string> got;
  std::vector<thoonk::catch_up_info> infos;
  int connected = 0, disconnected = 0;
  clock_type::time_point first_connected_after{};
  clock_type::time_point since{};  // set by the test: connects after it are timed
};

// A catch-up feed subscription through a failover: both servers, a
// subscriber and a publisher (two clients, both configured with both
// addresses), a connection to each server, and the record of what came.
struct subscription_through_failover {
  static constexpr int total = 1500;  // items the publisher publishes

  replica_pair servers;
  asio::io_context ioc;
  thoonk::client c{ioc.get_executor(), both(servers)};
  thoonk::client pub{ioc.get_executor(), both(servers)};
  thoonk::connection pa{ioc.get_executor(), replica_pair::config_for(servers.primary)};
  thoonk::connection pb{ioc.get_executor(), replica_pair::config_for(servers.replica)};
  std::string name;
  feed_recorder rec;
  feed_publisher p;
  thoonk::subscription events;
  thoonk::feed_subscription sub;

  // Connects everyone, creates a feed (its name from `prefix`) and
  // subscribes `c` to it with catch-up, recording into `rec`; starts the
  // publisher (`total` items, 1 ms apart) and returns once `seen` items
  // have come.
  asio::awaitable<void> start(std::string_view prefix, std::size_t seen) {
    co_await connect_all(c, pub, pa, pb);
    auto online = co_await replicas_online(pa, 1);
    REQUIRE(online);
    name = co_await make_feed(pub, prefix, feed_type::feed);
    events = c.sub().on_event([this](const thoonk::subscriber_event& e) {
      if (e.kind == thoonk::subscriber_event::connected) {
        ++rec.connected;
        if (rec.since != clock_type::time_point{} &&
            rec.first_connected_after == clock_type::time_point{})
          rec.first_connected_after = clock_type::now();
      } else {
        ++rec.disconnected;
      }
    });
    thoonk::feed_subscribe_options opts;
    opts.catch_up = true;
    opts.on_catch_up = [this](const thoonk::catch_up_info& i) { rec.infos.push_back(i); };
    thoonk::feed f(c, name);
    sub = co_await f.async_subscribe(
        [this](const feed_event& e) {
          if (e.kind == feed_event::publish) rec.got.emplace_back(e.id);
        },
        opts, asio::use_awaitable);
    asio::co_spawn(ioc, p.run(pub, name, total, 1ms), asio::detached);
    bool reached = co_await wait_until([&] { return rec.got.size() >= seen; }, 30s);
    REQUIRE(reached);
  }

  // Stops every party and ends the subscriptions.
  void stop() {
    c.stop();
    pub.stop();
    pa.stop();
    pb.stop();
    sub.reset();
    events.reset();
  }
};

// Runs `body(t)` (a coroutine) on a fresh subscription_through_failover `t`
// under run_coro's deadline, between t.start(prefix, seen) and t.stop().
template <class Body>
void through_failover(std::string_view prefix, std::size_t seen, Body body) {
  subscription_through_failover t;
  run_coro(
      t.ioc,
      [&]() -> asio::awaitable<void> {
        co_await t.start(prefix, seen);
        co_await body(t);
        t.stop();
      },
      90s);
}

}  // namespace

TEST_CASE("failover: a client with both addresses skips the replica and finds the primary",
          "[failover][connect]") {
  replica_pair servers;
  asio::io_context ioc;
  // The replica first: its ROLE sends the client on to the primary.
  auto cfg = both(servers);
  std::swap(cfg.endpoints[0], cfg.endpoints[1]);
  thoonk::client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    auto me = co_await cmd(c.conn(), "CONFIG", "GET", "port");
    REQUIRE(me.elements.size() == 2);
    CHECK(me.elements[1].str == std::to_string(servers.primary.port()));
    // A write works at once (no READONLY from the replica).
    auto r = co_await cmd(c.conn(), "SET", unique_name("k"), "v");
    CHECK(r.str == "OK");
    c.stop();
  });
}

TEST_CASE("failover: only replicas configured: connect fails with not_primary and keeps trying",
          "[failover][connect]") {
  replica_pair servers;
  asio::io_context ioc;
  thoonk::config cfg = replica_pair::config_for(servers.replica);
  cfg.endpoints = {{servers.replica.host(), servers.replica.port()},
                   {servers.replica.host(), servers.replica.port()}};
  thoonk::connection conn(ioc.get_executor(), cfg);
  auto events = record_events(conn);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto [ec] = co_await conn.async_connect(nothrow);
    CHECK(ec == E::not_primary);
    // Not a refusal: requests wait for a primary instead of failing ...
    thoonk::request req;
    req.push("PING");
    thoonk::exec_options o;
    o.timeout = 300ms;
    auto [pec, resp] = co_await conn.async_exec(req, o, nothrow);
    CHECK(pec == E::request_timeout);
    REQUIRE(!events->empty());
    CHECK(events->front().kind == thoonk::connection_event::connect_failed);
    CHECK(!events->front().setup_refused);
    CHECK(events->front().server_message == "ROLE: slave");
    // ... and the replica promoted becomes usable.
    thoonk::connection admin(ioc.get_executor(), replica_pair::config_for(servers.replica));
    co_await admin.async_connect(asio::use_awaitable);
    co_await cmd(admin, "REPLICAOF", "NO", "ONE");
    auto [pec2, resp2] = co_await conn.async_exec(req, nothrow);
    CHECK(!pec2);
    admin.stop();
    conn.stop();
  });
}

TEST_CASE("failover: puts and claims follow the promoted replica, none lost, none READONLY",
          "[failover][put][claim][finish]") {
  replica_pair servers;
  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), both(servers));
  thoonk::connection pa(ioc.get_executor(), replica_pair::config_for(servers.primary));
  thoonk::connection pb(ioc.get_executor(), replica_pair::config_for(servers.replica));
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(c, pa, pb);
        auto online_13 = co_await replicas_online(pa, 1);
        REQUIRE(online_13);
        const auto name = unique_name("failover");
        co_await c.async_create_feed(name, thoonk::feed_type::job, {}, asio::use_awaitable);
        thoonk::job_queue q(c, name);

        // A producer and a worker run through the failover.
        std::vector<std::string> acked;
        std::map<std::string, int> failures;  // error message -> count
        std::set<std::string> finished;
        bool stop = false;
        int running = 2;
        clock_type::time_point failover_start{}, first_put_after{};
        bool failover_done = false;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              for (int i = 0; !stop; ++i) {
                auto [ec, id] = co_await q.async_put("job-" + std::to_string(i), nothrow);
                if (ec) ++failures[ec.message()];
                else {
                  acked.push_back(id.id);
                  if (failover_done && first_put_after == clock_type::time_point{})
                    first_put_after = clock_type::now();
                }
                co_await sleep_for(2ms);
              }
              --running;
            },
            asio::detached);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              while (!stop) {
                auto [ec, job] = co_await q.async_claim(200ms, nothrow);
                if (ec == E::queue_empty) continue;
                if (ec) {
                  ++failures["claim: " + ec.message()];
                  continue;
                }
                auto [fec] = co_await q.async_finish(job, nothrow);
                if (fec) ++failures["finish: " + fec.message()];
                else finished.insert(job.id);
              }
              --running;
            },
            asio::detached);

        co_await sleep_for(300ms);
        failover_start = clock_type::now();
        co_await fail_over(pa, pb, servers.replica);
        failover_done = true;
        co_await sleep_for(700ms);
        stop = true;
        while (running > 0) co_await sleep_for(5ms);
        const auto recovery = first_put_after - failover_start;

        auto role_14 = co_await role_of(pb);
        CHECK(role_14 == "master");
        auto role_15 = co_await role_of(pa);
        CHECK(role_15 == "slave");
        for (auto& [what, n] : failures) {
          INFO(what << " x" << n);
          CHECK(n == 0);
        }
        REQUIRE(first_put_after != clock_type::time_point{});
        // Every acknowledged put was finished by the worker or is still on
        // the new primary.
        REQUIRE(acked.size() > 10);
        int missing = 0;
        for (const auto& id : acked) {
          if (finished.count(id)) continue;
          auto v = co_await cmd(pb, "HEXISTS", key("items", name), id);
          if (v.integer != 1) ++missing;
        }
        CHECK(missing == 0);
        thoonk::job_queue check(c, name);
        auto counts = co_await check.async_counts(asio::use_awaitable);
        CHECK(counts.puts == static_cast<std::int64_t>(acked.size()));
        CHECK(!finished.empty());
        // The client now talks to the old replica.
        auto port = co_await cmd(c.conn(), "CONFIG", "GET", "port");
        REQUIRE(port.elements.size() == 2);
        CHECK(port.elements[1].str == std::to_string(servers.replica.port()));
        std::cout << "{\"bench\": \"failover_recovery\", \"acknowledged_puts\": " << acked.size()
                  << ", \"finished\": " << finished.size() << ", \"recovery_ms\": "
                  << std::chrono::duration<double, std::milli>(recovery).count()
                  << ", \"client_reconnects\": " << c.conn().stats().reconnects << "}\n";
        c.stop();
        pa.stop();
        pb.stop();
      },
      60s);
}

TEST_CASE("failover: LOADING replies are waited out, not surfaced; with retries off they are",
          "[failover][loading]") {
  // A server answers LOADING while it loads its data set. DEBUG RELOAD
  // saves and loads it again, slowed down by key-load-delay (-10: a 1 µs
  // sleep every 10 keys, about 2 s here), while the clients send a real
  // command.
  redis_server server(redis_server_options{{"--save", ""}});
  asio::io_context ioc;
  auto cfg = replica_pair::config_for(server);
  // The load takes seconds under sanitizers: a budget that outlasts it.
  cfg.unavailable_retries = 60;
  thoonk::connection conn(ioc.get_executor(), cfg);
  auto no_retry_cfg = cfg;
  no_retry_cfg.unavailable_retries = 0;
  thoonk::connection no_retry(ioc.get_executor(), no_retry_cfg);
  thoonk::connection admin(ioc.get_executor(), cfg);
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(conn, no_retry, admin);
        co_await cmd(admin, "DEBUG", "POPULATE", 300000, "k", 16);
        co_await cmd(admin, "CONFIG", "SET", "key-load-delay", "-10");
        co_await cmd(admin, "CONFIG", "SET", "loading-process-events-interval-bytes", "65536");
        bool reloading = true;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              thoonk::request r;
              r.push("DEBUG", "RELOAD");
              co_await admin.async_exec(r, nothrow);
              reloading = false;
            },
            asio::detached);
        // Until the server answers LOADING (it starts after the save).
        thoonk::resp3::value seen;
        for (int i = 0; i < 500; ++i) {
          seen = co_await cmd(no_retry, "SET", "during-load", "1");
          if (seen.is_error()) break;
          co_await sleep_for(5ms);
        }
        CHECK(seen.str.starts_with("LOADING"));
        const auto before = conn.stats().replies;
        auto v = co_await cmd(conn, "SET", "after-load", "1");
        CHECK(v.str == "OK");
        CHECK(!reloading);
        // More than one reply came for it: at least one LOADING was retried.
        CHECK(conn.stats().replies - before >= 2);
        conn.stop();
        no_retry.stop();
        admin.stop();
      },
      60s);
}

TEST_CASE(
    "failover: a catch-up feed subscription through a planned failover gets every item once, "
    "in order, without a gap",
    "[failover][feed][subscribe][catch_up]") {
  // Subscriber and publisher are two clients, both configured with both
  // addresses. The demoted primary keeps its pub/sub clients and Redis
  // replicates PUBLISH to it, so the subscription is not interrupted
  // (docs/reliability.md); whatever happens to the connection, no item may
  // be missed, repeated or reordered.
  through_failover(
      "failover-sub", 300, [&](subscription_through_failover& t) -> asio::awaitable<void> {
        co_await fail_over(t.pa, t.pb, t.servers.replica);
        bool published = co_await wait_until([&] { return t.p.done; }, 60s);
        REQUIRE(published);
        bool all = co_await wait_until([&] { return t.rec.got.size() >= t.p.acked.size(); }, 30s);
        CHECK(all);
        co_await settle();

        for (auto& [what, n] : t.p.failures) {
          INFO(what << " x" << n);
          CHECK(n == 0);
        }
        REQUIRE(t.p.acked.size() == t.total);
        // Exactly the published items, in publish order.
        CHECK(t.rec.got == t.p.acked);
        auto role = co_await role_of(t.pb);
        CHECK(role == "master");
        // The new primary has them all, in the same order.
        thoonk::feed f(t.c, t.name);
        auto ids = co_await f.async_get_ids(asio::use_awaitable);
        CHECK(ids == t.p.acked);
        for (auto& i : t.rec.infos) CHECK(!i.error);
        INFO("subscriber connected " << t.rec.connected << " / disconnected " << t.rec.disconnected
                                     << " times; catch-up rounds " << t.rec.infos.size());
        CHECK(t.rec.connected == t.rec.disconnected);
        std::cout << "{\"bench\": \"failover_subscriber_planned\", \"items\": " << t.rec.got.size()
                  << ", \"subscriber_disconnects\": " << t.rec.disconnected
                  << ", \"catch_up_rounds\": " << t.rec.infos.size() << "}\n";
      });
}

TEST_CASE(
    "failover: after the primary is killed and the replica promoted, a catch-up feed "
    "subscription reconnects to it and misses nothing it holds",
    "[failover][feed][subscribe][catch_up][kill]") {
  // The primary dies with SIGKILL while a publisher runs; the test promotes
  // the replica (as Sentinel would). The subscriber's connection is lost;
  // it must find the new primary among its two addresses by itself, and
  // its catch-up must deliver every item the new primary holds: once each,
  // in the feed's order. Items the subscriber saw from the old primary
  // that never reached the replica (replication is asynchronous) are lost
  // with the old primary; they may only be items published before the kill.
  through_failover(
      "failover-kill", 400, [&](subscription_through_failover& t) -> asio::awaitable<void> {
        // The crash, then the promotion a little later (a Sentinel's
        // detection time, shortened). Or, the worst case, the replica
        // promoted first while the old primary goes on taking writes that
        // the subscriber sees and the new primary never gets: its counter
        // falls behind the subscription's cursor.
        const bool promote_first = GENERATE(false, true);
        INFO("replica promoted before the kill: " << promote_first);
        clock_type::time_point promoted{};
        if (promote_first) {
          co_await cmd(t.pb, "REPLICAOF", "NO", "ONE");
          promoted = clock_type::now();
          const auto seen = t.rec.got.size();
          bool more = co_await wait_until([&] { return t.rec.got.size() >= seen + 100; }, 30s);
          REQUIRE(more);
        }
        // The publisher's next publish may be in flight at the kill: the
        // old primary may have applied it, and its reply, already sent,
        // still be read after the kill (acknowledged, yet only on the
        // server that died). It counts as published before the kill.
        const auto published_before_kill = t.p.acked.size() + t.p.unknown.size() + 1;
        t.rec.since = clock_type::now();
        ::kill(t.servers.primary.pid(), SIGKILL);
        t.servers.primary.stop();  // reaps it
        if (!promote_first) {
          co_await sleep_for(200ms);
          co_await cmd(t.pb, "REPLICAOF", "NO", "ONE");
          promoted = clock_type::now();
        }

        bool published = co_await wait_until([&] { return t.p.done; }, 60s);
        REQUIRE(published);
        REQUIRE(t.rec.first_connected_after != clock_type::time_point{});
        thoonk::feed f(t.c, t.name);
        auto ids = co_await f.async_get_ids(asio::use_awaitable);
        // Every item on the new primary arrives.
        const std::set<std::string> held(ids.begin(), ids.end());
        auto has_all = [&] {
          std::set<std::string> got(t.rec.got.begin(), t.rec.got.end());
          return std::includes(got.begin(), got.end(), held.begin(), held.end());
        };
        bool all = co_await wait_until(has_all, 30s);
        CHECK(all);
        co_await settle();

        // Failures only around the crash: at most the publish in flight,
        // and none of them after the promotion is lost for good.
        for (auto& [what, n] : t.p.failures) INFO(what << " x" << n);
        CHECK(t.p.unknown.size() <= 1);
        CHECK(t.p.acked.size() + t.p.unknown.size() == t.total);
        // Every acknowledged publish after the kill is on the new primary.
        int acked_after_missing = 0;
        for (const auto& id : t.p.acked)
          if (id >= feed_publisher::id_of(static_cast<int>(published_before_kill)) &&
              !held.count(id))
            ++acked_after_missing;
        CHECK(acked_after_missing == 0);

        // Delivered: each held item once, in the feed's order; the rest are
        // items from before the kill that the replica never got.
        bool reset = false;
        for (auto& i : t.rec.infos) {
          CHECK(!i.error);
          reset = reset || i.counter_reset;
        }
        std::vector<std::string> delivered_held;
        std::size_t lost_seen = 0;
        for (const auto& id : t.rec.got) {
          if (held.count(id)) delivered_held.push_back(id);
          else {
            ++lost_seen;
            CHECK(id < feed_publisher::id_of(static_cast<int>(published_before_kill)));
          }
        }
        if (promote_first) {
          // The path this case is for: seen, then lost, then a reset.
          CHECK(lost_seen >= 100);
          CHECK(reset);
        }
        if (!reset) {
          // Without a counter reset nothing comes twice.
          CHECK(delivered_held == ids);
        } else {
          // A reset replays the whole feed (docs/feeds.md): the replay, the
          // last occurrence of each item, is in the feed's order.
          std::vector<std::string> last;
          std::set<std::string> seen;
          for (auto it = t.rec.got.rbegin(); it != t.rec.got.rend(); ++it)
            if (held.count(*it) && seen.insert(*it).second) last.insert(last.begin(), *it);
          CHECK(last == ids);
        }
        CHECK(t.rec.disconnected >= 1);
        CHECK(t.rec.connected >= t.rec.disconnected);
        // The subscriber is connected to the new primary.
        auto clients = co_await cmd(t.pb, "CLIENT", "LIST", "TYPE", "pubsub");
        CHECK(clients.str.find("sub=") != std::string::npos);
        std::cout
            << "{\"bench\": \"failover_subscriber_kill\", \"items_held\": " << ids.size()
            << ", \"delivered\": " << t.rec.got.size() << ", \"seen_then_lost\": " << lost_seen
            << ", \"promoted_first\": " << (promote_first ? "true" : "false")
            << ", \"counter_reset\": " << (reset ? "true" : "false")
            << ", \"kill_to_subscriber_connected_ms\": "
            << std::chrono::duration<double, std::milli>(t.rec.first_connected_after - t.rec.since)
                   .count()
            << ", \"promotion_to_subscriber_connected_ms\": "
            << std::chrono::duration<double, std::milli>(t.rec.first_connected_after - promoted)
                   .count()
            << "}\n";
      });
}
