// Catch-up with other contract clients publishing into the same feed. The
// contract's Feed Publish increments feed.publishes inside MULTI/EXEC and
// PUBLISHes afterwards, outside the transaction; the publisher here is
// written with those plain commands, so the test can place its EXEC and its
// PUBLISH on either side of a subscriber reconnect.
#include "support/helpers.hpp"

using namespace thoonk::test;
using thoonk::feed_event;
using thoonk::feed_type;

namespace {

rec ev(feed_event::kind_t k, std::string id, std::string item = {}, bool replayed = false) {
  return rec{k, std::move(id), std::move(item), {}, replayed};
}

// The contract's "Feed: Publish" (no max_length), as two halves.
struct contract_publisher {
  thoonk::connection& conn;
  std::string feed;

  // WATCH/MULTI/EXEC half: ZADD + INCR + HSET. Returns true for a new id.
  asio::awaitable<bool> exec(const std::string& id, const std::string& item) {
    auto resp = co_await plain_transaction(conn, [&](thoonk::request& t) {
      t.push("ZADD", key("ids", feed), std::to_string(ms_now()), id);
      t.push("INCR", key("publishes", feed));
      t.push("HSET", key("items", feed), id, item);
    });
    auto& r = resp.back();
    REQUIRE(r.elements.size() == 3);
    co_return r.elements[0].integer == 1;
  }
  // The PUBLISH after EXEC (SPUBLISH on a cluster: notify_command()).
  asio::awaitable<void> announce(bool added, const std::string& id, const std::string& item) {
    co_await raw_notify(conn, feed_channel(added ? "publish" : "edit", feed), nul_join(id, item));
  }
  asio::awaitable<void> publish(const std::string& id, const std::string& item) {
    bool added = co_await exec(id, item);
    co_await announce(added, id, item);
  }
};

// The parties of these tests: those of every gap test (gap_parties) and
// another contract client (plain commands), around one feed.
struct parties : gap_parties {
  thoonk::connection contract_conn{ioc.get_executor(), test_config()};

  // The feed as each party sees it.
  struct scene {
    std::string name;
    thoonk::feed theirs;  // the library publisher's handle
    thoonk::feed mine;    // the catch-up subscriber's handle
    contract_publisher contract;
  };

  // Runs `body(scene)` between connecting everyone with a new feed and
  // deleting it and stopping everyone.
  template <class Body>
  void run(const char* prefix, Body body, std::chrono::seconds deadline) {
    run_coro(
        ioc,
        [&]() -> asio::awaitable<void> {
          co_await contract_conn.async_connect(asio::use_awaitable);
          co_await start();
          auto name = co_await make_feed(pub, prefix, thoonk::feed_type::feed);
          scene s{name, thoonk::feed(pub, name), thoonk::feed(*c, name),
                  contract_publisher{contract_conn, name}};
          co_await body(s);
          co_await pub.async_delete_feed(name, asio::use_awaitable);
          contract_conn.stop();
          co_await finish();
        },
        deadline);
  }
  asio::awaitable<void> open_gap() { co_await user.open_gap(admin); }
  asio::awaitable<void> close_gap() { co_await user.close_gap(admin); }
};

}  // namespace

TEST_CASE(
    "feed catch-up: a contract publisher's EXEC before and PUBLISH after a reconnect, then "
    "gaps mixing library and contract changes: every change exactly once",
    "[feed][feed_notify][catch_up][subscribe][delete_feed][publish]") {
  parties p;
  p.run(
      "cpub",
      [&](parties::scene& scene) -> asio::awaitable<void> {
        auto& [name, theirs, mine, contract] = scene;

        catch_up_log log;
        auto& [got, infos] = log;
        auto sub =
            co_await mine.async_subscribe(log.callback(), log.options(), asio::use_awaitable);

        co_await theirs.async_publish(thoonk::item_id("a"), "A", asio::use_awaitable);  // counter 1
        bool ok = co_await wait_until([&] { return got.size() == 1; });
        REQUIRE(ok);
        co_await sleep_for(3ms);

        // The contract client's EXEC lands before the reconnect's sync read
        // (counter 2), its PUBLISH after the sync marker.
        bool added = co_await contract.exec("k1", "K1");
        CHECK(added);
        co_await p.open_gap();
        co_await p.close_gap();
        ok = co_await wait_until([&] { return infos.size() == 1; });
        REQUIRE(ok);
        co_await contract.announce(added, "k1", "K1");
        co_await settle();

        co_await theirs.async_publish(thoonk::item_id("b"), "B",
                                      asio::use_awaitable);  // counter 3, live
        ok = co_await wait_until([&] { return !got.empty() && got.back().id == "b"; });
        REQUIRE(ok);
        co_await sleep_for(3ms);

        // A gap with a library publish, a contract publish and a contract
        // edit, all made while the subscriber is away.
        co_await p.open_gap();
        co_await theirs.async_publish(thoonk::item_id("c"), "C", asio::use_awaitable);  // counter 4
        co_await sleep_for(3ms);
        co_await contract.publish("k2", "K2");  // counter 5
        co_await sleep_for(3ms);
        co_await contract.publish("a", "A2");  // counter 6, an edit
        co_await settle();
        co_await p.close_gap();
        ok = co_await wait_until([&] { return infos.size() == 2; });
        REQUIRE(ok);

        co_await theirs.async_publish(thoonk::item_id("d"), "D",
                                      asio::use_awaitable);  // counter 7, live
        ok = co_await wait_until([&] { return !got.empty() && got.back().id == "d"; });
        REQUIRE(ok);
        co_await settle();

        constexpr bool rp = true;
        std::vector<rec> expected{
            ev(feed_event::publish, "a", "A"),
            // first reconnect: the contract change read by the sync point
            ev(feed_event::publish, "k1", "K1", rp),
            ev(feed_event::position, "caught-up"),
            // (k1's late PUBLISH is not a new change: not delivered again)
            ev(feed_event::publish, "b", "B"),
            // second gap: the library's change by counter, then the other
            // client's changes by score
            ev(feed_event::publish, "c", "C", rp),
            ev(feed_event::publish, "k2", "K2", rp),
            ev(feed_event::publish, "a", "A2", rp),
            ev(feed_event::position, "caught-up"),
            ev(feed_event::publish, "d", "D"),
        };
        CHECK(got == expected);
        CHECK(sub.cursor() == 7);  // feed.publishes, not a count that ran ahead
        for (const auto& i : infos) CHECK(!i.error);

        sub.reset();
      },
      std::chrono::seconds(60));
}

TEST_CASE(
    "feed catch-up: a contract publish straddling every re-anchor of a long live stream "
    "never makes a later gap skip a change",
    "[feed][feed_notify][catch_up][subscribe][delete_feed][publish]") {
  parties p;
  p.run(
      "cpub-long",
      [&](parties::scene& scene) -> asio::awaitable<void> {
        auto& [name, theirs, mine, contract] = scene;
        std::map<std::string, int> seen;  // id -> deliveries
        int catch_ups = 0;
        thoonk::feed_subscribe_options opts;
        opts.catch_up = true;
        opts.on_catch_up = [&](const thoonk::catch_up_info&) { ++catch_ups; };
        auto sub = co_await mine.async_subscribe(
            [&](const feed_event& e) {
              if (e.kind == feed_event::publish) ++seen[std::string(e.id)];
            },
            opts, asio::use_awaitable);

        // 3,000 library publishes (three re-anchors of the subscription's
        // ledger) with contract publishes whose EXEC and PUBLISH are split
        // by 50 library publishes each, then a gap with library publishes.
        int expected_ids = 0;
        for (int i = 0; i < 3000; ++i) {
          if (i % 100 == 0) {
            std::string cid = "c" + std::to_string(i);
            bool added = co_await contract.exec(cid, "X");
            for (int j = 0; j < 50; ++j, ++i)
              co_await theirs.async_publish(thoonk::item_id("l" + std::to_string(i)), "L",
                                            asio::use_awaitable);
            co_await contract.announce(added, cid, "X");
            expected_ids += 51;
          }
          co_await theirs.async_publish(thoonk::item_id("l" + std::to_string(i)), "L",
                                        asio::use_awaitable);
          ++expected_ids;
        }
        bool ok =
            co_await wait_until([&] { return static_cast<int>(seen.size()) == expected_ids; }, 30s);
        CHECK(ok);
        co_await p.open_gap();
        for (int i = 0; i < 10; ++i)
          co_await theirs.async_publish(thoonk::item_id("gap" + std::to_string(i)), "G",
                                        asio::use_awaitable);
        co_await p.close_gap();
        ok = co_await wait_until([&] { return catch_ups == 1; });
        REQUIRE(ok);
        co_await settle();
        for (int i = 0; i < 10; ++i) CHECK(seen["gap" + std::to_string(i)] == 1);
        int twice = 0;
        for (const auto& [id, n] : seen) twice += n != 1;
        CHECK(twice == 0);
        CHECK(static_cast<int>(seen.size()) == expected_ids + 10);
        sub.reset();
      },
      std::chrono::seconds(120));
}
