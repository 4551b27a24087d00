// client::create_or_open_feed: one atomic script creates a missing feed
// (config and newfeed as create_feed) or opens an existing one of the same
// type without touching it; another type is refused and nothing changes.
#include "support/helpers.hpp"

using namespace thoonk::test;
using thoonk::feed_type;
using E = thoonk::error;

TEST_CASE("create_or_open_feed: creates once, then opens without changing the feed",
          "[feed_admin][create_or_open_feed]") {
  fixture f("coo");
  f.run_connected([&]() -> asio::awaitable<void> {
    auto cap = co_await capture_patterns(f.raw, "newfeed", "conffeed");

    auto [ec, created] =
        co_await f.c.async_create_or_open_feed(f.name, feed_type::feed, max_len(5), nothrow);
    REQUIRE(!ec);
    CHECK(created);
    using conf = std::map<std::string, std::string>;
    const conf made{{"type", "feed"}, {"max_length", "5"}};
    auto first = co_await hash_of(f.c.conn(), key("config", f.name));
    CHECK(first == made);

    // Again, with other config: opened, config untouched, nothing announced.
    auto [ec2, created2] =
        co_await f.c.async_create_or_open_feed(f.name, feed_type::feed, max_len(9), nothrow);
    REQUIRE(!ec2);
    CHECK(!created2);
    auto second = co_await hash_of(f.c.conn(), key("config", f.name));
    CHECK(second == made);

    co_await settle();
    const std::vector<msg> one_newfeed{{"newfeed", nul_join(f.name, f.c.instance_id())}};
    CHECK(cap->on("newfeed") == one_newfeed);
    CHECK(cap->on("conffeed").empty());

    // create_feed still refuses an existing feed.
    auto [ec3] = co_await f.c.async_create_feed(f.name, feed_type::feed, {}, nothrow);
    CHECK(ec3 == E::feed_exists);
  });
}

TEST_CASE("create_or_open_feed: another type is refused and nothing changes",
          "[feed_admin][create_or_open_feed]") {
  fixture f("coo");
  f.run_connected([&]() -> asio::awaitable<void> {
    const fields job_fields{{"max_stalls", "3"}};
    co_await create_feed(f.c.conn(), f.name, "job", job_fields);
    co_await cmd(f.c.conn(), "LPUSH", key("ids", f.name), "j1");
    thoonk::diagnostics diag;
    auto [ec, created] = co_await f.c.async_create_or_open_feed(
        f.name, feed_type::queue, {}, thoonk::capture_diagnostics(diag, nothrow));
    CHECK(ec == E::wrong_feed_type);
    CHECK(!created);
    CHECK(diag.server_message().find("job") != std::string::npos);
    using conf = std::map<std::string, std::string>;
    const conf job_conf{{"type", "job"}, {"max_stalls", "3"}};
    auto kept = co_await hash_of(f.c.conn(), key("config", f.name));
    CHECK(kept == job_conf);
    auto length = co_await cmd(f.c.conn(), "LLEN", key("ids", f.name));
    CHECK(length.integer == 1);

    // A feed listed in `feeds` without a type counts as missing everywhere:
    // create_or_open makes it.
    auto other = unique_name("coo");
    co_await cmd(f.c.conn(), "SADD", "feeds", other);
    auto [ec2, created2] =
        co_await f.c.async_create_or_open_feed(other, feed_type::sorted_feed, {}, nothrow);
    CHECK(!ec2);
    CHECK(created2);
    const conf sorted_conf{{"type", "sorted_feed"}};
    auto made = co_await hash_of(f.c.conn(), key("config", other));
    CHECK(made == sorted_conf);
  });
}

TEST_CASE("create_or_open_feed: bad names and config values fail before any write",
          "[feed_admin][create_or_open_feed]") {
  fixture f("coo");
  f.run_connected([&]() -> asio::awaitable<void> {
    const thoonk::feed_config bad{{"claim_timeout_ms", "soon"}};
    auto [ec, created] =
        co_await f.c.async_create_or_open_feed(f.name, feed_type::job, bad, nothrow);
    CHECK(ec == E::invalid_argument);
    CHECK(!created);
    auto member = co_await cmd(f.c.conn(), "SISMEMBER", "feeds", f.name);
    CHECK(member.integer == 0);
    auto exists = co_await cmd(f.c.conn(), "EXISTS", key("config", f.name));
    CHECK(exists.integer == 0);

    auto [ec2, created2] = co_await f.c.async_create_or_open_feed(std::string("a\0b", 3),
                                                                  feed_type::feed, {}, nothrow);
    CHECK(ec2 == E::invalid_name);
  });
}

TEST_CASE("create_or_open_feed: clients racing on one name agree that exactly one created it",
          "[feed_admin][create_or_open_feed]") {
  fixture f("coo");
  thoonk::client other(f.ioc.get_executor(), named_config());
  f.run_connected([&]() -> asio::awaitable<void> {
    co_await other.async_connect(asio::use_awaitable);
    for (int round = 0; round < 20; ++round) {
      auto name = unique_name("race");
      int created = 0, done = 0;
      for (auto* cl : {&f.c, &other, &f.c, &other}) {
        cl->async_create_or_open_feed(name, feed_type::queue, {},
                                      [&](boost::system::error_code ec, bool c) {
                                        CHECK(!ec);
                                        created += c ? 1 : 0;
                                        ++done;
                                      });
      }
      auto arrived = co_await wait_until([&] { return done == 4; });
      REQUIRE(arrived);
      CHECK(created == 1);
    }
    other.stop();
  });
}

TEST_CASE(
    "create_or_open_feed: a feed a contract client made without a type is adopted, "
    "never wiped",
    "[feed_admin][create_or_open_feed][create_feed]") {
  fixture f("coo");
  f.run_connected([&]() -> asio::awaitable<void> {
    using conf = std::map<std::string, std::string>;
    auto cap = co_await capture_patterns(f.raw, "newfeed");
    // The contract's Create Feed (SADD feeds, no config), a Set Config
    // Value and two Job puts, as a plain client writes them.
    co_await cmd(f.c.conn(), "SADD", "feeds", f.name);
    co_await cmd(f.c.conn(), "HSET", key("config", f.name), "claim_timeout_ms", "60000");
    for (const char* id : {"j1", "j2"}) {
      co_await cmd(f.c.conn(), "LPUSH", key("ids", f.name), id);
      co_await cmd(f.c.conn(), "HSET", key("items", f.name), id, std::string("item ") + id);
      co_await cmd(f.c.conn(), "INCR", key("publishes", f.name));
    }

    // create_feed: the feed exists; nothing changes.
    auto [ec0] = co_await f.c.async_create_feed(f.name, feed_type::job, {}, nothrow);
    CHECK(ec0 == E::feed_exists);
    auto before = co_await hash_of(f.c.conn(), key("config", f.name));
    CHECK(before == conf{{"claim_timeout_ms", "60000"}});

    // create_or_open: adopted with its data; the config it has is kept,
    // the fields it lacks are added.
    const thoonk::feed_config asked{{"claim_timeout_ms", "5000"}, {"max_stalls", "7"}};
    auto [ec, created] =
        co_await f.c.async_create_or_open_feed(f.name, feed_type::job, asked, nothrow);
    REQUIRE(!ec);
    CHECK(!created);
    auto after = co_await hash_of(f.c.conn(), key("config", f.name));
    CHECK(after == conf{{"type", "job"}, {"claim_timeout_ms", "60000"}, {"max_stalls", "7"}});
    auto ids = co_await cmd(f.c.conn(), "LLEN", key("ids", f.name));
    CHECK(ids.integer == 2);
    auto items = co_await cmd(f.c.conn(), "HLEN", key("items", f.name));
    CHECK(items.integer == 2);
    auto puts = co_await cmd(f.c.conn(), "GET", key("publishes", f.name));
    CHECK(puts.str == "2");

    // The library works on the adopted jobs.
    thoonk::job_queue q(f.c, f.name);
    auto j = co_await q.async_claim(1s, asio::use_awaitable);
    CHECK(j.id == "j1");
    CHECK(j.item == "item j1");
    co_await q.async_finish(j, asio::use_awaitable);

    // Ids of another kind's Redis type (a plain feed's sorted set): refused,
    // nothing changes; opened as that kind, adopted.
    auto other = unique_name("coo");
    co_await cmd(f.c.conn(), "SADD", "feeds", other);
    co_await cmd(f.c.conn(), "ZADD", key("ids", other), "1", "a");
    co_await cmd(f.c.conn(), "HSET", key("items", other), "a", "entry");
    thoonk::diagnostics diag;
    auto [ec2, created2] = co_await f.c.async_create_or_open_feed(
        other, feed_type::job, {}, thoonk::capture_diagnostics(diag, nothrow));
    CHECK(ec2 == E::wrong_feed_type);
    CHECK(!created2);
    CHECK(diag.server_message().find("no list") != std::string::npos);
    auto untouched = co_await cmd(f.c.conn(), "EXISTS", key("config", other));
    CHECK(untouched.integer == 0);
    auto [ec3, created3] =
        co_await f.c.async_create_or_open_feed(other, feed_type::feed, {}, nothrow);
    CHECK(!ec3);
    CHECK(!created3);
    auto entry = co_await cmd(f.c.conn(), "HGET", key("items", other), "a");
    CHECK(entry.str == "entry");

    // The makers announced these feeds; adopting them announces nothing,
    // while a feed made anew is announced once.
    auto made_new = unique_name("coo");
    co_await f.c.async_create_or_open_feed(made_new, feed_type::queue, {}, asio::use_awaitable);
    co_await settle();
    const std::vector<msg> only_new{{"newfeed", nul_join(made_new, f.c.instance_id())}};
    CHECK(cap->on("newfeed") == only_new);
  });
}
