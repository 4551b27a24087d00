// Feed notifications against a real redis-server: typed events, exactly
// once per callback, one server subscription per channel, unsubscribe on
// drop, and catch-up across subscriber reconnects (CLIENT KILL while
// another client publishes; a deterministic gap with exact edit/retract
// semantics; resume from a saved cursor).
#include "support/helpers.hpp"

#include <set>

using namespace thoonk::test;
using thoonk::feed_event;
using thoonk::feed_position;
using thoonk::feed_type;

namespace {

// How many connections subscribe to channel `ch`: PUBSUB NUMSUB on one
// server; under cluster_topology(), where the channel is a shard channel,
// PUBSUB SHARDNUMSUB on the primary serving its slot.
asio::awaitable<std::int64_t> numsub(thoonk::connection& c, const std::string& ch) {
  if (cluster_topology()) {
    thoonk::request r;
    r.push("PUBSUB", "SHARDNUMSUB", ch);
    auto resp = co_await exec_on_node(c, owner_port(ch), r);
    co_return resp.at(0).elements.at(1).integer;
  }
  auto v = co_await cmd(c, "PUBSUB", "NUMSUB", ch);
  co_return v.elements.at(1).integer;  // RESP3 map {ch: n} / RESP2 [ch, n]
}

rec R(feed_event::kind_t k, std::string id, std::string item = {}, std::string where = {},
      bool replayed = false) {
  return rec{k, std::move(id), std::move(item), std::move(where), replayed};
}

}  // namespace

CLIENT_TEST_CASE(
    "notify",
    "feed notify: typed events reach every callback exactly once, one server subscription",
    "[feed][feed_notify][delete_feed][publish][retract][subscribe]") {
  thoonk::client pub(fx.ioc.get_executor(), test_config());
  co_await pub.async_connect(asio::use_awaitable);
  auto name = co_await make_feed(pub, "notify", feed_type::feed, max_len(2));
  thoonk::feed mine(c, name), theirs(pub, name);
  std::vector<rec> a, b, cu;
  std::set<std::string> feeds_seen;
  auto s1 = co_await mine.async_subscribe(
      [&](const feed_event& e) {
        a.push_back(to_rec(e));
        feeds_seen.emplace(e.feed);
      },
      asio::use_awaitable);
  auto s2 = co_await mine.async_subscribe([&](const feed_event& e) { b.push_back(to_rec(e)); },
                                          asio::use_awaitable);
  thoonk::feed_subscribe_options opts;
  opts.catch_up = true;
  auto s3 = co_await mine.async_subscribe([&](const feed_event& e) { cu.push_back(to_rec(e)); },
                                          opts, asio::use_awaitable);
  std::vector<std::string> kinds{"publish", "edit", "retract"};
  for (const auto& what : kinds) {
    auto n = co_await numsub(pub.conn(), feed_channel(what, name));
    CHECK(n == 1);  // three subscriptions, one server subscription
  }

  // Distinct milliseconds: the feed's order is (publish ms, id).
  co_await theirs.async_publish(thoonk::item_id("x"), "1", asio::use_awaitable);
  co_await sleep_for(3ms);
  co_await theirs.async_publish(thoonk::item_id("y"), "2", asio::use_awaitable);
  co_await sleep_for(3ms);
  co_await theirs.async_publish(thoonk::item_id("x"), "1b",
                                asio::use_awaitable);  // edit: x is now newest
  co_await sleep_for(3ms);
  co_await theirs.async_publish(thoonk::item_id("z"), "3", asio::use_awaitable);  // evicts y
  co_await theirs.async_retract("x", asio::use_awaitable);
  std::vector<rec> expected{R(feed_event::publish, "x", "1"), R(feed_event::publish, "y", "2"),
                            R(feed_event::edit, "x", "1b"),   R(feed_event::retract, "y"),
                            R(feed_event::publish, "z", "3"), R(feed_event::retract, "x")};
  bool all = co_await wait_until([&] {
    return a.size() >= expected.size() && b.size() >= expected.size() &&
           cu.size() >= expected.size();
  });
  CHECK(all);
  co_await settle();
  CHECK(a == expected);
  CHECK(b == expected);
  CHECK(cu == expected);
  CHECK(feeds_seen == std::set<std::string>{name});
  CHECK(s1.stats().delivered == expected.size());
  CHECK(s3.cursor() == 4);  // publishes + edits seen: feed.publishes

  // Dropping handles: the other callbacks still get events; the last one
  // unsubscribes on the server.
  s1.reset();
  CHECK(!s1.active());
  co_await theirs.async_publish(thoonk::item_id("w"), "4", asio::use_awaitable);
  bool got = co_await wait_until([&] { return b.size() == expected.size() + 1; });
  CHECK(got);
  co_await settle();
  CHECK(a.size() == expected.size());
  s2.reset();
  s3.reset();
  co_await settle();
  auto n = co_await numsub(pub.conn(), feed_channel("publish", name));
  CHECK(n == 0);
  co_await pub.async_delete_feed(name, asio::use_awaitable);
  pub.stop();
}

CLIENT_TEST_CASE(
    "t", "feed notify: sorted feed events, a throwing callback, reset from inside a callback",
    "[feed][feed_notify][sorted_feed][append][delete_feed][edit][move_before][move_to_end]"
    "[prepend][publish_after][retract][subscribe]") {
  auto name = co_await make_feed(c, "notify-sorted", feed_type::sorted_feed);
  thoonk::sorted_feed s(c, name);
  std::vector<rec> got, after_throw;
  int thrown = 0;
  auto sub = co_await s.async_subscribe([&](const feed_event& e) { got.push_back(to_rec(e)); },
                                        asio::use_awaitable);
  auto bad = co_await s.async_subscribe(
      [&](const feed_event&) {
        ++thrown;
        throw std::runtime_error("callback failure");
      },
      asio::use_awaitable);
  thoonk::feed_subscription self_reset;
  int self_calls = 0;
  self_reset = co_await s.async_subscribe(
      [&](const feed_event&) {
        ++self_calls;
        self_reset.reset();  // from inside its own callback
      },
      asio::use_awaitable);

  co_await s.async_append("a", asio::use_awaitable);                               // 1
  co_await s.async_prepend("b", asio::use_awaitable);                              // 2
  co_await s.async_publish_after(thoonk::item_id("1"), "c", asio::use_awaitable);  // 3
  co_await s.async_edit(thoonk::item_id("1"), "a2", asio::use_awaitable);
  co_await s.async_move_to_end("2", asio::use_awaitable);
  co_await s.async_move_before("3", "2", asio::use_awaitable);
  co_await s.async_retract("1", asio::use_awaitable);
  std::vector<rec> expected{
      R(feed_event::publish, "1", "a"),
      R(feed_event::position, "1", "", ":end"),
      R(feed_event::publish, "2", "b"),
      R(feed_event::position, "2", "", "begin:"),
      R(feed_event::publish, "3", "c"),
      R(feed_event::position, "3", "", "1:"),
      R(feed_event::publish, "1", "a2"),  // the contract's edit: publish, no position
      R(feed_event::position, "2", "", ":end"),
      R(feed_event::position, "3", "", ":2"),
      R(feed_event::retract, "1"),
  };
  bool all = co_await wait_until([&] { return got.size() >= expected.size(); });
  CHECK(all);
  co_await settle();
  CHECK(got == expected);
  CHECK(thrown == static_cast<int>(expected.size()));
  CHECK(bad.stats().callback_errors == expected.size());
  CHECK(self_calls == 1);
  co_await c.async_delete_feed(name, asio::use_awaitable);
}

TEST_CASE(
    "feed notify: catch-up across CLIENT KILL TYPE pubsub while another client publishes "
    "10,000 items: all, in order, none twice",
    "[feed][feed_notify][catch_up][delete_feed][publish][subscribe]") {
  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), test_config());
  thoonk::client pub(ioc.get_executor(), test_config());
  thoonk::connection admin(ioc.get_executor(), test_config());
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(c, pub, admin);
        constexpr int total = 10000;
        auto name = co_await make_feed(pub, "catchup", feed_type::feed);
        thoonk::feed f(c, name);
        std::vector<std::string> got, plain;
        std::vector<thoonk::catch_up_info> infos;
        int disconnects = 0;
        auto ev = c.sub().on_event([&](const thoonk::subscriber_event& e) {
          disconnects += e.kind == thoonk::subscriber_event::disconnected;
        });
        thoonk::feed_subscribe_options opts;
        opts.catch_up = true;
        opts.on_catch_up = [&](const thoonk::catch_up_info& i) { infos.push_back(i); };
        auto s1 = co_await f.async_subscribe(
            [&](const feed_event& e) {
              if (e.kind == feed_event::publish) got.emplace_back(e.id);
            },
            opts, asio::use_awaitable);
        auto s2 = co_await f.async_subscribe([&](const feed_event& e) { plain.emplace_back(e.id); },
                                             asio::use_awaitable);

        bool published = false;
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              thoonk::feed theirs(pub, name);
              char id[16];
              for (int i = 0; i < total; ++i) {
                std::snprintf(id, sizeof id, "k%05d", i);
                co_await theirs.async_publish(thoonk::item_id(id), "item", asio::use_awaitable);
              }
              published = true;
            },
            asio::detached);

        // Kill the subscriber three times while the publisher is running.
        int kills = 0;
        std::vector<int> kill_at{1500, 4500, 7500};
        for (int at : kill_at) {
          bool reached =
              co_await wait_until([&] { return static_cast<int>(got.size()) >= at; }, 60s);
          REQUIRE(reached);
          if (published) break;
          auto killed = co_await cmd(admin, "CLIENT", "KILL", "TYPE", "pubsub");
          kills += killed.integer >= 1;
        }
        CHECK(kills >= 1);
        bool all = co_await wait_until([&] { return published && got.size() >= total; }, 90s);
        CHECK(all);
        co_await settle();
        REQUIRE(got.size() == total);
        int out_of_order = 0;
        char id[16];
        for (int i = 0; i < total; ++i) {
          std::snprintf(id, sizeof id, "k%05d", i);
          out_of_order += got[i] != id;
        }
        CHECK(out_of_order == 0);
        CHECK(std::set<std::string>(got.begin(), got.end()).size() == total);
        CHECK(disconnects >= kills);
        CHECK(static_cast<int>(infos.size()) >= kills);
        std::uint64_t replayed = 0;
        for (auto& i : infos) {
          CHECK(!i.error);
          CHECK(i.retractions == 0);
          replayed += i.items;
        }
        CHECK(replayed == s1.stats().replayed);
        CHECK(s1.cursor() == total);
        // The plain subscription saw no duplicates either, but may have gaps.
        CHECK(std::set<std::string>(plain.begin(), plain.end()).size() == plain.size());
        CHECK(plain.size() <= total);
        INFO("replayed " << replayed << ", plain subscription missed " << total - plain.size());
        CHECK(true);
        co_await pub.async_delete_feed(name, asio::use_awaitable);
        c.stop();
        pub.stop();
        admin.stop();
      },
      std::chrono::seconds(150));
}

TEST_CASE(
    "feed notify: catch-up of a deterministic gap: edits as latest version, retractions, "
    "evictions, then live events; resume from a cursor",
    "[feed][feed_notify][catch_up][delete_feed][get_ids][publish][retract][subscribe]") {
  gap_parties p;
  auto& [ioc, admin, pub, user, c] = p;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await p.start();
    auto name = co_await make_feed(pub, "gap", feed_type::feed, max_len(4));
    thoonk::feed theirs(pub, name), mine(*c, name);
    catch_up_log log;  // with a marker in the event stream after each catch-up
    auto& [got, infos] = log;
    auto sub = co_await mine.async_subscribe(log.callback(), log.options(), asio::use_awaitable);
    std::vector<std::pair<std::string, std::string>> first{{"a", "A"}, {"b", "B"}, {"c", "C"}};
    for (const auto& [id, item] : first) {
      co_await theirs.async_publish(thoonk::item_id(id), item, asio::use_awaitable);
      co_await sleep_for(3ms);
    }
    bool live = co_await wait_until([&] { return got.size() == 3; });
    CHECK(live);
    CHECK(sub.cursor() == 3);

    co_await user.open_gap(admin);
    co_await theirs.async_retract("a", asio::use_awaitable);  // seen before: reported
    co_await theirs.async_publish(thoonk::item_id("b"), "B1",
                                  asio::use_awaitable);  // edited twice: latest only
    co_await theirs.async_publish(thoonk::item_id("b"), "B2", asio::use_awaitable);
    co_await theirs.async_publish(thoonk::item_id("d"), "D", asio::use_awaitable);
    co_await theirs.async_publish(thoonk::item_id("x"), "X",
                                  asio::use_awaitable);  // published and retracted
    co_await theirs.async_retract("x", asio::use_awaitable);
    co_await theirs.async_publish(thoonk::item_id("y"), "Y1",
                                  asio::use_awaitable);  // retracted, then re-published
    co_await theirs.async_retract("y", asio::use_awaitable);
    co_await theirs.async_publish(thoonk::item_id("y"), "Y2", asio::use_awaitable);
    co_await theirs.async_publish(thoonk::item_id("e"), "E",
                                  asio::use_awaitable);  // evicts c (max_length 4)
    co_await theirs.async_publish(thoonk::item_id("g"), "G", asio::use_awaitable);  // evicts b
    co_await settle();
    CHECK(got.size() == 3);  // nothing arrived during the gap
    co_await user.close_gap(admin);

    bool caught = co_await wait_until([&] { return infos.size() == 1; });
    REQUIRE(caught);
    co_await theirs.async_publish(thoonk::item_id("h"), "H",
                                  asio::use_awaitable);  // live again; evicts d
    bool h = co_await wait_until([&] { return !got.empty() && got.back().id == "h"; });
    CHECK(h);
    co_await settle();
    constexpr bool rp = true;
    // Publish counter values: a1 b2 c3 | b4 b5 d6 x7 y8 y9 e10 g11 | h12.
    // Retraction log: a@3 x@7 y@8 c@9 b@10 (d@11 later).
    std::vector<rec> expected{
        R(feed_event::publish, "a", "A"),
        R(feed_event::publish, "b", "B"),
        R(feed_event::publish, "c", "C"),
        // the replay, in publish-counter order, each change once:
        R(feed_event::retract, "a", "", "", rp),
        R(feed_event::publish, "d", "D", "", rp),
        R(feed_event::retract, "x", "", "", rp),  // never seen: a no-op for the app
        R(feed_event::retract, "y", "", "", rp),
        R(feed_event::publish, "y", "Y2", "", rp),
        R(feed_event::retract, "c", "", "", rp),
        R(feed_event::publish, "e", "E", "", rp),
        R(feed_event::retract, "b", "", "", rp),  // its edits are moot: it is gone
        R(feed_event::publish, "g", "G", "", rp),
        R(feed_event::position, "caught-up"),
        R(feed_event::retract, "d"),  // evicted by h, live
        R(feed_event::publish, "h", "H"),
    };
    CHECK(got == expected);
    REQUIRE(infos.size() == 1);
    CHECK(infos[0].from == 3);
    CHECK(infos[0].to == 11);
    CHECK(infos[0].items == 4);
    CHECK(infos[0].retractions == 5);
    CHECK(infos[0].retractions_complete);
    CHECK(!infos[0].counter_reset);
    CHECK(sub.cursor() == 12);
    auto ids = co_await theirs.async_get_ids(asio::use_awaitable);
    std::sort(ids.begin(), ids.end());  // y and e may share a millisecond
    CHECK(ids == std::vector<std::string>{"e", "g", "h", "y"});

    // Resuming from the saved cursor 3 replays every change after it (the
    // retraction at exactly the cursor included), then live events.
    std::vector<rec> resumed;
    thoonk::feed_subscribe_options ropts;
    ropts.catch_up = true;
    ropts.resume_from = 3;
    auto sub2 = co_await mine.async_subscribe(
        [&](const feed_event& e) { resumed.push_back(to_rec(e)); }, ropts, asio::use_awaitable);
    bool r = co_await wait_until([&] { return sub2.stats().catch_ups == 1; });
    CHECK(r);
    std::vector<rec> expected2{
        // d is gone by now: only its retraction is replayed
        R(feed_event::retract, "a", "", "", rp), R(feed_event::retract, "x", "", "", rp),
        R(feed_event::retract, "y", "", "", rp), R(feed_event::publish, "y", "Y2", "", rp),
        R(feed_event::retract, "c", "", "", rp), R(feed_event::publish, "e", "E", "", rp),
        R(feed_event::retract, "b", "", "", rp), R(feed_event::publish, "g", "G", "", rp),
        R(feed_event::retract, "d", "", "", rp), R(feed_event::publish, "h", "H", "", rp),
    };
    CHECK(resumed == expected2);
    CHECK(sub2.cursor() == 12);

    sub.reset();
    sub2.reset();
    co_await pub.async_delete_feed(name, asio::use_awaitable);
    co_await p.finish();
  });
}

TEST_CASE("feed notify: sorted feed catch-up and a lost retraction log",
          "[feed][feed_notify][catch_up][sorted_feed][append][delete_feed][edit][move_to_begin]"
          "[prepend][retract][subscribe]") {
  gap_parties p;
  auto& [ioc, admin, pub, user, c] = p;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await p.start();
    thoonk::feed_config cfg{{"retraction_log", "2"}};
    auto name = co_await make_feed(pub, "gap-sorted", feed_type::sorted_feed, cfg);
    thoonk::sorted_feed theirs(pub, name), mine(*c, name);
    std::vector<rec> got;
    std::vector<thoonk::catch_up_info> infos;
    thoonk::feed_subscribe_options opts;
    opts.catch_up = true;
    opts.on_catch_up = [&](const thoonk::catch_up_info& i) { infos.push_back(i); };
    auto sub = co_await mine.async_subscribe([&](const feed_event& e) { got.push_back(to_rec(e)); },
                                             opts, asio::use_awaitable);
    co_await theirs.async_append("one", asio::use_awaitable);          // 1
    co_await theirs.async_append("two", asio::use_awaitable);          // 2
    bool live = co_await wait_until([&] { return got.size() == 4; });  // 2 x (publish, position)
    CHECK(live);

    co_await user.open_gap(admin);
    co_await theirs.async_edit(thoonk::item_id("1"), "one'", asio::use_awaitable);
    co_await theirs.async_prepend("three", asio::use_awaitable);  // 3
    co_await theirs.async_move_to_begin("2", asio::use_awaitable);
    std::vector<std::string> extra;
    for (int i = 0; i < 70; ++i)
      extra.push_back(co_await theirs.async_append("x", asio::use_awaitable));
    for (auto& id : extra) co_await theirs.async_retract(id, asio::use_awaitable);  // > log size
    co_await user.close_gap(admin);
    bool caught = co_await wait_until([&] { return infos.size() == 1; });
    REQUIRE(caught);
    co_await settle();
    constexpr bool rp = true;
    // Replayed: changed items once each, latest version, no positions (the
    // move of 2 is not replayed); retractions beyond the log are lost and
    // reported as such.
    REQUIRE(got.size() >= 6);
    std::vector<rec> head(got.begin() + 4, got.begin() + 6);
    CHECK(head == std::vector<rec>{R(feed_event::publish, "1", "one'", "", rp),
                                   R(feed_event::publish, "3", "three", "", rp)});
    CHECK(!infos[0].retractions_complete);
    CHECK(infos[0].items == 2);  // the 70 extra items were retracted: not replayed
    for (std::size_t i = 6; i < got.size(); ++i) CHECK(got[i].kind == feed_event::retract);
    co_await pub.async_delete_feed(name, asio::use_awaitable);
    sub.reset();
    co_await p.finish();
  });
}

TEST_CASE("feed notify: many subscriber clients each get every event once",
          "[feed][feed_notify][delete_feed][publish][subscribe]") {
  asio::io_context ioc;
  thoonk::client pub(ioc.get_executor(), test_config());
  std::vector<std::unique_ptr<thoonk::client>> clients;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await pub.async_connect(asio::use_awaitable);
    auto name = co_await make_feed(pub, "many", feed_type::feed);
    constexpr int n_clients = 16, n_items = 20;
    std::vector<std::vector<std::string>> got(n_clients);
    std::vector<thoonk::feed_subscription> subs;
    for (int i = 0; i < n_clients; ++i) {
      clients.push_back(std::make_unique<thoonk::client>(ioc.get_executor(), test_config()));
      co_await clients.back()->async_connect(asio::use_awaitable);
      thoonk::feed f(*clients.back(), name);
      thoonk::feed_subscribe_options opts;
      opts.catch_up = i % 2 == 1;
      thoonk::feed_callback cb = [&got, i](const feed_event& e) { got[i].emplace_back(e.id); };
      subs.push_back(co_await f.async_subscribe(cb, opts, asio::use_awaitable));
    }
    thoonk::feed theirs(pub, name);
    std::vector<std::string> ids;
    for (int k = 0; k < n_items; ++k) {
      ids.push_back("i" + std::to_string(k));
      co_await theirs.async_publish(thoonk::item_id(ids.back()), "x", asio::use_awaitable);
    }
    bool all = co_await wait_until([&] {
      return std::all_of(got.begin(), got.end(),
                         [&](auto& g) { return g.size() >= std::size_t(n_items); });
    });
    CHECK(all);
    co_await settle();
    for (auto& g : got) CHECK(g == ids);
    subs.clear();
    for (auto& c : clients) c->stop();
    co_await pub.async_delete_feed(name, asio::use_awaitable);
    pub.stop();
  });
}

TEST_CASE("feed notify: catch-up when the feed was deleted, or deleted and re-created, in a gap",
          "[feed][feed_notify][catch_up][create_feed][delete_feed][publish][subscribe]") {
  gap_parties p;
  auto& [ioc, admin, pub, user, c] = p;
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await p.start();
    auto recreated = co_await make_feed(pub, "reset", feed_type::feed);
    auto deleted = co_await make_feed(pub, "gone", feed_type::feed);
    std::vector<rec> got;
    std::vector<thoonk::catch_up_info> infos_r, infos_d;
    thoonk::feed_subscribe_options o1, o2;
    o1.catch_up = o2.catch_up = true;
    o1.on_catch_up = [&](const thoonk::catch_up_info& i) { infos_r.push_back(i); };
    o2.on_catch_up = [&](const thoonk::catch_up_info& i) { infos_d.push_back(i); };
    thoonk::feed_callback cb = [&](const feed_event& e) { got.push_back(to_rec(e)); };
    auto s1 = co_await thoonk::feed(*c, recreated).async_subscribe(cb, o1, asio::use_awaitable);
    auto s2 = co_await thoonk::feed(*c, deleted).async_subscribe(cb, o2, asio::use_awaitable);
    thoonk::feed r(pub, recreated);
    for (int i = 0; i < 3; ++i)
      co_await r.async_publish(thoonk::item_id("old" + std::to_string(i)), "o",
                               asio::use_awaitable);
    bool live = co_await wait_until([&] { return got.size() == 3; });
    CHECK(live);

    co_await user.open_gap(admin);
    co_await pub.async_delete_feed(recreated, asio::use_awaitable);
    co_await pub.async_delete_feed(deleted, asio::use_awaitable);
    co_await pub.async_create_feed(recreated, feed_type::feed, thoonk::feed_config(),
                                   asio::use_awaitable);
    co_await r.async_publish(thoonk::item_id("new0"), "n", asio::use_awaitable);
    co_await r.async_publish(thoonk::item_id("new1"), "n", asio::use_awaitable);
    co_await user.close_gap(admin);
    bool caught = co_await wait_until([&] { return infos_r.size() == 1 && infos_d.size() == 1; });
    REQUIRE(caught);
    CHECK(infos_r[0].counter_reset);
    CHECK(infos_r[0].items == 2);
    CHECK(!infos_r[0].error);
    CHECK(infos_d[0].error == thoonk::error::feed_not_found);
    co_await settle();
    REQUIRE(got.size() == 5);
    CHECK(got[3] == R(feed_event::publish, "new0", "n", "", true));
    CHECK(got[4] == R(feed_event::publish, "new1", "n", "", true));
    CHECK(s1.cursor() == 2);
    s1.reset();
    s2.reset();
    co_await pub.async_delete_feed(recreated, asio::use_awaitable);
    co_await p.finish();
  });
}
