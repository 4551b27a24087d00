// A primary and a replica on two loopback ports started by the test; a
// client configured with both addresses (config::endpoints). A failover
// done by hand (writes paused on the primary until the replica caught up,
// REPLICAOF NO ONE on the replica, REPLICAOF on the old primary) is followed
// by the client by itself: puts and claims around it neither fail with
// READONLY nor get lost (docs/reliability.md, "Replicas and failover").
#include "support/helpers.hpp"
#include "support/replica_pair.hpp"

#include <iostream>
#include <set>

using namespace thoonk::test;
using E = thoonk::error;
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
    co_await c.connect(asio::use_awaitable);
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
    auto [ec] = co_await conn.connect(nothrow);
    CHECK(ec == E::not_primary);
    // Not a refusal: requests wait for a primary instead of failing ...
    thoonk::request req;
    req.push("PING");
    thoonk::exec_options o;
    o.timeout = 300ms;
    auto [pec, resp] = co_await conn.exec(req, o, nothrow);
    CHECK(pec == E::request_timeout);
    REQUIRE(!events->empty());
    CHECK(events->front().kind == thoonk::connection_event::connect_failed);
    CHECK(!events->front().setup_refused);
    CHECK(events->front().server_message == "ROLE: slave");
    // ... and the replica promoted becomes usable.
    thoonk::connection admin(ioc.get_executor(), replica_pair::config_for(servers.replica));
    co_await admin.connect(asio::use_awaitable);
    co_await cmd(admin, "REPLICAOF", "NO", "ONE");
    auto [pec2, resp2] = co_await conn.exec(req, nothrow);
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
        co_await c.create_feed(name, thoonk::feed_type::job, {}, asio::use_awaitable);
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
                auto [ec, id] = co_await q.put("job-" + std::to_string(i), nothrow);
                if (ec) ++failures[ec.message()];
                else {
                  acked.push_back(id);
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
                auto [ec, job] = co_await q.claim(200ms, nothrow);
                if (ec == E::queue_empty) continue;
                if (ec) {
                  ++failures["claim: " + ec.message()];
                  continue;
                }
                auto [fec] = co_await q.finish(job, nothrow);
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
        auto counts = co_await check.counts(asio::use_awaitable);
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
              co_await admin.exec(r, nothrow);
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
