// Redis Cluster without I/O: hash slots, the slot map read from CLUSTER
// SHARDS and CLUSTER SLOTS replies, redirect parsing and the decisions on
// redirected requests; the cluster URL option and hash-tagged key names.
#include "connection/cluster.hpp"
#include "detail/keys.hpp"

#include <thoonk/config.hpp>
#include <thoonk/error.hpp>

#include <catch2/catch.hpp>

#include "support/resp3_values.hpp"

#include <string>
#include <vector>

using namespace std::chrono_literals;
namespace resp3 = thoonk::resp3;
using namespace thoonk::detail;  // the slot map, redirects and hash slots under test
using namespace thoonk::test;

namespace {

// One node of a CLUSTER SHARDS reply, as Redis 7.0 sends it.
resp3::value shard_node(resp3::type t, std::string ip, std::int64_t port, std::string role,
                        std::string endpoint) {
  return aggregate_reply(
      t, {string_reply("id"), string_reply("abc"), string_reply("port"), number_reply(port),
          string_reply("ip"), string_reply(std::move(ip)), string_reply("endpoint"),
          string_reply(std::move(endpoint)), string_reply("role"), string_reply(std::move(role)),
          string_reply("replication-offset"), number_reply(42), string_reply("health"),
          string_reply("online")});
}

resp3::value shard(resp3::type t, std::vector<std::int64_t> ranges,
                   std::vector<resp3::value> nodes) {
  std::vector<resp3::value> r;
  for (auto x : ranges) r.push_back(number_reply(x));
  return aggregate_reply(t, {string_reply("slots"), array_reply(std::move(r)),
                             string_reply("nodes"), array_reply(std::move(nodes))});
}

const cluster_node seed{"10.0.0.9", 7009};

}  // namespace

TEST_CASE("cluster: CRC16-XMODEM and hash slots match Redis", "[unit][cluster]") {
  // The check value of CRC16-XMODEM, and the examples of the cluster spec.
  CHECK(thoonk::detail::crc16("123456789") == 0x31C3);
  CHECK(hash_slot("123456789") == 12739);
  CHECK(hash_slot("foo") == 12182);
  CHECK(hash_slot("bar") == 5061);
  CHECK(hash_slot("") == 0);
  // Hash tags: the bytes between the first '{' and the first '}' after it.
  CHECK(hash_slot("{user1000}.following") == hash_slot("user1000"));
  CHECK(hash_slot("{user1000}.followers") == hash_slot("{user1000}.following"));
  CHECK(hash_slot("foo{}{bar}") == hash_slot("foo{}{bar}"));
  CHECK(hash_slot("foo{}{bar}") != hash_slot("bar"));  // empty first tag: whole key
  CHECK(hash_slot("foo{{bar}}zap") == hash_slot("{bar"));
  CHECK(hash_slot("foo{bar}{zap}") == hash_slot("bar"));
  CHECK(hash_slot("foo{bar") == hash_slot("foo{bar"));
  CHECK(hash_slot("foo{bar") != hash_slot("bar"));  // no closing brace: whole key
  CHECK(hash_slot("}foo{bar}") == hash_slot("bar"));
  // Every key of a feed shares its slot in cluster mode.
  thoonk::config cfg;
  cfg.cluster = true;
  thoonk::detail::feed_names n(cfg, "orders");
  CHECK(n.key("ids") == "feed.ids:{orders}");
  for (const auto& k : thoonk::detail::all_keys(n)) CHECK(hash_slot(k) == hash_slot("orders"));
  CHECK(hash_slot(n.job_result_key("job-1")) == hash_slot("orders"));
  // A name with a tag of the user's own keeps it.
  cfg.allow_hash_tag_names = true;
  thoonk::detail::feed_names tagged(cfg, "orders.{eu}");
  CHECK(tagged.key("ids") == "feed.ids:orders.{eu}");
  CHECK(hash_slot(tagged.key("ids")) == hash_slot("eu"));
  // Channels carry the tag too: the scripts SPUBLISH them, and a shard
  // channel sent from a script must hash to the script's slot.
  CHECK(n.channel("publish") == "feed.publish:{orders}");
  CHECK(n.job_finish_channel() == "job.finish:{orders}");
  CHECK(tagged.channel("publish") == "feed.publish:orders.{eu}");
  CHECK(thoonk::detail::catchup_channel("uuid", n) == "thoonk.sync:uuid:{orders}");
  for (auto what : {"publish", "edit", "retract", "position", "wake"})
    CHECK(hash_slot(n.channel(what)) == hash_slot("orders"));
  CHECK(hash_slot(thoonk::detail::catchup_channel("u", tagged)) == hash_slot("eu"));
}

TEST_CASE("cluster: the slot map from CLUSTER SHARDS, RESP3 and RESP2", "[unit][cluster]") {
  for (auto t : {resp3::type::map, resp3::type::array}) {
    auto reply = array_reply({
        shard(t, {0, 5460},
              {shard_node(t, "127.0.0.1", 7001, "master", "127.0.0.1"),
               shard_node(t, "127.0.0.1", 7004, "replica", "127.0.0.1")}),
        // The replica listed first; two ranges.
        shard(t, {5461, 10922, 16000, 16383},
              {shard_node(t, "127.0.0.1", 7005, "replica", "127.0.0.1"),
               shard_node(t, "127.0.0.2", 7002, "master", "node2.internal")}),
        // An endpoint the server does not know: the ip.
        shard(t, {10923, 15999}, {shard_node(t, "127.0.0.3", 7003, "master", "?")}),
        // A shard without slots or without a primary is skipped.
        shard(t, {}, {shard_node(t, "127.0.0.4", 7007, "master", "127.0.0.4")}),
        shard(t, {}, {shard_node(t, "127.0.0.5", 7008, "replica", "127.0.0.5")}),
    });
    boost::system::error_code ec;
    auto m = slot_map::from_shards(reply, seed, ec);
    REQUIRE_FALSE(ec);
    CHECK(m.covers_all());
    REQUIRE(m.primaries().size() == 3);
    CHECK(*m.primary_for(0) == cluster_node{"127.0.0.1", 7001});
    CHECK(*m.primary_for(5460) == cluster_node{"127.0.0.1", 7001});
    CHECK(*m.primary_for(5461) == cluster_node{"node2.internal", 7002});
    CHECK(*m.primary_for(16383) == cluster_node{"node2.internal", 7002});
    CHECK(*m.primary_for(12000) == cluster_node{"127.0.0.3", 7003});
  }
}

TEST_CASE("cluster: an empty ip or endpoint is the seed's; uncovered slots have no primary",
          "[unit][cluster]") {
  auto t = resp3::type::map;
  auto reply = array_reply({shard(t, {0, 99}, {shard_node(t, "", 7001, "master", "")})});
  boost::system::error_code ec;
  auto m = slot_map::from_shards(reply, seed, ec);
  REQUIRE_FALSE(ec);
  CHECK(*m.primary_for(50) == cluster_node{"10.0.0.9", 7001});
  CHECK(m.primary_for(100) == nullptr);
  CHECK(m.primary_for(16384) == nullptr);
  CHECK(m.covered() == 100);
  CHECK_FALSE(m.covers_all());
}

TEST_CASE("cluster: malformed CLUSTER SHARDS replies are refused", "[unit][cluster]") {
  boost::system::error_code ec;
  auto t = resp3::type::map;
  SECTION("an error reply (Redis before 7.0)") {
    slot_map::from_shards(error_reply("ERR unknown subcommand 'SHARDS'"), seed, ec);
  }
  SECTION("a shard without nodes") {
    slot_map::from_shards(
        array_reply({aggregate_reply(
            t, {string_reply("slots"), array_reply({number_reply(0), number_reply(1)})})}),
        seed, ec);
  }
  SECTION("a range out of bounds") {
    slot_map::from_shards(
        array_reply({shard(t, {0, 16384}, {shard_node(t, "h", 1, "master", "h")})}), seed, ec);
  }
  SECTION("a reversed range") {
    slot_map::from_shards(array_reply({shard(t, {10, 2}, {shard_node(t, "h", 1, "master", "h")})}),
                          seed, ec);
  }
  CHECK(ec == thoonk::error::unexpected_type);
}

TEST_CASE("cluster: the slot map from CLUSTER SLOTS", "[unit][cluster]") {
  auto reply = array_reply({
      array_reply(
          {number_reply(0), number_reply(8191),
           array_reply({string_reply("127.0.0.1"), number_reply(7001), string_reply("id1")}),
           array_reply({string_reply("127.0.0.1"), number_reply(7004), string_reply("id4")})}),
      array_reply({number_reply(8192), number_reply(16383),
                   array_reply({string_reply(""), number_reply(7002), string_reply("id2")})}),
  });
  boost::system::error_code ec;
  auto m = slot_map::from_slots(reply, seed, ec);
  REQUIRE_FALSE(ec);
  CHECK(m.covers_all());
  CHECK(*m.primary_for(8191) == cluster_node{"127.0.0.1", 7001});
  CHECK(*m.primary_for(8192) == cluster_node{"10.0.0.9", 7002});

  SECTION("malformed") {
    slot_map::from_slots(array_reply({array_reply({number_reply(0), number_reply(10)})}), seed, ec);
    CHECK(ec == thoonk::error::unexpected_type);
    slot_map::from_slots(
        array_reply({array_reply({number_reply(0), number_reply(10),
                                  array_reply({string_reply("h"), number_reply(0)})})}),
        seed, ec);
    CHECK(ec == thoonk::error::unexpected_type);
    slot_map::from_slots(string_reply("x"), seed, ec);
    CHECK(ec == thoonk::error::unexpected_type);
  }
}

TEST_CASE("cluster: a MOVED slot is assigned at once", "[unit][cluster]") {
  slot_map m;
  m.assign_range(0, 16383, {"a", 1});
  m.assign(42, {"b", 2});
  CHECK(*m.primary_for(42) == cluster_node{"b", 2});
  CHECK(*m.primary_for(43) == cluster_node{"a", 1});
  CHECK(m.primaries().size() == 2);
  m.assign(43, {"b", 2});
  CHECK(m.primaries().size() == 2);
}

TEST_CASE("cluster: redirect replies parsed", "[unit][cluster]") {
  auto r = parse_redirect(error_reply("MOVED 3999 127.0.0.1:6381"));
  CHECK(r.kind == redirect::moved);
  CHECK(r.slot == 3999);
  CHECK(r.target == cluster_node{"127.0.0.1", 6381});
  r = parse_redirect(error_reply("ASK 12182 10.1.2.3:7000"));
  CHECK(r.kind == redirect::ask);
  CHECK(r.slot == 12182);
  CHECK(r.target == cluster_node{"10.1.2.3", 7000});
  r = parse_redirect(error_reply("MOVED 1 ::1:7000"));  // IPv6: the last ':' is the port's
  CHECK(r.target == cluster_node{"::1", 7000});
  r = parse_redirect(error_reply("MOVED 1 :7000"));  // unknown endpoint
  CHECK(r.kind == redirect::moved);
  CHECK(r.target.host.empty());
  CHECK(
      parse_redirect(error_reply("TRYAGAIN Multiple keys request during rehashing of slot")).kind ==
      redirect::tryagain);
  CHECK(parse_redirect(error_reply("CLUSTERDOWN The cluster is down")).kind ==
        redirect::clusterdown);
  CHECK(parse_redirect(error_reply("CLUSTERDOWN Hash slot not served")).kind ==
        redirect::clusterdown);
  // Not redirects.
  for (const char* text :
       {"ERR wrong number of arguments", "MOVED", "MOVED x 1.2.3.4:5", "MOVED 16384 h:1",
        "MOVED 1 h", "MOVED 1 h:0", "MOVED 1 h:70000", "ASK 1", "MOVEDX 1 h:1",
        "CROSSSLOT Keys in request don't hash to "
        "the same slot"})
    CHECK(parse_redirect(error_reply(text)).kind == redirect::none);
  CHECK(parse_redirect(string_reply("MOVED 1 h:1")).kind == redirect::none);
}

TEST_CASE("cluster: the decisions on a redirected request", "[unit][cluster]") {
  redirect_policy p(2, 3, 10ms, 25ms);
  const cluster_node here{"127.0.0.1", 7001};

  SECTION("replies without a redirect are the caller's") {
    auto a = p.decide({string_reply("OK"), error_reply("ERR no")}, here);
    CHECK(a.kind == redirect_action::done);
  }
  SECTION("MOVED resends to the target; ASK asks; then the limit") {
    auto a = p.decide({error_reply("MOVED 7 127.0.0.1:7002")}, here);
    CHECK(a.kind == redirect_action::resend);
    CHECK(a.slot == 7);
    CHECK(a.target == cluster_node{"127.0.0.1", 7002});
    a = p.decide({error_reply("ASK 7 :7003")}, here);
    CHECK(a.kind == redirect_action::ask);
    CHECK(a.target == cluster_node{"127.0.0.1", 7003});  // the host of the node that answered
    a = p.decide({error_reply("MOVED 7 127.0.0.1:7002")}, here);
    CHECK(a.kind == redirect_action::give_up);
    CHECK(p.redirects() == 2);
  }
  SECTION("the first redirecting reply of a request decides") {
    auto a = p.decide({string_reply("sha"), error_reply("MOVED 9 h:1")}, here);
    CHECK(a.kind == redirect_action::resend);
    CHECK(a.target == cluster_node{"h", 1});
  }
  SECTION("TRYAGAIN and CLUSTERDOWN pause, doubling up to the cap, then give up") {
    auto a = p.decide({error_reply("TRYAGAIN Multiple keys")}, here);
    CHECK(a.kind == redirect_action::retry_later);
    CHECK(a.delay == 10ms);
    a = p.decide({error_reply("CLUSTERDOWN The cluster is down")}, here);
    CHECK(a.delay == 20ms);
    a = p.decide({error_reply("TRYAGAIN x")}, here);
    CHECK(a.delay == 25ms);
    a = p.decide({error_reply("TRYAGAIN x")}, here);
    CHECK(a.kind == redirect_action::give_up);
    CHECK(p.retries() == 3);
  }
  SECTION("from the config") {
    thoonk::config cfg;
    cfg.cluster_max_redirects = 0;
    redirect_policy q(cfg);
    CHECK(q.decide({error_reply("MOVED 1 h:1")}, here).kind == redirect_action::give_up);
  }
}

TEST_CASE("cluster: the URL option", "[unit][cluster]") {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url("redis://127.0.0.1:7001,127.0.0.1:7002?cluster=yes", ec);
  REQUIRE_FALSE(ec);
  CHECK(cfg.cluster);
  CHECK(cfg.endpoints.size() == 2);
  cfg = thoonk::config::from_url("redis://h:1?cluster=no", ec, cfg);
  REQUIRE_FALSE(ec);
  CHECK_FALSE(cfg.cluster);
  thoonk::config::from_url("redis://h:1?cluster=maybe", ec);
  CHECK(ec == thoonk::error::invalid_url);
  CHECK_FALSE(thoonk::make_error_code(thoonk::error::cluster_redirect_limit).message().empty());
  CHECK_FALSE(
      thoonk::make_error_code(thoonk::error::cluster_topology_unavailable).message().empty());
}

TEST_CASE("cluster: ASKING goes before every command of a redirected request", "[unit][cluster]") {
  thoonk::request req;
  req.push("SCRIPT", "LOAD", "return 1");
  req.push("EVALSHA", "abc", 1, std::string("k\0ey\r\n", 7));
  auto out = thoonk::detail::asking_request(req);
  CHECK(out.commands() == 4);
  CHECK(out.expected_replies() == 4);
  thoonk::request want;
  want.push("ASKING");
  want.push("SCRIPT", "LOAD", "return 1");
  want.push("ASKING");
  want.push("EVALSHA", "abc", 1, std::string("k\0ey\r\n", 7));
  CHECK(out.payload() == want.payload());

  thoonk::response replies{string_reply("OK"), string_reply("sha"), string_reply("OK"),
                           error_reply("ERR x")};
  thoonk::detail::drop_asking_replies(replies);
  REQUIRE(replies.size() == 2);
  CHECK(replies[0].str == "sha");
  CHECK(replies[1].str == "ERR x");
}

TEST_CASE("cluster: a slot's requests keep their order across a change of route",
          "[unit][cluster]") {
  using thoonk::detail::slot_order;
  slot_order o;
  slot_order::ticket a, b, c;
  CHECK(o.open());
  o.on_send(a);
  o.on_send(b);
  CHECK(o.in_flight() == 2);

  SECTION("a MOVED reply: the requests in flight drain before a new one goes") {
    o.on_answer(a);  // a: MOVED, and the map now says another node
    o.on_route_change();
    o.hold(a);
    CHECK_FALSE(o.open());  // c must wait
    CHECK(o.draining() == 2);
    o.on_send(a);  // sent again on the new route: still draining
    CHECK(o.in_flight() == 0);
    CHECK_FALSE(o.release(a));  // a done; b still to come
    CHECK_FALSE(o.open());
    o.on_answer(b);       // b ran on the old route before the move
    CHECK(o.release(b));  // the slot opens: wake c
    CHECK(o.open());
    o.on_send(c);
    CHECK(o.in_flight() == 1);
    CHECK_FALSE(o.release(c));
    CHECK(o.in_flight() == 0);
  }
  SECTION("a request sent again without a route change (ASK, TRYAGAIN, node down)") {
    o.hold(a);  // answered and held at once
    CHECK(o.in_flight() == 1);
    CHECK_FALSE(o.open());
    o.on_send(a);
    CHECK(o.release(a));
    CHECK(o.open());
    CHECK_FALSE(o.release(b));  // b completed normally
    CHECK(o.in_flight() == 0);
    CHECK(o.draining() == 0);
  }
  SECTION("a refresh moves the slot while requests are in flight") {
    o.on_route_change();
    CHECK_FALSE(o.open());
    o.on_answer(a);
    o.hold(a);  // MOVED on the old route
    CHECK(o.draining() == 2);
    CHECK_FALSE(o.release(a));
    CHECK(o.release(b));
    CHECK(o.open());
  }
}

TEST_CASE("cluster: a slot's waiting requests are never stranded", "[unit][cluster]") {
  using thoonk::detail::slot_order;
  using thoonk::detail::slot_waiters;
  slot_order o;
  slot_waiters<int> w;
  slot_order::ticket a;
  CHECK_FALSE(w.must_wait(o));
  o.on_send(a);
  o.hold(a);  // a is sent again (MOVED): the slot drains
  REQUIRE(w.must_wait(o));
  w.push(1);
  w.push(2);
  CHECK_FALSE(w.should_wake(o));  // still draining

  SECTION(
      "a request arriving between the wake-up and the resumes waits, and is woken "
      "when the last woken one resumes") {
    o.on_send(a);
    REQUIRE(o.release(a));  // the slot opens: the router wakes the queue
    auto woken = w.take_all();
    CHECK(woken == std::deque<int>{1, 2});
    CHECK(w.woken() == 2);
    CHECK(w.must_wait(o));  // 3 comes before 1 and 2 ran: behind them
    w.push(3);
    CHECK(w.resumed(1));
    CHECK_FALSE(w.should_wake(o));  // 2 is still ahead of 3
    CHECK(w.resumed(2));
    // No release is coming (nothing drains); without this 3 would wait
    // for good, and every later request of the slot behind it.
    CHECK(w.should_wake(o));
    CHECK(w.take_all() == std::deque<int>{3});
    CHECK(w.resumed(3));
    CHECK_FALSE(w.should_wake(o));
    CHECK_FALSE(w.must_wait(o));
  }
  SECTION("a waiter that leaves (cancelled) lets the ones behind it go once the slot is open") {
    o.on_send(a);
    REQUIRE(o.release(a));
    CHECK(w.take_all().size() == 2);
    w.push(3);
    w.push(4);
    CHECK(w.resumed(1));
    CHECK_FALSE(w.resumed(3));  // 3 was not woken: its wait was cancelled
    CHECK(w.waiting() == 1);
    CHECK_FALSE(w.should_wake(o));  // 2 still ahead
    CHECK(w.resumed(2));
    CHECK(w.should_wake(o));  // 4
  }
  SECTION("a cancelled waiter while the slot still drains wakes nobody") {
    CHECK_FALSE(w.resumed(1));
    CHECK(w.waiting() == 1);
    CHECK_FALSE(w.should_wake(o));
  }
}

TEST_CASE("cluster: the public hash slot honours hash tags", "[unit][cluster]") {
  // include/thoonk/cluster.hpp: the function applications call.
  CHECK(thoonk::cluster_hash_slots == 16384);
  CHECK(thoonk::hash_slot("123456789") == (0x31C3 & 16383));
  CHECK(thoonk::hash_slot("foo") == 12182);
  CHECK(thoonk::hash_slot("{user1000}.following") == thoonk::hash_slot("{user1000}.followers"));
  CHECK(thoonk::hash_slot("{user1000}.following") == thoonk::hash_slot("user1000"));
  CHECK(thoonk::hash_slot("{}user1000") != thoonk::hash_slot("user1000"));
  // The library's keys of a feed hash to the slot of its name.
  thoonk::config cfg;
  cfg.cluster = true;
  thoonk::detail::feed_names n(cfg, "orders");
  CHECK(thoonk::hash_slot(n.key("items")) == thoonk::hash_slot("orders"));
}

TEST_CASE("cluster: two maps route alike whatever order they list their primaries in",
          "[unit][cluster]") {
  slot_map a, b;
  CHECK(a.same_routes(b));  // both empty
  a.assign_range(0, 8191, {"h", 1});
  a.assign_range(8192, 16383, {"h", 2});
  b.assign_range(8192, 16383, {"h", 2});
  CHECK_FALSE(a.same_routes(b));  // b has no primary for 0..8191
  b.assign_range(0, 8191, {"h", 1});
  CHECK(a.same_routes(b));
  CHECK(b.same_routes(a));
  b.assign(100, {"h", 3});  // a failover, a MOVED
  CHECK_FALSE(a.same_routes(b));
}

TEST_CASE("cluster: one deadline for a routed request", "[unit][cluster]") {
  using clock = request_deadline::clock;
  const auto t0 = clock::time_point{} + 1h;
  SECTION("unbounded without a timeout") {
    request_deadline d(t0, 0ms);
    CHECK_FALSE(d.bounded());
    CHECK_FALSE(d.passed(t0 + 1000h));
    CHECK(d.left(t0) == 0ms);
    CHECK(d.cap(t0 + 5s) == t0 + 5s);
  }
  SECTION("bounded: what is left shrinks; pauses are cut at the deadline") {
    request_deadline d(t0, 500ms);
    CHECK(d.bounded());
    CHECK(d.left(t0) == 500ms);
    CHECK(d.left(t0 + 200ms) == 300ms);
    CHECK(d.left(t0 + 499900us) == 1ms);  // rounded up, never 0 (no timeout)
    CHECK(d.left(t0 + 600ms) == 1ms);
    CHECK_FALSE(d.passed(t0 + 499ms));
    CHECK(d.passed(t0 + 500ms));
    CHECK(d.cap(t0 + 100ms) == t0 + 100ms);
    CHECK(d.cap(t0 + 5s) == t0 + 500ms);
  }
}

TEST_CASE("cluster: a request waiting for the map wakes when the map shows the change",
          "[unit][cluster]") {
  slot_map m;
  const cluster_node dead{"h", 1}, promoted{"h", 4};
  m.assign_range(0, 16383, dead);
  SECTION("a node down: done once the slot has another primary") {
    auto w = route_wait::away_from(42, dead);
    CHECK_FALSE(w.satisfied(nullptr, 0));
    CHECK_FALSE(w.satisfied(&m, 0));
    m.assign(43, promoted);  // another slot moved: not this one's route
    CHECK_FALSE(w.satisfied(&m, 1));
    m.assign(42, promoted);
    CHECK(w.satisfied(&m, 2));
  }
  SECTION("no primary: done once any serves the slot") {
    auto w = route_wait::away_from(42, std::nullopt);
    CHECK_FALSE(w.satisfied(nullptr, 0));
    slot_map empty;
    CHECK_FALSE(w.satisfied(&empty, 0));
    CHECK(w.satisfied(&m, 0));
  }
  SECTION("CLUSTERDOWN: done at the next change of any route") {
    auto w = route_wait::map_change(7);
    CHECK_FALSE(w.satisfied(&m, 7));
    CHECK(w.satisfied(&m, 8));
  }
  SECTION("the map is read often while requests wait, within bounds") {
    thoonk::config cfg;
    CHECK(map_poll_interval(cfg) == 50ms);
    cfg.reconnect_min_delay = 1ms;
    CHECK(map_poll_interval(cfg) == 10ms);
    cfg.reconnect_min_delay = 5s;
    CHECK(map_poll_interval(cfg) == 100ms);
  }
}

TEST_CASE("cluster: TRYAGAIN and CLUSTERDOWN are told apart", "[unit][cluster]") {
  redirect_policy p(2, 3, 10ms, 25ms);
  const cluster_node here{"127.0.0.1", 7001};
  CHECK(p.decide({error_reply("TRYAGAIN x")}, here).cause == redirect::tryagain);
  CHECK(p.decide({error_reply("CLUSTERDOWN x")}, here).cause == redirect::clusterdown);
  CHECK(p.decide({error_reply("MOVED 1 h:1")}, here).cause == redirect::moved);
  CHECK(p.decide({string_reply("OK")}, here).cause == redirect::none);
}
