// Redis ACL users without a permission an operation needs: the operation
// fails with the specific error (no_channel_permission,
// no_script_permission, no_key_permission) and changes nothing, so a retry
// after the grant applies it once (docs/errors.md "Permissions"). Redis does
// not roll back a script whose later redis.call fails: every script checks
// before its first write. Real redis-server 7.0 (redis.acl_check_cmd).
//
// The feed publish case relies on the check in src/feeds/feed.cpp (its own
// tag [acl_feed_publish] runs it alone).
#include "support/acl.hpp"
#include "support/helpers.hpp"

#include <thoonk/feed.hpp>
#include <thoonk/sorted_feed.hpp>

#include <algorithm>
#include <map>
#include <optional>

using namespace thoonk::test;
using thoonk::test::run_coro;
using thoonk::test::unique_name;
using E = thoonk::error;

namespace {

// An ACL user made for one test (the admin connection is the default user).
struct acl_user {
  std::string name = unique_name("acl");
  std::string pass = "pw-" + unique_name("x");
  std::vector<std::string> rules;

  thoonk::config config() const {
    auto cfg = named_config("thoonk-acl-test");
    cfg.username = name;
    cfg.password = pass;
    return cfg;
  }
  asio::awaitable<void> set(thoonk::connection& admin, std::vector<std::string> more) const {
    co_await acl_setuser(admin, name, std::move(more));
  }
  asio::awaitable<void> create(thoonk::connection& admin) const {
    std::vector<std::string> all{"reset", "on", ">" + pass};
    all.insert(all.end(), rules.begin(), rules.end());
    co_await set(admin, std::move(all));
  }
  /// Grants what the kinds below take away.
  asio::awaitable<void> grant_all(thoonk::connection& admin) const {
    std::vector<std::string> grants;
    for (const char* g : {"+publish", "allchannels", "+evalsha", "allkeys"}) grants.emplace_back(g);
    co_await set(admin, std::move(grants));
  }
  asio::awaitable<void> remove(thoonk::connection& admin) const {
    co_await cmd(admin, "ACL", "DELUSER", name);
  }
};

// The three kinds of missing permission the defect is about.
struct kind {
  const char* label;
  std::vector<std::string> rules;
  E expected;
};

const std::vector<kind>& kinds() {
  static const std::vector<kind> k{
      {"without +publish", {"~*", "&*", "+@all", "-publish"}, E::no_channel_permission},
      {"without access to the channels",
       {"~*", "resetchannels", "&unrelated.*", "+@all"},
       E::no_channel_permission},
      {"without +evalsha", {"~*", "&*", "+@all", "-evalsha", "-fcall"}, E::no_script_permission},
  };
  return k;
}

// Every raw key, rendered deterministically whatever its type.
asio::awaitable<std::string> dump(thoonk::connection& c, std::vector<std::string> keys) {
  std::string out;
  for (const auto& k : keys) {
    auto t = co_await cmd(c, "TYPE", k);
    out += k + " " + t.str + ":";
    std::vector<std::string> parts;
    if (t.str == "string") {
      parts.push_back((co_await cmd(c, "GET", k)).str);
    } else if (t.str == "list") {
      for (auto& e : (co_await cmd(c, "LRANGE", k, 0, -1)).elements) parts.push_back(e.str);
    } else if (t.str == "zset") {
      auto v = co_await cmd(c, "ZRANGE", k, 0, -1, "WITHSCORES");
      parts.push_back(thoonk::resp3::debug_string(v));
    } else if (t.str == "hash") {
      auto v = co_await cmd(c, "HGETALL", k);
      for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2)
        parts.push_back(v.elements[i].str + "=" + v.elements[i + 1].str);
      std::sort(parts.begin(), parts.end());
    } else if (t.str == "set") {
      for (auto& e : (co_await cmd(c, "SMEMBERS", k)).elements) parts.push_back(e.str);
      std::sort(parts.begin(), parts.end());
    }
    for (auto& p : parts) out += " [" + p + "]";
    out += "\n";
  }
  co_return out;
}

std::vector<std::string> feed_keys(const std::string& name) {
  std::vector<std::string> out;
  for (const char* k :
       {"config", "ids", "items", "publishes", "changes", "retracts", "retracttrim", "idincr"})
    out.push_back(key(k, name));
  return out;
}

std::vector<std::string> job_keys(const std::string& name) {
  std::vector<std::string> out;
  for (const char* k :
       {"config", "ids", "items", "publishes", "finishes", "published", "claimed", "cancelled",
        "stalled", "attempts", "sleepers", "idincr", "unaccounted", "maintenance"})
    out.push_back(key(k, name));
  return out;
}

// Runs each `op()` (operations started with nothrow) and checks that every
// one fails with `expected` and that together they changed none of `keys`.
template <class... Ops>
asio::awaitable<void> expect_refused(thoonk::connection& admin, std::vector<std::string> keys,
                                     E expected, Ops... ops) {
  auto before = co_await dump(admin, keys);
  co_await expect_each_fails(expected, std::move(ops)...);
  auto after = co_await dump(admin, keys);
  CHECK(after == before);
}

asio::awaitable<bool> is_member(thoonk::connection& c, std::string name) {
  auto v = co_await cmd(c, "SISMEMBER", "feeds", name);
  co_return v.integer == 1;
}

// Polls until `key` exists (at most 10 s).
asio::awaitable<bool> exists_soon(thoonk::connection& c, std::string k) {
  co_return co_await wait_until([&]() -> asio::awaitable<bool> {
    auto n = co_await cmd(c, "EXISTS", k);
    co_return n.integer == 1;
  });
}

// One test case body per kind: an io_context, the admin client, the user
// (created and removed around `body`) and its connected client.
template <class Body>
void with_user(const std::vector<std::string>& rules, Body body) {
  asio::io_context ioc;
  thoonk::client admin(ioc.get_executor(), named_config("thoonk-acl-admin"));
  acl_user user;
  user.rules = rules;
  std::optional<thoonk::client> uc;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await admin.async_connect(asio::use_awaitable);
        co_await user.create(admin.conn());
        uc.emplace(ioc.get_executor(), user.config());
        co_await uc->async_connect(asio::use_awaitable);
        co_await body(admin, *uc, user);
        uc->stop();
        co_await user.remove(admin.conn());
      },
      30s);
}

/// Runs `body(k, admin, uc, user)` once per kind of missing permission,
/// each in its own SECTION, with a user restricted by k.rules.
template <class Body>
void with_each_kind(Body body) {
  for (const auto& k : kinds()) {
    SECTION(k.label) {
      with_user(k.rules, [&](thoonk::client& admin, thoonk::client& uc, const acl_user& user) {
        return body(k, admin, uc, user);
      });
    }
  }
}

}  // namespace

TEST_CASE("acl: create_feed, delete_feed and set_config change nothing without permission",
          "[acl][create_feed][delete_feed][set_config][set_config_json]") {
  with_each_kind([&](const kind& k, thoonk::client& admin, thoonk::client& uc,
                     const acl_user&) -> asio::awaitable<void> {
    // create_feed: no feed in `feeds`, no config, no key at all.
    const auto name = unique_name("acl-create");
    // (No braced lists inside co_await expressions: g++ 12 rejects them
    // in coroutines.)
    const thoonk::feed_config cfg{{"max_length", "5"}};
    const std::vector<thoonk::feed_type> types{thoonk::feed_type::feed, thoonk::feed_type::job};
    for (auto type : types) {
      auto [ec] = co_await uc.async_create_feed(name, type, cfg, nothrow);
      CHECK(ec == k.expected);
      auto listed = co_await is_member(admin.conn(), name);
      CHECK(!listed);
      auto n = co_await cmd(admin.conn(), "EXISTS", key("config", name));
      CHECK(n.integer == 0);
    }
    // delete_feed and set_config on a feed the admin made: unchanged.
    const auto other = unique_name("acl-existing");
    co_await admin.async_create_feed(other, thoonk::feed_type::feed, cfg, asio::use_awaitable);
    co_await expect_refused(
        admin.conn(), feed_keys(other), k.expected,
        [&] { return uc.async_delete_feed(other, nothrow); },
        [&] { return uc.async_set_config(other, "max_length", "7", nothrow); },
        [&] {
          return uc.async_set_config_json(other, "owner", boost::json::value("me"), nothrow);
        });
    auto listed = co_await is_member(admin.conn(), other);
    CHECK(listed);
    co_await admin.async_delete_feed(other, asio::use_awaitable);
  });
  SECTION("without access to the feed's keys") {
    with_user(
        {"~unrelated.*", "&*", "+@all"},
        [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
          const auto name = unique_name("acl-create");
          auto [ec] = co_await uc.async_create_feed(name, thoonk::feed_type::feed, {}, nothrow);
          CHECK(ec == E::no_key_permission);
          auto listed = co_await is_member(admin.conn(), name);
          CHECK(!listed);
        });
  }
  SECTION("without +sadd: a command the script runs, refused inside it") {
    // Not checked ahead (only PUBLISH is): the script's first write fails,
    // before anything else was written; the error says a permission is
    // missing.
    with_user(
        {"~*", "&*", "+@all", "-sadd"},
        [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
          const auto name = unique_name("acl-create");
          auto [ec] = co_await uc.async_create_feed(name, thoonk::feed_type::feed, {}, nothrow);
          CHECK(ec == E::no_permission);
          auto listed = co_await is_member(admin.conn(), name);
          CHECK(!listed);
        });
  }
}

TEST_CASE("acl: sorted feed changes apply nothing without permission",
          "[acl][feed][append][create_feed][delete_feed][edit][get_item][move_to_begin][publish_"
          "after][retract]") {
  with_each_kind([&](const kind& k, thoonk::client& admin, thoonk::client& uc,
                     const acl_user& user) -> asio::awaitable<void> {
    const auto name = unique_name("acl-sorted");
    co_await admin.async_create_feed(name, thoonk::feed_type::sorted_feed, {}, asio::use_awaitable);
    thoonk::sorted_feed as(admin, name);
    co_await as.async_append("a", asio::use_awaitable);
    co_await as.async_append("b", asio::use_awaitable);
    auto before = co_await dump(admin.conn(), feed_keys(name));

    thoonk::sorted_feed us(uc, name);
    co_await expect_each_fails(
        k.expected, [&] { return us.async_append("c", nothrow); },
        [&] { return us.async_publish_after(thoonk::item_id("1"), "d", nothrow); },
        [&] { return us.async_edit(thoonk::item_id("1"), "A", nothrow); },
        [&] { return us.async_move_to_begin("2", nothrow); },
        [&] { return us.async_retract("1", nothrow); });
    // Retracting an id that is not there publishes nothing: no PUBLISH
    // permission needed (EVALSHA still is).
    auto [e6, gone6] = co_await us.async_retract("99", nothrow);
    if (k.expected == E::no_script_permission) {
      CHECK(e6 == k.expected);
    } else {
      CHECK(!e6);
      CHECK(!gone6);
    }
    // Not even the id counter moved.
    auto after = co_await dump(admin.conn(), feed_keys(name));
    CHECK(after == before);

    // After the grant, the same append applies once: id 3.
    co_await user.grant_all(admin.conn());
    auto id3 = co_await us.async_append("c", asio::use_awaitable);
    CHECK(id3 == "3");
    co_await admin.async_delete_feed(name, asio::use_awaitable);
  });
  SECTION("with only some of the channels") {
    // May PUBLISH on feed.publish:* but not feed.position:*: an append (which
    // sends both) is refused as a whole, an edit (feed.publish only) works.
    with_user(
        {"~*", "resetchannels", "&feed.publish:*", "+@all"},
        [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
          const auto name = unique_name("acl-sorted");
          co_await admin.async_create_feed(name, thoonk::feed_type::sorted_feed, {},
                                           asio::use_awaitable);
          thoonk::sorted_feed as(admin, name);
          co_await as.async_append("a", asio::use_awaitable);
          thoonk::sorted_feed us(uc, name);
          co_await expect_refused(admin.conn(), feed_keys(name), E::no_channel_permission,
                                  [&] { return us.async_append("b", nothrow); });
          auto [e2] = co_await us.async_edit(thoonk::item_id("1"), "A", nothrow);
          CHECK(!e2);
          auto item = co_await as.async_get_item("1", asio::use_awaitable);
          CHECK(item == "A");
          co_await admin.async_delete_feed(name, asio::use_awaitable);
        });
  }
}

// Needs the check in src/feeds/feed.cpp (publish/retract scripts).
TEST_CASE("acl: feed publish and retract apply nothing without permission",
          "[acl][feed][acl_feed_publish][create_feed][delete_feed][publish][retract]") {
  with_each_kind([&](const kind& k, thoonk::client& admin, thoonk::client& uc,
                     const acl_user& user) -> asio::awaitable<void> {
    const auto name = unique_name("acl-feed");
    const thoonk::feed_config cfg{{"max_length", "1"}};
    co_await admin.async_create_feed(name, thoonk::feed_type::feed, cfg, asio::use_awaitable);
    thoonk::feed af(admin, name);
    co_await af.async_publish(thoonk::item_id("old"), "x", asio::use_awaitable);
    thoonk::feed uf(uc, name);
    // A new id (it would evict "old": max_length 1), an edit, a retract.
    co_await expect_refused(
        admin.conn(), feed_keys(name), k.expected,
        [&] { return uf.async_publish(thoonk::item_id("new"), "y", nothrow); },
        [&] { return uf.async_publish(thoonk::item_id("old"), "x2", nothrow); },
        [&] { return uf.async_retract("old", nothrow); });
    // After the grant the publish applies once.
    co_await user.grant_all(admin.conn());
    auto r = co_await uf.async_publish(thoonk::item_id("new"), "y", asio::use_awaitable);
    CHECK(!r.edited);
    CHECK(r.evicted == std::vector<std::string>{"old"});
    co_await admin.async_delete_feed(name, asio::use_awaitable);
  });
}

namespace {

/// A feed of max_length 2 made by `admin`, holding `ids` (item "1", "2", ...
/// in that order): the name.
asio::awaitable<std::string> small_feed(thoonk::client& admin, std::string prefix,
                                        std::vector<std::string> ids) {
  const auto name = unique_name(prefix);
  const thoonk::feed_config cfg{{"max_length", "2"}};
  co_await admin.async_create_feed(name, thoonk::feed_type::feed, cfg, asio::use_awaitable);
  thoonk::feed af(admin, name);
  for (std::size_t i = 0; i < ids.size(); ++i)
    co_await af.async_publish(thoonk::item_id(ids[i]), std::to_string(i + 1), asio::use_awaitable);
  co_return name;
}

}  // namespace

// A publish announces a new id on feed.publish (and, when it evicts, the
// evicted ids on feed.retract) and an edit on feed.edit: the permission
// check must follow which one it is, so a user with some of the channels
// gets exactly what they allow, and a refusal applies nothing.
TEST_CASE("acl: feed publish with only some channels: an edit and a new id each need their own",
          "[acl][feed][acl_feed_publish][publish]") {
  SECTION("feed.edit and feed.retract only: edits work, new ids are refused") {
    with_user(
        {"~*", "resetchannels", "&feed.edit:*", "&feed.retract:*", "+@all"},
        [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
          const std::vector<std::string> held{"a", "b"};
          const auto name = co_await small_feed(admin, "acl-feed-edit", held);
          thoonk::feed uf(uc, name);
          // A new id in the full feed: refused on feed.publish, nothing evicted.
          co_await expect_refused(admin.conn(), feed_keys(name), E::no_channel_permission, [&] {
            return uf.async_publish(thoonk::item_id("c"), "3", nothrow);
          });
          auto [e, r] = co_await uf.async_publish(thoonk::item_id("a"), "1b", nothrow);
          CHECK(!e);
          CHECK(r.edited);
          CHECK(r.evicted.empty());
          auto ids = co_await uf.async_get_ids(asio::use_awaitable);
          CHECK(ids == std::vector<std::string>{"b", "a"});  // the edit moved it last
          auto item = co_await uf.async_get_item("a", asio::use_awaitable);
          CHECK(item == "1b");
          co_await admin.async_delete_feed(name, asio::use_awaitable);
        });
  }
  SECTION("feed.publish and feed.retract only: new ids work, edits are refused") {
    with_user(
        {"~*", "resetchannels", "&feed.publish:*", "&feed.retract:*", "+@all"},
        [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
          const std::vector<std::string> held{"a", "b"};
          const auto name = co_await small_feed(admin, "acl-feed-new", held);
          thoonk::feed uf(uc, name);
          // An edit in the full feed: refused on feed.edit, though the
          // channels of a new id would have been allowed.
          co_await expect_refused(admin.conn(), feed_keys(name), E::no_channel_permission, [&] {
            return uf.async_publish(thoonk::item_id("b"), "2b", nothrow);
          });
          auto [e, r] = co_await uf.async_publish(thoonk::item_id("c"), "3", nothrow);
          CHECK(!e);
          CHECK(!r.edited);
          CHECK(r.evicted == std::vector<std::string>{"a"});
          auto ids = co_await uf.async_get_ids(asio::use_awaitable);
          CHECK(ids == std::vector<std::string>{"b", "c"});
          co_await admin.async_delete_feed(name, asio::use_awaitable);
        });
  }
  SECTION("feed.publish only: a new id that would evict is refused, one with room works") {
    with_user(
        {"~*", "resetchannels", "&feed.publish:*", "+@all"},
        [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
          const std::vector<std::string> held{"a"};
          const auto name = co_await small_feed(admin, "acl-feed-room", held);
          thoonk::feed uf(uc, name);
          auto [e, r] = co_await uf.async_publish(thoonk::item_id("b"), "2", nothrow);
          CHECK(!e);
          CHECK(r.evicted.empty());
          // Full now: the next new id would announce a retraction.
          co_await expect_refused(admin.conn(), feed_keys(name), E::no_channel_permission, [&] {
            return uf.async_publish(thoonk::item_id("c"), "3", nothrow);
          });
          co_await admin.async_delete_feed(name, asio::use_awaitable);
        });
  }
}

TEST_CASE("acl: a job put while a claimer waits applies nothing; the retry makes one job",
          "[acl][job][claim][counts][create_feed][delete_feed][finish][put][put_many]") {
  with_each_kind([&](const kind& k, thoonk::client& admin, thoonk::client& uc,
                     const acl_user& user) -> asio::awaitable<void> {
    const auto name = unique_name("acl-put");
    co_await admin.async_create_feed(name, thoonk::feed_type::job, {}, asio::use_awaitable);
    thoonk::job_queue aq(admin, name);
    // A claimer (allowed everything) waits: the queue has a sleeper, so
    // a put would PUBLISH a wake-up.
    std::optional<thoonk::claimed_job> got;
    error_code claim_ec;
    int claims = 0;
    asio::co_spawn(
        admin.get_executor(),
        [&]() -> asio::awaitable<void> {
          auto [ec, j] = co_await aq.async_claim(20s, nothrow);
          ++claims;
          claim_ec = ec;
          if (!ec) got = j;
        },
        asio::detached);
    auto slept = co_await exists_soon(admin.conn(), key("sleepers", name));
    REQUIRE(slept);
    auto before = co_await dump(admin.conn(), job_keys(name));

    thoonk::job_queue uq(uc, name);
    auto [ec, id] = co_await uq.async_put("work", nothrow);
    CHECK(ec == k.expected);
    std::vector<std::string> two{"a", "b"};
    auto [mec, ids] = co_await uq.async_put_many(two, thoonk::priority::high, nothrow);
    CHECK(mec == k.expected);
    CHECK(ids.empty());
    // Nothing written: no id, no item, no count, no id counter; the
    // sleeper is still there.
    auto after = co_await dump(admin.conn(), job_keys(name));
    CHECK(after == before);
    CHECK(claims == 0);

    // The caller retries after the grant: exactly one job.
    co_await user.grant_all(admin.conn());
    auto id2 = co_await put_item(uq, "work");
    auto claimed = co_await wait_until([&] { return claims > 0; });
    CHECK(claimed);
    REQUIRE(claims == 1);
    CHECK(!claim_ec);
    REQUIRE(got);
    CHECK(got->id == id2);
    CHECK(got->item == "work");
    auto c = co_await aq.async_counts(asio::use_awaitable);
    CHECK(c.puts == 1);
    CHECK(c.items == 1);
    CHECK(c.waiting == 0);
    CHECK(c.claimed == 1);
    co_await aq.async_finish(*got, asio::use_awaitable);
    co_await admin.async_delete_feed(name, asio::use_awaitable);
  });
}

TEST_CASE("acl: a finish with a result leaves the job claimed and stores no result",
          "[acl][job][claim][counts][create_feed][delete_feed][finish][get_result][put_many]") {
  with_each_kind([&](const kind& k, thoonk::client& admin, thoonk::client& uc,
                     const acl_user& user) -> asio::awaitable<void> {
    const auto name = unique_name("acl-finish");
    co_await admin.async_create_feed(name, thoonk::feed_type::job, {}, asio::use_awaitable);
    thoonk::job_queue aq(admin, name);
    std::vector<std::string> items{"one", "two"};
    co_await aq.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
    // Claimed by the admin's client; the tokens are the jobs', so the
    // user's client may finish them.
    auto j1 = co_await aq.async_claim(1s, asio::use_awaitable);
    auto j2 = co_await aq.async_claim(1s, asio::use_awaitable);
    auto before = co_await dump(admin.conn(), job_keys(name));
    const std::string result_key = "feed.jobfinished:" + name + std::string(1, '\0') + j1.id;

    // One batch: j1 with a result (needs PUBLISH job.finish), j2 without.
    thoonk::job_queue uq(uc, name);
    error_code r1, r2;
    int done = 0;
    uq.async_finish(j1, std::string("result"), [&](error_code e) {
      r1 = e;
      ++done;
    });
    uq.async_finish(j2, [&](error_code e) {
      r2 = e;
      ++done;
    });
    auto both = co_await wait_until([&] { return done == 2; });
    CHECK(both);
    REQUIRE(done == 2);
    CHECK(r1 == k.expected);
    auto n = co_await cmd(admin.conn(), "EXISTS", result_key);
    CHECK(n.integer == 0);
    auto claimed = co_await cmd(admin.conn(), "ZSCORE", key("claimed", name), j1.id);
    CHECK(!claimed.is_null());
    auto item = co_await cmd(admin.conn(), "HGET", key("items", name), j1.id);
    CHECK(item.str == "one");
    if (k.expected == E::no_script_permission) {
      // No script runs at all.
      CHECK(r2 == k.expected);
      auto after = co_await dump(admin.conn(), job_keys(name));
      CHECK(after == before);
    } else {
      // Each finish of a batch succeeds or fails alone: j2 needs no
      // PUBLISH and is finished.
      CHECK(!r2);
      auto c = co_await aq.async_counts(asio::use_awaitable);
      CHECK(c.finishes == 1);
      CHECK(c.claimed == 1);
      auto tok = co_await cmd(admin.conn(), "HGET", key("attempts", name), j1.id);
      CHECK(tok.str == std::to_string(j1.token));
    }
    // The worker retries after the grant: finished once, result kept.
    co_await user.grant_all(admin.conn());
    co_await uq.async_finish(j1, std::string("result"), asio::use_awaitable);
    auto res = co_await aq.async_get_result(j1.id, 1s, asio::use_awaitable);
    CHECK(res == "result");
    auto stored = co_await cmd(admin.conn(), "LLEN", result_key);
    CHECK(stored.integer == 1);
    co_await admin.async_delete_feed(name, asio::use_awaitable);
  });
}

TEST_CASE(
    "acl: finish_and_claim with a result is refused alone: nothing finished or claimed "
    "for it; the call without a result in its batch finishes and claims",
    "[acl][job][claim][counts][create_feed][delete_feed][finish_and_claim][get_result]") {
  with_each_kind([&](const kind& k, thoonk::client& admin, thoonk::client& uc,
                     const acl_user& user) -> asio::awaitable<void> {
    const auto name = unique_name("acl-finclaim");
    co_await admin.async_create_feed(name, thoonk::feed_type::job, {}, asio::use_awaitable);
    thoonk::job_queue aq(admin, name);
    std::vector<std::string> items{"one", "two", "three"};
    co_await aq.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
    auto j1 = co_await aq.async_claim(1s, asio::use_awaitable);
    auto j2 = co_await aq.async_claim(1s, asio::use_awaitable);
    auto before = co_await dump(admin.conn(), job_keys(name));

    // One batch: j1 with a result (needs PUBLISH job.finish), j2 without.
    thoonk::job_queue uq(uc, name);
    error_code r1, r2;
    thoonk::claimed_job n1, n2;
    int done = 0;
    uq.async_finish_and_claim(j1, std::string("result"), [&](error_code e, thoonk::claimed_job j) {
      r1 = e;
      n1 = std::move(j);
      ++done;
    });
    uq.async_finish_and_claim(j2, [&](error_code e, thoonk::claimed_job j) {
      r2 = e;
      n2 = std::move(j);
      ++done;
    });
    auto both = co_await wait_until([&] { return done == 2; });
    CHECK(both);
    REQUIRE(done == 2);
    CHECK(r1 == k.expected);
    CHECK(n1.id.empty());
    auto tok = co_await cmd(admin.conn(), "HGET", key("attempts", name), j1.id);
    CHECK(tok.str == std::to_string(j1.token));
    auto c = co_await aq.async_counts(asio::use_awaitable);
    if (k.expected == E::no_script_permission) {
      CHECK(r2 == k.expected);
      auto after = co_await dump(admin.conn(), job_keys(name));
      CHECK(after == before);
    } else {
      CHECK(!r2);
      CHECK(n2.item == "three");
      CHECK(c.finishes == 1);
      CHECK(c.claimed == 2);  // j1 (still) and "three"
      CHECK(c.waiting == 0);
    }
    // After the grant the same call goes through.
    co_await user.grant_all(admin.conn());
    auto [ec, none] = co_await uq.async_finish_and_claim(j1, std::string("result"), nothrow);
    CHECK((k.expected == E::no_script_permission ? !ec : ec == E::queue_empty));
    auto res = co_await aq.async_get_result(j1.id, 1s, asio::use_awaitable);
    CHECK(res == "result");
    co_await admin.async_delete_feed(name, asio::use_awaitable);
  });
}

TEST_CASE("acl: cancel, retry, maintenance and queue put need PUBLISH; what needs none works",
          "[acl][job][queue][cancel][claim][create_feed][delete_feed][heartbeat][maintain][put]["
          "put_many][retry][stall]") {
  with_user(
      kinds()[0].rules,
      [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
        const auto name = unique_name("acl-ops");
        const thoonk::feed_config cfg{{"claim_timeout_ms", "50"}};
        co_await admin.async_create_feed(name, thoonk::feed_type::job, cfg, asio::use_awaitable);
        thoonk::job_queue aq(admin, name);
        thoonk::job_queue uq(uc, name);
        std::vector<std::string> items{"a", "b", "c"};
        co_await aq.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);

        // cancel (would wake claimers): refused, the job stays claimed.
        auto ja = co_await aq.async_claim(1s, asio::use_awaitable);
        co_await expect_refused(admin.conn(), job_keys(name), E::no_channel_permission,
                                [&] { return uq.async_cancel(ja, nothrow); });

        // stall and heartbeat publish nothing: allowed.
        auto [hec] = co_await uq.async_heartbeat(ja, nothrow);
        CHECK(!hec);
        auto [sec] = co_await uq.async_stall(ja, nothrow);
        CHECK(!sec);

        // retry (would wake claimers): refused, the job stays stalled.
        co_await expect_refused(admin.conn(), job_keys(name), E::no_channel_permission,
                                [&] { return uq.async_retry(ja.id, nothrow); });

        // maintenance (requeues lapsed claims, waking claimers): refused before
        // any change, and its lock is released.
        auto jb = co_await aq.async_claim(1s, asio::use_awaitable);
        auto lapsed = co_await claim_lapsed(admin.conn(), name, jb.id, 50ms);
        REQUIRE(lapsed);
        auto before = co_await dump(admin.conn(), job_keys(name));
        auto [mec, rep] = co_await uq.async_maintain(no_stats(), nothrow);
        CHECK(mec == E::no_channel_permission);
        CHECK(rep.ran);
        auto after = co_await dump(admin.conn(), job_keys(name));
        CHECK(after == before);
        // ... an allowed runner does it.
        auto rep2 = co_await aq.async_maintain(no_stats(), asio::use_awaitable);
        CHECK(rep2.requeued == 1);
        (void)jb;

        // A plain queue's put, too.
        const auto qname = unique_name("acl-queue");
        co_await admin.async_create_feed(qname, thoonk::feed_type::queue, {}, asio::use_awaitable);
        thoonk::queue uqq(uc, qname);
        auto [qec, qid] = co_await uqq.async_put("x", nothrow);
        CHECK(qec == E::no_channel_permission);
        auto ql = co_await cmd(admin.conn(), "LLEN", key("ids", qname));
        CHECK(ql.integer == 0);
        auto qi = co_await cmd(admin.conn(), "HLEN", key("items", qname));
        CHECK(qi.integer == 0);
        auto qp = co_await cmd(admin.conn(), "GET", key("publishes", qname));
        CHECK(qp.is_null());
        co_await admin.async_delete_feed(qname, asio::use_awaitable);
        co_await admin.async_delete_feed(name, asio::use_awaitable);
      });
}

TEST_CASE("acl: jobs claimed ahead are released without the wake-up the user may not send",
          "[acl][job][claim][counts][create_feed][delete_feed][finish][put_many]") {
  with_user(
      kinds()[0].rules,
      [&](thoonk::client& admin, thoonk::client& uc, const acl_user&) -> asio::awaitable<void> {
        const auto name = unique_name("acl-release");
        co_await admin.async_create_feed(name, thoonk::feed_type::job, {}, asio::use_awaitable);
        thoonk::job_queue aq(admin, name);
        std::vector<std::string> items(6, "x");
        co_await aq.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
        thoonk::job_queue_options o;
        o.prefetch = 4;
        o.prefetch_hold = 150ms;
        thoonk::job_queue uq(uc, name, o);
        auto j = co_await uq.async_claim(1s, asio::use_awaitable);
        // Someone sleeps: a release would wake it, which this user may not.
        co_await cmd(admin.conn(), "SET", key("sleepers", name), "1");
        // The jobs claimed ahead go back anyway (the release must not fail:
        // nobody would see the error); only the wake-up is skipped.
        thoonk::job_counts c;
        auto released = co_await wait_until([&]() -> asio::awaitable<bool> {
          c = co_await aq.async_counts(asio::use_awaitable);
          co_return c.claimed == 1 && c.waiting == 5;
        });
        CHECK(released);
        CHECK(c.claimed == 1);
        CHECK(c.waiting == 5);
        auto s = co_await cmd(admin.conn(), "EXISTS", key("sleepers", name));
        CHECK(s.integer == 1);
        auto [fec] = co_await uq.async_finish(j, nothrow);
        CHECK(!fec);
        co_await admin.async_delete_feed(name, asio::use_awaitable);
      });
}
