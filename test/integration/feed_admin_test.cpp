// Feed management against a real redis-server: create / delete / exists /
// list / config (plain and JSON), the newfeed / delfeed / conffeed payloads
// byte for byte, typed management events, and input validation.
#include "support/helpers.hpp"

using namespace thoonk::test;
using thoonk::feed_type;

CLIENT_TEST_CASE("admin",
                 "feed admin: create, exists, list, config; contract keys and newfeed payload",
                 "[feed][feed_admin][create_feed][delete_feed][feed_exists][get_config][list_feeds]"
                 "[set_config]") {
  auto cap = co_await capture_patterns(fx.raw, "newfeed", "delfeed", "conffeed");
  auto name = unique_name("admin");

  auto [e0, exists0] = co_await c.async_feed_exists(name, nothrow);
  CHECK(!e0);
  CHECK(!exists0);

  auto [ec] = co_await c.async_create_feed(name, feed_type::feed, max_len(5), nothrow);
  REQUIRE(!ec);
  auto [e1, exists1] = co_await c.async_feed_exists(name, nothrow);
  CHECK(exists1);
  auto [e2, names] = co_await c.async_list_feeds(nothrow);
  CHECK(std::find(names.begin(), names.end(), name) != names.end());
  CHECK(std::is_sorted(names.begin(), names.end()));

  // Raw: the feeds set and the config hash, exactly.
  auto member = co_await cmd(c.conn(), "SISMEMBER", "feeds", name);
  CHECK(member.integer == 1);
  auto conf = co_await cmd(c.conn(), "HGETALL", key("config", name));
  std::vector<std::string> flat;
  for (auto& e : conf.elements) flat.push_back(e.str);  // RESP3 map: k, v, k, v
  REQUIRE(flat.size() == 4);
  std::map<std::string, std::string> m{{flat[0], flat[1]}, {flat[2], flat[3]}};
  CHECK(m == std::map<std::string, std::string>{{"type", "feed"}, {"max_length", "5"}});

  // Creating it again: a distinct error, nothing changed, nothing published.
  auto [ec2] =
      co_await c.async_create_feed(name, feed_type::sorted_feed, thoonk::feed_config(), nothrow);
  CHECK(ec2 == thoonk::error::feed_exists);
  auto t = co_await cmd(c.conn(), "HGET", key("config", name), "type");
  CHECK(t.str == "feed");

  // Config values.
  auto [e3, v] = co_await c.async_get_config(name, "max_length", nothrow);
  CHECK(!e3);
  CHECK(v == std::optional<std::string>("5"));
  auto [e4, unset] = co_await c.async_get_config(name, "nothing-here", nothrow);
  CHECK(!e4);
  CHECK(!unset);
  auto [e5] = co_await c.async_set_config(name, "max_length", "7", nothrow);
  CHECK(!e5);
  auto raw_len = co_await cmd(c.conn(), "HGET", key("config", name), "max_length");
  CHECK(raw_len.str == "7");
  auto [e6] = co_await c.async_set_config(name, "owner", std::string("a\0b", 3), nothrow);
  CHECK(!e6);
  auto [e7, owner] = co_await c.async_get_config(name, "owner", nothrow);
  CHECK(owner == std::optional<std::string>(std::string("a\0b", 3)));

  // Payloads: name\0instance-uuid, once per change.
  co_await wait_until([&] { return cap->msgs.size() >= 3; });
  co_await settle();
  std::vector<msg> expected{{"newfeed", nul_join(name, c.instance_id())},
                            {"conffeed", nul_join(name, c.instance_id())},
                            {"conffeed", nul_join(name, c.instance_id())}};
  std::vector<msg> mine;
  for (auto& mm : cap->msgs)
    if (mm.second.starts_with(name + std::string(1, '\0'))) mine.push_back(mm);
  CHECK(mine == expected);
  CHECK(c.instance_id().size() == 36);

  auto [e8] = co_await c.async_delete_feed(name, nothrow);
  CHECK(!e8);
}

CLIENT_TEST_CASE("del", "feed admin: delete removes every key and publishes delfeed",
                 "[feed][feed_admin][append][delete_feed][feed_exists][publish][retract]") {
  auto cap = co_await capture_patterns(fx.raw, "delfeed");
  auto name = co_await make_feed(c, "del", feed_type::feed, max_len(2));
  thoonk::feed f(c, name);
  for (int i = 0; i < 4; ++i)
    co_await f.async_publish("item" + std::to_string(i), asio::use_awaitable);
  co_await f.async_retract("nope", asio::use_awaitable);
  auto sname = co_await make_feed(c, "del-sorted", feed_type::sorted_feed);
  thoonk::sorted_feed s(c, sname);
  auto id = co_await s.async_append("x", asio::use_awaitable);
  co_await s.async_retract(id, asio::use_awaitable);
  co_await s.async_append("y", asio::use_awaitable);

  std::vector<std::string> both{name, sname};
  for (const auto& n : both) {
    auto keys = co_await cmd(c.conn(), "KEYS", key("*", n));
    CHECK(!keys.elements.empty());
    auto [ec] = co_await c.async_delete_feed(n, nothrow);
    CHECK(!ec);
    keys = co_await cmd(c.conn(), "KEYS", "*" + n + "*");
    CHECK(keys.elements.empty());
    auto member = co_await cmd(c.conn(), "SISMEMBER", "feeds", n);
    CHECK(member.integer == 0);
    auto [e2, exists] = co_await c.async_feed_exists(n, nothrow);
    CHECK(!exists);
  }
  co_await wait_until([&] { return cap->msgs.size() >= 2; });
  co_await settle();
  std::vector<msg> delfeeds = cap->msgs;
  std::vector<msg> expected_delfeeds{{"delfeed", nul_join(name, c.instance_id())},
                                     {"delfeed", nul_join(sname, c.instance_id())}};
  if (cluster_topology()) {
    // On a cluster each delfeed is published on its feed's node and crosses
    // the cluster bus: two feeds' events may arrive in either order.
    std::sort(delfeeds.begin(), delfeeds.end());
    std::sort(expected_delfeeds.begin(), expected_delfeeds.end());
  }
  CHECK(delfeeds == expected_delfeeds);

  // Deleting again, or using the deleted feed: feed_not_found.
  auto [e3] = co_await c.async_delete_feed(name, nothrow);
  CHECK(e3 == thoonk::error::feed_not_found);
  auto [e4, r] = co_await f.async_publish("again", nothrow);
  CHECK(e4 == thoonk::error::feed_not_found);
  auto keys = co_await cmd(c.conn(), "KEYS", "*" + name + "*");
  CHECK(keys.elements.empty());  // the failed publish wrote nothing
}

CLIENT_TEST_CASE(
    "t", "feed admin: missing feeds, wrong types and bad input give distinct errors",
    "[feed][feed_admin][append][create_feed][delete_feed][feed_exists][get_config][get_ids]"
    "[open][publish][set_config][subscribe]") {
  auto missing = unique_name("missing");
  co_await expect_each_fails(
      thoonk::error::feed_not_found,
      [&] { return c.async_set_config(missing, "max_length", "3", nothrow); },
      [&] { return c.async_get_config(missing, "type", nothrow); },
      [&] { return thoonk::feed::async_open(c, missing, nothrow); },
      [&] { return thoonk::sorted_feed::async_open(c, missing, nothrow); });

  auto fname = co_await make_feed(c, "typed", feed_type::feed);
  auto sname = co_await make_feed(c, "typed-sorted", feed_type::sorted_feed);
  auto qname = co_await make_feed(c, "typed-queue", feed_type::queue);
  auto [e5, f2] = co_await thoonk::feed::async_open(c, fname, nothrow);
  CHECK(!e5);
  CHECK(f2.name() == fname);
  auto [e6, s2] = co_await thoonk::sorted_feed::async_open(c, fname, nothrow);
  CHECK(e6 == thoonk::error::wrong_feed_type);
  auto [e7, f3] = co_await thoonk::feed::async_open(c, sname, nothrow);
  CHECK(e7 == thoonk::error::wrong_feed_type);
  auto [e8, f4] = co_await thoonk::feed::async_open(c, qname, nothrow);
  CHECK(e8 == thoonk::error::wrong_feed_type);
  // Unchecked handles: every operation checks the type too.
  thoonk::feed wrong(c, sname);
  auto [e9, r9] = co_await wrong.async_publish("x", nothrow);
  CHECK(e9 == thoonk::error::wrong_feed_type);
  auto [e10, ids] = co_await wrong.async_get_ids(nothrow);
  CHECK(e10 == thoonk::error::wrong_feed_type);
  thoonk::sorted_feed wrong2(c, fname);
  auto [e11, id11] = co_await wrong2.async_append("x", nothrow);
  CHECK(e11 == thoonk::error::wrong_feed_type);
  auto len = co_await cmd(c.conn(), "LLEN", key("ids", fname));
  CHECK(len.integer == 0);
  // Subscribing checks the feed too (and registers nothing on failure).
  thoonk::feed_callback ignore = [](const thoonk::feed_event&) {};
  auto [e12, sub12] = co_await thoonk::feed(c, missing).async_subscribe(ignore, nothrow);
  CHECK(e12 == thoonk::error::feed_not_found);
  CHECK(!sub12.active());
  auto [e13, sub13] = co_await thoonk::sorted_feed(c, fname).async_subscribe(ignore, nothrow);
  CHECK(e13 == thoonk::error::wrong_feed_type);
  thoonk::feed_subscribe_options cu;
  cu.catch_up = true;
  auto [e14, sub14] = co_await thoonk::feed(c, sname).async_subscribe(ignore, cu, nothrow);
  CHECK(e14 == thoonk::error::wrong_feed_type);
  auto numsub = co_await cmd(c.conn(), "PUBSUB", "NUMSUB", "feed.publish:" + sname);
  CHECK(numsub.elements.at(1).integer == 0);

  // Names are checked before any I/O.
  auto before = c.conn().stats().requests;
  std::string nul_name("a\0b", 3);
  std::vector<std::string> bad_names{std::string(), nul_name, std::string("with{brace}"),
                                     std::string(2000, 'n')};
  for (const std::string& bad : bad_names) {
    INFO("name of " << bad.size() << " bytes");
    co_await expect_each_fails(
        thoonk::error::invalid_name,
        [&] { return c.async_create_feed(bad, feed_type::feed, thoonk::feed_config(), nothrow); },
        [&] { return c.async_delete_feed(bad, nothrow); },
        [&] { return c.async_feed_exists(bad, nothrow); },
        [&] { return c.async_set_config(bad, "a", "b", nothrow); },
        [&] { return c.async_get_config(bad, "a", nothrow); },
        [&] { return thoonk::feed::async_open(c, bad, nothrow); },
        [&] { return thoonk::feed(c, bad).async_publish("x", nothrow); });
  }
  // Config values the library interprets are checked too.
  thoonk::feed_config ten{{"max_length", "ten"}};
  auto [c1] = co_await c.async_create_feed(unique_name("badcfg"), feed_type::feed, ten, nothrow);
  CHECK(c1 == thoonk::error::invalid_argument);
  auto [c2] = co_await c.async_set_config(fname, "max_length", "-1", nothrow);
  CHECK(c2 == thoonk::error::invalid_argument);
  auto [c3] = co_await c.async_set_config(fname, "type", "sorted_feed", nothrow);
  CHECK(c3 == thoonk::error::invalid_argument);
  auto [c4] = co_await c.async_set_config(fname, "", "x", nothrow);
  CHECK(c4 == thoonk::error::invalid_argument);
  CHECK(c.conn().stats().requests == before);

  std::vector<std::string> made{fname, sname, qname};
  for (auto& n : made) co_await c.async_delete_feed(n, asio::use_awaitable);
}

TEST_CASE("feed admin: braces in names only when allowed",
          "[feed][feed_admin][create_feed][delete_feed][publish]") {
  asio::io_context ioc;
  auto cfg = test_config();
  cfg.allow_hash_tag_names = true;
  thoonk::client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    auto name = unique_name("tag") + ".{eu}";
    auto [ec] = co_await c.async_create_feed(name, feed_type::feed, thoonk::feed_config(), nothrow);
    CHECK(!ec);
    auto [e2, r] = co_await thoonk::feed(c, name).async_publish("x", nothrow);
    CHECK(!e2);
    auto n = co_await cmd(c.conn(), "ZCARD", key("ids", name));
    CHECK(n.integer == 1);
    co_await c.async_delete_feed(name, asio::use_awaitable);
    c.stop();
  });
}

CLIENT_TEST_CASE("t", "feed admin: JSON config values",
                 "[feed][feed_admin][delete_feed][get_config_json][set_config][set_config_json]") {
  auto name = co_await make_feed(c, "json", feed_type::feed);
  boost::json::value v = {{"retries", 3}, {"tags", {"a", "b"}}, {"ratio", 0.5}};
  auto [e1] = co_await c.async_set_config_json(name, "policy", v, nothrow);
  CHECK(!e1);
  auto [e2, back] = co_await c.async_get_config_json(name, "policy", nothrow);
  CHECK(!e2);
  CHECK(back == v);
  auto raw = co_await cmd(c.conn(), "HGET", key("config", name), "policy");
  CHECK(boost::json::parse(raw.str) == v);
  auto [e3, unset] = co_await c.async_get_config_json(name, "absent", nothrow);
  CHECK(unset.is_null());
  co_await c.async_set_config(name, "plain", "not json {", asio::use_awaitable);
  auto [e4, text] = co_await c.async_get_config_json(name, "plain", nothrow);
  CHECK(text == boost::json::value("not json {"));
  auto [e5, n5] = co_await c.async_get_config_json(unique_name("nofeed"), "x", nothrow);
  CHECK(e5 == thoonk::error::feed_not_found);
  co_await c.async_delete_feed(name, asio::use_awaitable);
}

CLIENT_TEST_CASE("events", "feed admin: typed management events, once each",
                 "[feed][feed_admin][create_feed][delete_feed][set_config]") {
  thoonk::client other(fx.ioc.get_executor(), test_config());
  co_await other.async_connect(asio::use_awaitable);
  struct ev {
    thoonk::feed_admin_event::kind_t kind;
    std::string feed, instance;
    bool operator==(const ev&) const = default;
  };
  std::vector<ev> a, b;
  auto s1 = co_await thoonk::async_subscribe_feed_admin(
      c,
      [&](const thoonk::feed_admin_event& e) {
        a.push_back({e.kind, std::string(e.feed), std::string(e.instance)});
      },
      asio::use_awaitable);
  auto s2 = co_await thoonk::async_subscribe_feed_admin(
      c,
      [&](const thoonk::feed_admin_event& e) {
        b.push_back({e.kind, std::string(e.feed), std::string(e.instance)});
      },
      asio::use_awaitable);
  auto name = unique_name("events");
  co_await other.async_create_feed(name, feed_type::feed, thoonk::feed_config(),
                                   asio::use_awaitable);
  co_await other.async_set_config(name, "max_length", "3", asio::use_awaitable);
  co_await c.async_delete_feed(name, asio::use_awaitable);
  std::vector<ev> expected{{thoonk::feed_admin_event::created, name, other.instance_id()},
                           {thoonk::feed_admin_event::config_changed, name, other.instance_id()},
                           {thoonk::feed_admin_event::deleted, name, c.instance_id()}};
  auto mine = [&](const std::vector<ev>& all) {
    std::vector<ev> out;
    for (auto& e : all)
      if (e.feed == name) out.push_back(e);
    return out;
  };
  auto r1_ = co_await wait_until([&] { return mine(a).size() >= 3 && mine(b).size() >= 3; });
  CHECK(r1_);
  co_await settle();
  CHECK(mine(a) == expected);
  CHECK(mine(b) == expected);
  // Dropping a handle stops its callback only.
  s1.reset();
  auto name2 = unique_name("events2");
  co_await other.async_create_feed(name2, feed_type::feed, thoonk::feed_config(),
                                   asio::use_awaitable);
  auto r2_ = co_await wait_until([&] { return !b.empty() && b.back().feed == name2; });
  CHECK(r2_);
  co_await settle();
  CHECK(std::none_of(a.begin(), a.end(), [&](const ev& e) { return e.feed == name2; }));
  co_await other.async_delete_feed(name2, asio::use_awaitable);
  other.stop();
}
