// CLIENT PAUSE longer than the lease. Worker A holds a job and heartbeats
// it as it should, one heartbeat at a time; the server freezes for three
// leases. The heartbeat A sent during the freeze runs when the freeze ends,
// carrying the time A sent it, so the lease has lapsed by then although A
// never stopped heartbeating. Maintenance (another client) reclaims the
// job, worker B (waiting in claim) gets it and finishes it; A's next
// heartbeat and its finish are refused with lost_claim. Exactly one finish.
#include "fault_support.hpp"
#include "support/helpers.hpp"

#include <sstream>

using namespace thoonk::test;
using namespace thoonk::faults;

TEST_CASE(
    "faults: CLIENT PAUSE longer than the lease: the job is reclaimed, the stale finish "
    "refused",
    "[faults][pause]") {
  constexpr auto lease = 500ms;
  constexpr auto pause = 1500ms;
  constexpr auto heartbeat_every = 200ms;
  thoonk::test::redis_server srv;
  asio::io_context ioc;
  const auto cfg = fault_config(srv.url());
  thoonk::client a(ioc.get_executor(), cfg), b(ioc.get_executor(), cfg), m(ioc.get_executor(), cfg),
      admin(ioc.get_executor(), cfg);
  const std::string name = "faults-pause";
  tally ops;
  std::uint64_t results = 0, claims = 1;
  std::int64_t pause_end = 0, reclaimed_at = 0;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(a, b, m, admin);
        auto qadmin = co_await thoonk::job_queue::async_create_or_open(
            admin, name, requeue_on_lapse(lease), asio::use_awaitable);
        thoonk::job_queue_options fast;
        fast.poll_interval = 100ms;
        auto qa = co_await thoonk::job_queue::async_open(a, name, fast, asio::use_awaitable);
        auto qb = co_await thoonk::job_queue::async_open(b, name, fast, asio::use_awaitable);
        auto qm = co_await thoonk::job_queue::async_open(m, name, asio::use_awaitable);
        const auto id = co_await put_item(qadmin, "the job");
        auto job_a = co_await qa.async_claim(5s, asio::use_awaitable);
        ops.add(outcome::ok);
        REQUIRE(job_a.id == id);

        // B waits for a job; maintenance runs every 50 ms on its own client.
        thoonk::claimed_job job_b;
        boost::system::error_code b_ec = asio::error::would_block;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              auto [ec, j] = co_await qb.async_claim(20s, nothrow);
              reclaimed_at = now_ms();
              b_ec = ec;
              job_b = std::move(j);
            },
            asio::detached);
        asio::cancellation_signal stop_maintenance;
        thoonk::maintenance_options mo = no_stats();
        mo.lock_ttl = 2s;
        qm.async_run_maintenance(50ms, mo,
                                 asio::bind_cancellation_slot(stop_maintenance.slot(),
                                                              [](boost::system::error_code) {}));

        // A heartbeats, one at a time, until it is told it lost the claim.
        std::vector<boost::system::error_code> beats;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              for (int i = 0; i < 100; ++i) {
                auto [ec] = co_await qa.async_heartbeat(job_a, nothrow);
                beats.push_back(ec);
                ops.add(classify(ec) == outcome::unknown ? outcome::unknown : outcome::ok);
                if (ec) break;
                co_await sleep_for(heartbeat_every);
              }
            },
            asio::detached);
        co_await sleep_for(heartbeat_every + 50ms);

        auto paused =
            co_await cmd(admin.conn(), "CLIENT", "PAUSE", std::to_string(pause.count()), "ALL");
        REQUIRE(paused.str == "OK");
        pause_end = now_ms() + pause.count();

        // A's work ends after the pause; it finishes the job then, as a
        // worker does that never noticed the freeze.
        co_await wait_until([&] { return b_ec != asio::error::would_block; }, pause + 10s);
        auto [stale] = co_await qa.async_finish(job_a, "from A", nothrow);
        ops.add(classify(stale));
        REQUIRE(!b_ec);
        ops.add(outcome::ok);
        ++claims;
        // A's next heartbeat is refused too (B still holds the job).
        co_await wait_until([&] { return !beats.empty() && beats.back(); }, 5s);
        auto [fresh] = co_await qb.async_finish(job_b, "from B", nothrow);
        ops.add(classify(fresh));

        const auto counts = co_await qadmin.async_counts(asio::use_awaitable);
        const auto stored =
            co_await cmd(admin.conn(), "LRANGE",
                         "feed.jobfinished:" + name + std::string(1, '\0') + id, "0", "-1");
        results = stored.elements.size();
        INFO("heartbeats " << beats.size() << ", last " << beats.back().message());
        CHECK(job_b.id == id);
        CHECK(job_b.token > job_a.token);
        CHECK(stale == thoonk::error::lost_claim);
        CHECK(!fresh);
        CHECK(beats.size() >= 2);
        CHECK(beats.back() == thoonk::error::lost_claim);
        CHECK(counts.finishes == 1);
        CHECK(counts.items == 0);
        CHECK(results == 1);
        if (results == 1) CHECK(stored.elements[0].str == "from B");
        stop_maintenance.emit(asio::cancellation_type::terminal);
        for (auto* c : {&a, &b, &m, &admin}) c->stop();
      },
      30s);
  std::ostringstream rec;
  rec << "pause end → reclaimed by B " << (reclaimed_at - pause_end) << " ms (lease "
      << lease.count() << " ms); " << results << " finish, A's refused (lost_claim)";
  report({"CLIENT PAUSE " + std::to_string(pause.count()) + " ms > lease " +
              std::to_string(lease.count()) + " ms",
          // The duplicate is the reclaim itself: A's work ran, then B's.
          ops.total(), results == 0 ? 1u : 0u, claims - 1, ops.unknown, rec.str()});
}
