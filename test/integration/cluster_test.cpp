// Redis Cluster (docs/cluster.md): each test case starts a private local
// cluster of 3 primaries and 3 replicas (support/redis_cluster.hpp) and
// runs a client in cluster mode against it. Tagged [cluster]: their own
// ctest entry (`cluster`), outside `integration`.
#include "support/helpers.hpp"
#include "support/loopback.hpp"
#include "support/redis_cluster.hpp"

#include "connection/cluster.hpp"
#include "connection/router.hpp"

#include <thoonk/script.hpp>

#include <atomic>
#include <exception>
#include <iostream>
#include <optional>
#include <set>
#include <thread>
#include <utility>

using namespace thoonk::test;
using thoonk::detail::hash_slot;
using thoonk::detail::router_of;

namespace {

// A name whose hash slot the primary on `port` serves (as `cl` sees it),
// so that a test covers every shard.
std::string name_on(const redis_cluster& cl, unsigned short port, const std::string& prefix) {
  for (int i = 0;; ++i) {
    auto n = prefix + std::to_string(i);
    if (cl.primary_of(hash_slot(n), port) == port) return n;
  }
}

std::vector<unsigned short> primary_ports(const redis_cluster& cl) {
  std::vector<unsigned short> out;
  for (const auto& n : cl.nodes(cl.any_live_port()))
    if (n.primary && !n.failed) out.push_back(n.port);
  std::sort(out.begin(), out.end());
  return out;
}

// Keys stored on the server on `port` whose names start with `prefix`.
std::size_t keys_on(const redis_cluster& cl, unsigned short port, const std::string& pattern) {
  auto out = cl.cli(port, {"--scan", "--pattern", pattern});
  return static_cast<std::size_t>(std::count(out.begin(), out.end(), '\n'));
}

// Every item left on `q`, got without waiting until it is empty.
asio::awaitable<std::set<std::string>> drain(thoonk::queue& q) {
  std::set<std::string> got;
  for (;;) {
    auto [ec, it] = co_await q.async_get(0ms, nothrow);
    if (ec == thoonk::error::queue_empty) break;
    REQUIRE_FALSE(ec);
    got.insert(it.item);
  }
  co_return got;
}

// How many of `items` are not in `got`.
std::size_t missing(const std::vector<std::string>& items, const std::set<std::string>& got) {
  std::size_t n = 0;
  for (const auto& i : items) n += got.count(i) == 0;
  return n;
}

// A client in cluster mode with every node of `cl` as a seed, and its
// io_context: `auto& [ioc, c] = cc;` names them in a test.
struct cluster_client {
  explicit cluster_client(const redis_cluster& cl) : cluster_client(cl.client_config()) {}
  explicit cluster_client(thoonk::config cfg) : c(ioc.get_executor(), std::move(cfg)) {}
  asio::io_context ioc;
  thoonk::client c;

  // Connects the client, runs `body` under `deadline`, then stops the
  // client.
  void run(coro_fn body, std::chrono::milliseconds deadline) {
    run_connected(ioc, c, std::move(body), deadline);
  }
};

// Moves `slot` to the primary on `to` on a thread of its own (redis-cli,
// one key per batch with 30 ms pauses) while the test's coroutines go on.
// finish() waits for the thread and rethrows what the migration threw.
class slot_migration {
 public:
  slot_migration(const redis_cluster& cl, std::uint16_t slot, unsigned short to)
      : thread_([this, &cl, slot, to] {
          try {
            cl.migrate_slot(slot, to, 1, 30ms);
          } catch (...) {
            error_ = std::current_exception();
          }
          done_ = true;
        }) {}
  slot_migration(const slot_migration&) = delete;
  slot_migration& operator=(const slot_migration&) = delete;
  ~slot_migration() {
    if (thread_.joinable()) thread_.join();
  }

  bool done() const { return done_; }

  void finish() {
    if (thread_.joinable()) thread_.join();
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  std::atomic<bool> done_{false};
  std::exception_ptr error_;
  std::thread thread_;  // last: it starts once the members above exist
};

}  // namespace

TEST_CASE("cluster: the harness starts 3 primaries and 3 replicas covering every slot",
          "[cluster][harness]") {
  redis_cluster cl;
  REQUIRE(cl.servers().size() == 6);
  auto nodes = cl.nodes(cl.servers().front()->port());
  REQUIRE(nodes.size() == 6);
  int primaries = 0;
  std::size_t slots = 0;
  for (const auto& n : nodes) {
    if (!n.primary) continue;
    ++primaries;
    for (auto [a, b] : n.slots) slots += static_cast<std::size_t>(b - a + 1);
  }
  CHECK(primaries == 3);
  CHECK(slots == 16384);
  for (const auto& s : cl.servers()) CHECK(s->pid() > 0);
}

TEST_CASE("cluster: feeds, queues and jobs on every shard; keys carry the name as a hash tag",
          "[cluster][feed][queue][job]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  REQUIRE(ports.size() == 3);
  cluster_client cc(cl);
  auto& [ioc, c] = cc;
  cc.run(
      [&]() -> asio::awaitable<void> {
        CHECK(router_of(c).stats().primaries == 3);
        for (auto port : ports) {
          // A feed, a queue and a job queue whose slots this primary serves.
          auto fname = name_on(cl, port, "feed-");
          auto f = co_await thoonk::feed::async_create_or_open(c, fname, asio::use_awaitable);
          thoonk::item_id id1("one");
          co_await f.async_publish(id1, std::string("first"), asio::use_awaitable);
          co_await f.async_publish(std::string("second"), asio::use_awaitable);
          auto all = co_await f.async_get_all(asio::use_awaitable);
          CHECK(all.size() == 2);
          auto one = co_await f.async_get_item("one", asio::use_awaitable);
          REQUIRE(one.has_value());
          CHECK(*one == "first");

          auto qname = name_on(cl, port, "queue-");
          auto q = co_await thoonk::queue::async_create_or_open(c, qname, asio::use_awaitable);
          co_await q.async_put("a", asio::use_awaitable);
          co_await q.async_put("b", asio::use_awaitable);
          auto got = co_await q.async_get(1s, asio::use_awaitable);
          CHECK(got.item == "a");
          got = co_await q.async_get(1s, asio::use_awaitable);
          CHECK(got.item == "b");

          auto jname = name_on(cl, port, "jobs-");
          auto jq = co_await thoonk::job_queue::async_create_or_open(c, jname, asio::use_awaitable);
          auto jid = co_await put_item(jq, "work");
          auto job = co_await jq.async_claim(1s, asio::use_awaitable);
          CHECK(job.id == jid);
          co_await jq.async_finish(job, std::string("done"), asio::use_awaitable);
          auto result = co_await jq.async_get_result(jid, 1s, asio::use_awaitable);
          CHECK(result == "done");
          auto counts = co_await jq.async_counts(asio::use_awaitable);
          CHECK(counts.finishes == 1);
          CHECK(counts.claimed == 0);

          // Every key of these lives on this primary, named with the tag.
          CHECK(keys_on(cl, port, "feed.*:{" + fname + "}") >= 3);
          CHECK(keys_on(cl, port, "feed.*:{" + qname + "}") >= 2);
          CHECK(keys_on(cl, port, "feed.*:{" + jname + "}") >= 2);
        }
        auto stats = router_of(c).stats();
        CHECK(stats.moved == 0);
        CHECK(stats.asked == 0);

        // with_durability: the WAIT goes to the queue's own primary (the
        // connection its put went through), whose replica acknowledges.
        auto qname = name_on(cl, ports.back(), "durable-");
        auto q = co_await thoonk::queue::async_create_or_open(c, qname, asio::use_awaitable);
        thoonk::durability ack;
        ack.replicas = 1;
        ack.timeout = 2s;
        auto [dec, did] = co_await q.async_put("x", thoonk::with_durability(ack, nothrow));
        CHECK_FALSE(dec);
        CHECK(ack.acknowledged == 1);
        CHECK(ack.satisfied());
        auto len = co_await q.async_length(asio::use_awaitable);
        CHECK(len == 1);
        // An operation of the client itself names no primary: refused
        // before any I/O.
        thoonk::durability cack;
        cack.replicas = 1;
        cack.timeout = 500ms;
        thoonk::feed_config no_cfg;
        const auto undurable = name_on(cl, ports.back(), "undurable-");
        auto [cec] = co_await c.async_create_feed(undurable, thoonk::feed_type::feed, no_cfg,
                                                  thoonk::with_durability(cack, nothrow));
        CHECK(cec == thoonk::error::invalid_argument);
      },
      60s);
}

TEST_CASE("cluster: feed management across slots (feeds set and feed keys apart)",
          "[cluster][create_feed][delete_feed][set_config]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  const auto feeds_port = cl.primary_of(hash_slot("feeds"), ports.front());
  // A feed on another shard than the `feeds` set: no script may touch both.
  unsigned short other = ports.front() == feeds_port ? ports.back() : ports.front();
  const auto name = name_on(cl, other, "managed-");
  cluster_client cc(cl);
  auto& [ioc, c] = cc;
  cc.run(
      [&]() -> asio::awaitable<void> {
        thoonk::feed_config fc{{"max_length", "5"}};
        co_await c.async_create_feed(name, thoonk::feed_type::feed, fc, asio::use_awaitable);
        auto exists = co_await c.async_feed_exists(name, asio::use_awaitable);
        CHECK(exists);
        auto names = co_await c.async_list_feeds(asio::use_awaitable);
        CHECK(std::count(names.begin(), names.end(), name) == 1);
        thoonk::feed_config no_cfg;
        auto [ec_again] =
            co_await c.async_create_feed(name, thoonk::feed_type::feed, no_cfg, nothrow);
        CHECK(ec_again == thoonk::error::feed_exists);
        auto [ec_type, created] =
            co_await c.async_create_or_open_feed(name, thoonk::feed_type::queue, no_cfg, nothrow);
        CHECK(ec_type == thoonk::error::wrong_feed_type);
        auto [ec_open, created2] =
            co_await c.async_create_or_open_feed(name, thoonk::feed_type::feed, no_cfg, nothrow);
        CHECK_FALSE(ec_open);
        CHECK_FALSE(created2);

        co_await c.async_set_config(name, "max_length", "7", asio::use_awaitable);
        auto v = co_await c.async_get_config(name, "max_length", asio::use_awaitable);
        REQUIRE(v.has_value());
        CHECK(*v == "7");
        auto [ec_missing, none] = co_await c.async_get_config("no-such-feed", "type", nothrow);
        CHECK(ec_missing == thoonk::error::feed_not_found);
        auto [ec_set_missing] =
            co_await c.async_set_config("no-such-feed", "max_length", "1", nothrow);
        CHECK(ec_set_missing == thoonk::error::feed_not_found);

        co_await c.async_delete_feed(name, asio::use_awaitable);
        exists = co_await c.async_feed_exists(name, asio::use_awaitable);
        CHECK_FALSE(exists);
        auto [ec_del] = co_await c.async_delete_feed(name, nothrow);
        CHECK(ec_del == thoonk::error::feed_not_found);
        CHECK(keys_on(cl, other, "feed.*:{" + name + "}") == 0);

        // A create cut after its first step (the name listed, no type):
        // operations report the feed missing; delete and create repair it.
        co_await c.async_create_feed(name, thoonk::feed_type::queue, no_cfg, asio::use_awaitable);
        const std::string config_key = "feed.config:{" + name + "}";
        thoonk::request del_config;
        del_config.push("DEL", config_key);
        thoonk::exec_options eo;
        auto [ec_raw, r_raw] = co_await router_of(c).exec(del_config, config_key, eo);
        REQUIRE_FALSE(ec_raw);
        auto [ec_open_q, q] = co_await thoonk::queue::async_open(c, name, nothrow);
        CHECK(ec_open_q == thoonk::error::feed_not_found);
        auto [ec_cfg, cfgv] = co_await c.async_get_config(name, "type", nothrow);
        CHECK(ec_cfg == thoonk::error::feed_not_found);
        auto [ec_repair, made] =
            co_await c.async_create_or_open_feed(name, thoonk::feed_type::queue, no_cfg, nothrow);
        CHECK_FALSE(ec_repair);
        CHECK(made);
        co_await c.async_delete_feed(name, asio::use_awaitable);
        // A delete cut after its first step (keys gone, still listed).
        co_await c.async_create_feed(name, thoonk::feed_type::feed, no_cfg, asio::use_awaitable);
        co_await router_of(c).exec(del_config, config_key, eo);
        auto [ec_del2] = co_await c.async_delete_feed(name, nothrow);
        CHECK_FALSE(ec_del2);
        names = co_await c.async_list_feeds(asio::use_awaitable);
        CHECK(std::count(names.begin(), names.end(), name) == 0);

        // A queue a plain client made without a type (the contract's Create
        // Feed, then a Queue put): create refuses it, create_or_open adopts
        // it with its data.
        thoonk::request listed;
        listed.push("SADD", "feeds", name);
        co_await router_of(c).exec(listed, "feeds", eo);
        const std::string ids_key = "feed.ids:{" + name + "}";
        thoonk::request plain_put;
        plain_put.push("LPUSH", ids_key, "p1");
        plain_put.push("HSET", "feed.items:{" + name + "}", "p1", "plain item");
        auto [ec_put, r_put] = co_await router_of(c).exec(plain_put, ids_key, eo);
        REQUIRE_FALSE(ec_put);
        auto [ec_exists] =
            co_await c.async_create_feed(name, thoonk::feed_type::queue, no_cfg, nothrow);
        CHECK(ec_exists == thoonk::error::feed_exists);
        auto [ec_adopt, made_again] =
            co_await c.async_create_or_open_feed(name, thoonk::feed_type::queue, no_cfg, nothrow);
        CHECK_FALSE(ec_adopt);
        CHECK_FALSE(made_again);
        auto adopted = co_await thoonk::queue::async_open(c, name, asio::use_awaitable);
        auto got = co_await adopted.async_get(1s, asio::use_awaitable);
        CHECK(got.id == "p1");
        CHECK(got.item == "plain item");
        co_await c.async_delete_feed(name, asio::use_awaitable);
        // Not listed, with a key left over: create makes the feed anew and
        // deletes the leftover, as on one server.
        const std::string items_key = "feed.items:{" + name + "}";
        thoonk::request leftover;
        leftover.push("HSET", items_key, "old", "left over");
        co_await router_of(c).exec(leftover, items_key, eo);
        auto [ec_anew, made_anew] =
            co_await c.async_create_or_open_feed(name, thoonk::feed_type::queue, no_cfg, nothrow);
        CHECK_FALSE(ec_anew);
        CHECK(made_anew);
        CHECK(keys_on(cl, other, items_key) == 0);
        co_await c.async_delete_feed(name, asio::use_awaitable);
      },
      60s);
}

namespace {

std::string node_id(const redis_cluster& cl, unsigned short port) {
  auto s = cl.cli(port, {"CLUSTER", "MYID"});
  return s.substr(0, s.find_first_of("\r\n"));
}

// RPUSH `key` `i` through the client's router.
asio::awaitable<void> push_one(thoonk::client* c, const std::string* key, int i,
                               std::vector<std::string>* errors) {
  thoonk::request req;
  req.push("RPUSH", *key, i);
  thoonk::exec_options eo;
  auto [ec, resp] = co_await router_of(*c).exec(req, *key, eo);
  if (ec) errors->push_back(ec.message());
  else if (resp[0].is_error()) errors->push_back(resp[0].str);
}

// Puts on `q` until `*stop`, each followed by WAIT 1 on the same primary
// connection (routed by the queue's key): `confirmed` holds the items a
// replica had when WAIT answered, `acked` every acknowledged put.
asio::awaitable<void> waited_puts(thoonk::client* c, thoonk::queue* q, const bool* stop,
                                  std::vector<std::string>* acked,
                                  std::vector<std::string>* confirmed, bool* done) {
  const std::string route = "feed.config:{" + q->name() + "}";
  thoonk::request wait;
  wait.push("WAIT", 1, 500);
  thoonk::exec_options eo;
  for (int i = 0; !*stop; ++i) {
    auto item = "waited-" + std::to_string(i);
    auto [ec, id] = co_await q->async_put(item, nothrow);
    if (ec) continue;
    acked->push_back(item);
    auto [wec, wresp] = co_await router_of(*c).exec(wait, route, eo);
    if (!wec && wresp[0].integer >= 1) confirmed->push_back(item);
  }
  *done = true;
}

// Another primary than `port`.
unsigned short other_primary(const redis_cluster& cl, unsigned short port) {
  for (auto p : primary_ports(cl))
    if (p != port) return p;
  return 0;
}

}  // namespace

TEST_CASE("cluster: delete_stale_functions deletes other builds' libraries on every primary",
          "[cluster][functions]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  REQUIRE(ports.size() == 3);
  // Another build's library on every primary, and an application's on one.
  const std::string stale = "thoonk_" + std::string(40, 'c');
  for (auto port : ports)
    cl.cli(port, {"FUNCTION", "LOAD",
                  "#!lua name=" + stale + "\nredis.register_function('" + stale +
                      "', function() return 1 end)"});
  cl.cli(ports.front(), {"FUNCTION", "LOAD",
                         "#!lua name=orders\nredis.register_function('orders_total', "
                         "function() return 1 end)"});
  cluster_client cc(cl);
  auto& [ioc, c] = cc;
  cc.run(
      [&]() -> asio::awaitable<void> {
        // This build's libraries on every primary: a put on each.
        for (auto port : ports) {
          auto q = co_await thoonk::job_queue::async_create_or_open(c, name_on(cl, port, "fn-"),
                                                                    asio::use_awaitable);
          co_await q.async_put("x", asio::use_awaitable);
        }
        auto [ec, deleted] = co_await c.async_delete_stale_functions(nothrow);
        CHECK_FALSE(ec);
        CHECK(deleted == 3);
        auto [ec2, again] = co_await c.async_delete_stale_functions(nothrow);
        CHECK_FALSE(ec2);
        CHECK(again == 0);
        // A node the client holds no connection to (it left the map): the
        // request is not sent anywhere else.
        thoonk::request ping;
        ping.push("PING");
        // (Named nodes: g++ 12 mishandles a temporary in a co_await call.)
        const thoonk::detail::cluster_node gone{"127.0.0.1", 1};
        auto [nec, nresp] = co_await router_of(c).exec_on(gone, ping);
        CHECK(nec == thoonk::error::cluster_topology_unavailable);
        c.stop();
        const thoonk::detail::cluster_node first{"127.0.0.1", ports.front()};
        auto [sec, sresp] = co_await router_of(c).exec_on(first, ping);
        CHECK(sec == thoonk::error::client_stopped);
        auto [pec, none] = co_await router_of(c).primaries();
        CHECK(pec == thoonk::error::client_stopped);
        CHECK(none.empty());
      },
      60s);
  for (auto port : ports) {
    INFO(port);
    const auto libs = cl.cli(port, {"FUNCTION", "LIST"});
    CHECK(libs.find(stale) == std::string::npos);
    CHECK(libs.find("thoonk_") != std::string::npos);  // this build's
  }
  CHECK(cl.cli(ports.front(), {"FUNCTION", "LIST", "LIBRARYNAME", "orders"}).find("orders") !=
        std::string::npos);
}

TEST_CASE("cluster: ASK is followed with ASKING without changing the map; MOVED after the move",
          "[cluster][ask][moved]") {
  redis_cluster cl;
  const std::string k = "ask-key";
  const auto slot = hash_slot(k);
  const auto from = cl.primary_of(slot, cl.any_live_port());
  const auto to = other_primary(cl, from);
  REQUIRE(to != 0);
  cluster_client cc(cl);
  auto& [ioc, c] = cc;
  cc.run(
      [&]() -> asio::awaitable<void> {
        thoonk::request set1;
        set1.push("SET", "{ask-key}.one", "present");
        thoonk::exec_options eo;
        auto [sec, sresp] = co_await router_of(c).exec(set1, "{ask-key}.one", eo);
        REQUIRE_FALSE(sec);
        // The slot half migrated by hand: the source no longer holds a key
        // it does not have; it sends the client to the target with ASK.
        const auto slot_s = std::to_string(slot);
        cl.cli(to, {"CLUSTER", "SETSLOT", slot_s, "IMPORTING", node_id(cl, from)});
        cl.cli(from, {"CLUSTER", "SETSLOT", slot_s, "MIGRATING", node_id(cl, to)});
        thoonk::script set_script("return redis.call('SET', KEYS[1], ARGV[1])");
        std::vector<std::string> keys{k}, args{"v1"};
        auto r = co_await c.async_eval(set_script, keys, args, asio::use_awaitable);
        CHECK(r.str == "OK");
        // ASK, then NOSCRIPT on the target (the script was never loaded
        // there) and SCRIPT LOAD + EVALSHA, asked again: two ASKs.
        auto st = router_of(c).stats();
        CHECK(st.asked == 2);
        CHECK(st.moved == 0);
        // The map did not change: a second key of the slot goes to the
        // source first and is asked again.
        args = {"v2"};
        r = co_await c.async_eval(set_script, keys, args, asio::use_awaitable);
        CHECK(r.str == "OK");
        CHECK(router_of(c).stats().asked == 3);

        // Limits: a client allowed no redirect fails with
        // cluster_redirect_limit, and so does a script whose keys are half
        // moved (TRYAGAIN) when no pause is allowed. Neither ran.
        auto strict_cfg = cl.client_config();
        strict_cfg.cluster_max_redirects = 0;
        strict_cfg.unavailable_retries = 0;
        thoonk::client strict(ioc.get_executor(), strict_cfg);
        co_await strict.async_connect(asio::use_awaitable);
        args = {"v3"};
        auto [lec, lv] = co_await strict.async_eval(set_script, keys, args, nothrow);
        CHECK(lec == thoonk::error::cluster_redirect_limit);
        // Two keys of the slot, one on the source (set before the
        // migration began), one not: TRYAGAIN.
        const std::string k2 = "{ask-key}.two";
        thoonk::script two_keys("return redis.call('GET', KEYS[1])");
        std::vector<std::string> both{"{ask-key}.one", k2}, no_args;
        auto [tec, tv] = co_await strict.async_eval(two_keys, both, no_args, nothrow);
        CHECK(tec == thoonk::error::cluster_redirect_limit);
        strict.stop();

        // The move completed: the source answers MOVED, the map follows.
        for (auto p : primary_ports(cl))
          cl.cli(p, {"CLUSTER", "SETSLOT", slot_s, "NODE", node_id(cl, to)});
        thoonk::request get;
        get.push("GET", k);
        auto [ec, resp] = co_await router_of(c).exec(get, k, eo);
        REQUIRE_FALSE(ec);
        CHECK(resp[0].str == "v2");
        CHECK(router_of(c).stats().moved == 1);
        auto [ec2, resp2] = co_await router_of(c).exec(get, k, eo);
        REQUIRE_FALSE(ec2);
        CHECK(resp2[0].str == "v2");
        CHECK(router_of(c).stats().moved == 1);  // the map knows now

        // Order across a MOVED: 200 RPUSHes issued together to a slot that
        // moved behind the client's back all get MOVED and arrive, in the
        // order issued, on the new primary.
        const std::string lk = "order-list";
        const auto lfrom = cl.primary_of(hash_slot(lk), cl.any_live_port());
        cl.migrate_slot(hash_slot(lk), other_primary(cl, lfrom), 10, 0ms);
        std::vector<std::string> errors;
        const auto moved_before = router_of(c).stats().moved;
        for (int i = 0; i < 200; ++i)
          asio::co_spawn(ioc, push_one(&c, &lk, i, &errors), asio::detached);
        thoonk::request len;
        len.push("LLEN", lk);
        std::int64_t n = 0;
        for (int tries = 0; tries < 500 && n < 200; ++tries) {
          auto [lec, lresp] = co_await router_of(c).exec(len, lk, eo);
          if (!lec) n = lresp[0].integer;
          co_await sleep_for(10ms);
        }
        CHECK(errors.empty());
        thoonk::request range;
        range.push("LRANGE", lk, 0, -1);
        auto [rec, rresp] = co_await router_of(c).exec(range, lk, eo);
        REQUIRE_FALSE(rec);
        std::vector<std::string> got, want;
        for (const auto& v : rresp[0].elements) got.push_back(v.str);
        for (int i = 0; i < 200; ++i) want.push_back(std::to_string(i));
        CHECK(got == want);
        CHECK(router_of(c).stats().moved > moved_before);

        // The periodic refresh learns a move without any MOVED.
        auto watch_cfg = cl.client_config();
        watch_cfg.cluster_refresh_interval = 100ms;
        thoonk::client watcher(ioc.get_executor(), watch_cfg);
        co_await watcher.async_connect(asio::use_awaitable);
        const std::string wk = "watched-key";
        const auto wfrom = cl.primary_of(hash_slot(wk), cl.any_live_port());
        cl.migrate_slot(hash_slot(wk), other_primary(cl, wfrom), 10, 0ms);
        const auto reads = router_of(watcher).stats().refreshes;
        bool refreshed =
            co_await wait_until([&] { return router_of(watcher).stats().refreshes >= reads + 2; });
        CHECK(refreshed);
        thoonk::request wset;
        wset.push("SET", wk, "x");
        auto [wec, wresp] = co_await router_of(watcher).exec(wset, wk, eo);
        CHECK_FALSE(wec);
        CHECK(router_of(watcher).stats().moved == 0);
        watcher.stop();
      },
      60s);
}

TEST_CASE("cluster: a queue's slot migrated under load: puts and gets go on, nothing is lost",
          "[cluster][migrate][queue]") {
  redis_cluster cl;
  const auto any = cl.any_live_port();
  const auto name = name_on(cl, primary_ports(cl).front(), "moving-");
  const auto slot = hash_slot(name);
  const auto from = cl.primary_of(slot, any);
  const auto to = other_primary(cl, from);
  cluster_client cc(cl);
  auto& [ioc, c] = cc;
  std::optional<slot_migration> mover;
  std::vector<std::string> acked;
  std::map<std::string, int> failures;
  cc.run(
      [&]() -> asio::awaitable<void> {
        auto q = co_await thoonk::queue::async_create_or_open(c, name, asio::use_awaitable);
        for (int i = 0; i < 20; ++i) {
          auto item = "item-" + std::to_string(acked.size());
          co_await q.async_put(item, asio::use_awaitable);
          acked.push_back(item);
        }
        // The migration runs on its own thread (redis-cli), one key per
        // batch with pauses, while the puts go on here.
        mover.emplace(cl, slot, to);
        while (!mover->done() || acked.size() < 60) {
          auto item = "item-" + std::to_string(acked.size() + failures.size());
          auto [ec, id] = co_await q.async_put(item, nothrow);
          if (ec) ++failures[ec.message()];
          else acked.push_back(item);
        }
        mover->finish();
        auto got = co_await drain(q);
        CHECK(got == std::set<std::string>(acked.begin(), acked.end()));
        auto st = router_of(c).stats();
        std::cout << "cluster migration under load: " << acked.size() << " puts acknowledged, "
                  << st.moved << " MOVED, " << st.asked << " ASK, " << st.tryagain
                  << " TRYAGAIN and " << st.clusterdown << " CLUSTERDOWN pauses, " << st.refreshes
                  << " slot map reads\n";
        // The client learned the move: from a MOVED (the first put to the
        // source after it), or from a map read of its subscriber, whose
        // wake-up shard channel the source dropped when the slot left it.
        CHECK((st.moved >= 1 || st.refreshes >= 2));
      },
      120s);
  if (mover) mover->finish();
  CHECK(failures.empty());
  CHECK(cl.primary_of(slot, any) == to);
}

TEST_CASE(
    "cluster: a primary killed, its replica promoted: the client follows; lost "
    "acknowledged writes are counted",
    "[cluster][failover][queue]") {
  redis_cluster cl;
  const auto any = cl.any_live_port();
  const auto victim = primary_ports(cl).front();
  const auto name = name_on(cl, victim, "failing-");
  const auto waited_name = name_on(cl, victim, "waited-");
  const auto slot = hash_slot(name);
  cluster_client cc(cl);
  auto& [ioc, c] = cc;
  std::vector<std::string> acked, unknown, waited_acked, waited_confirmed;
  std::map<std::string, int> failures;
  cc.run(
      [&]() -> asio::awaitable<void> {
        auto q = co_await thoonk::queue::async_create_or_open(c, name, asio::use_awaitable);
        // Beside it, on the same primary, puts confirmed by WAIT 1 until
        // the kill.
        auto wq = co_await thoonk::queue::async_create_or_open(c, waited_name, asio::use_awaitable);
        bool stop_waited = false, waited_done = false;
        asio::co_spawn(
            ioc, waited_puts(&c, &wq, &stop_waited, &waited_acked, &waited_confirmed, &waited_done),
            asio::detached);
        int n = 0;
        std::size_t acked_at_kill = 0;
        bool killed = false;
        while (!killed || acked.size() < acked_at_kill + 100) {
          if (!killed && acked.size() == 100) {
            cl.server_on(victim)->kill();
            stop_waited = true;
            killed = true;
            acked_at_kill = acked.size();
          }
          auto item = "item-" + std::to_string(n++);
          auto [ec, id] = co_await q.async_put(item, nothrow);
          if (!ec) acked.push_back(item);
          else if (ec == thoonk::error::unknown_outcome) unknown.push_back(item);
          else ++failures[ec.message()];
        }
        bool finished = co_await wait_until([&] { return waited_done; }, 30s);
        REQUIRE(finished);
        auto got = co_await drain(q);
        const auto lost = missing(acked, got);
        auto waited_got = co_await drain(wq);
        const auto waited_lost = missing(waited_acked, waited_got);
        const auto confirmed_lost = missing(waited_confirmed, waited_got);
        std::cout << "cluster failover with WAIT 1 after each put: " << waited_acked.size()
                  << " acknowledged (" << waited_lost << " lost), " << waited_confirmed.size()
                  << " confirmed by WAIT (" << confirmed_lost << " lost)\n";
        // A write the replica had (WAIT said so) survives its promotion.
        CHECK(confirmed_lost == 0);
        CHECK_FALSE(waited_confirmed.empty());
        std::size_t unknown_ran = 0;
        for (const auto& u : unknown) unknown_ran += got.count(u);
        auto st = router_of(c).stats();
        std::cout << "cluster failover: " << acked.size() << " puts acknowledged, " << lost
                  << " of them lost with the killed primary (asynchronous replication), "
                  << unknown.size() << " unknown outcomes (" << unknown_ran << " of them ran), "
                  << st.resent_unwritten << " requests sent again unwritten, " << st.refreshes
                  << " slot map reads\n";
        // Nothing is in the queue that was not put.
        for (const auto& g : got)
          CHECK((std::count(acked.begin(), acked.end(), g) +
                 std::count(unknown.begin(), unknown.end(), g)) == 1);
        const auto promoted = cl.primary_of(slot, cl.any_live_port());
        CHECK(promoted != victim);

        // The promoted primary killed too: nobody serves the slot. A
        // client still connects (the map is read from the other nodes); a
        // put there fails, after its retries, with an error saying it did
        // not run (not unknown_outcome).
        cl.server_on(promoted)->kill();
        auto strict_cfg = cl.client_config();
        strict_cfg.unavailable_retries = 1;
        strict_cfg.connect_timeout = 500ms;
        thoonk::client strict(ioc.get_executor(), strict_cfg);
        auto [sec] = co_await strict.async_connect(nothrow);
        CHECK_FALSE(sec);
        thoonk::queue sq(strict, name);
        auto [pec, pid] = co_await sq.async_put("never", nothrow);
        CHECK(pec);
        CHECK(pec != thoonk::error::unknown_outcome);
        strict.stop();
      },
      120s);
  CHECK(failures.empty());
  (void)any;
}

TEST_CASE("cluster: a seed that is no cluster node: cluster_topology_unavailable",
          "[cluster][connect]") {
  asio::io_context ioc;
  boost::system::error_code uec;
  auto cfg = thoonk::config::from_url(shared_redis_url(), uec);
  REQUIRE_FALSE(uec);
  cfg.cluster = true;
  cfg.connect_timeout = 1s;
  cfg.unavailable_retries = 2;
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 50ms;
  thoonk::client c(ioc.get_executor(), cfg);
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    auto [ec] = co_await c.async_connect(nothrow);
    CHECK(ec == thoonk::error::cluster_topology_unavailable);
    auto q = thoonk::queue(c, "nowhere");
    auto [pec, id] = co_await q.async_put("x", nothrow);
    CHECK(pec == thoonk::error::cluster_topology_unavailable);
    c.stop();
  });
}

namespace {

// PUBSUB SHARDCHANNELS of the server on `port`.
std::set<std::string> shard_channels_on(const redis_cluster& cl, unsigned short port) {
  auto out = cl.cli(port, {"PUBSUB", "SHARDCHANNELS"});
  std::set<std::string> got;
  std::size_t at = 0;
  while (at < out.size()) {
    auto nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    auto line = out.substr(at, nl - at);
    if (!line.empty()) got.insert(line);
    at = nl + 1;
  }
  return got;
}

// Every event of one catch-up subscription: how often each id was
// delivered as published, live or replayed.
struct feed_log {
  std::map<std::string, int> published;
  std::size_t replayed = 0;
  thoonk::feed_callback callback() {
    return [this](const thoonk::feed_event& ev) {
      if (ev.kind != thoonk::feed_event::publish) return;
      ++published[std::string(ev.id)];
      if (ev.replayed) ++replayed;
    };
  }
  std::size_t duplicates() const {
    std::size_t n = 0;
    for (const auto& [id, count] : published) n += count > 1;
    return n;
  }
};

// Publishes "<prefix>N" for N = 0, 1, ... on `f` every `every` until
// `*stop`: `acked` gets every publish that succeeded.
asio::awaitable<void> publish_until(thoonk::feed* f, std::string prefix, const bool* stop,
                                    std::chrono::milliseconds every,
                                    std::vector<std::string>* acked, std::size_t* failed,
                                    bool* done) {
  for (int i = 0; !*stop; ++i) {
    thoonk::item_id id(prefix + std::to_string(i));
    auto [ec, got] = co_await f->async_publish(id, std::string("x"), nothrow);
    if (ec) ++*failed;
    else acked->push_back(prefix + std::to_string(i));
    co_await sleep_for(every);
  }
  *done = true;
}

// A feed made by one client and opened by another (the producer), and the
// first client's catch-up subscription of it recording into a log.
struct watched_feed {
  thoonk::feed feed;
  thoonk::feed producer_feed;
  thoonk::feed_subscription subscription;
};

asio::awaitable<watched_feed> watch_feed(thoonk::client& c, thoonk::client& producer,
                                         const std::string& name, feed_log& log) {
  auto f = co_await thoonk::feed::async_create_or_open(c, name, asio::use_awaitable);
  auto pf = co_await thoonk::feed::async_open(producer, name, asio::use_awaitable);
  thoonk::feed_subscribe_options opts;
  opts.catch_up = true;
  auto sub = co_await f.async_subscribe(log.callback(), opts, asio::use_awaitable);
  co_return watched_feed{std::move(f), std::move(pf), std::move(sub)};
}

}  // namespace

TEST_CASE(
    "cluster: feed, job and wake-up notifications over sharded pub/sub on every shard; "
    "management events on classic pub/sub",
    "[cluster][subscriber][sharded]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  REQUIRE(ports.size() == 3);
  asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), cl.client_config());
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await c.async_connect(asio::use_awaitable);
        // Classic subscribers of the bare and the tagged channel names, and
        // of the management channel.
        auto classic = co_await capture_patterns(
            c.sub(), std::string("feed.*"), std::string("thoonk.sync:*"), std::string("newfeed"));
        std::vector<std::string> names;
        for (auto port : ports) names.push_back(name_on(cl, port, "heard-"));
        std::vector<thoonk::feed> feeds;
        std::vector<thoonk::feed_subscription> subs;
        std::vector<feed_log> logs(names.size());
        for (std::size_t i = 0; i < names.size(); ++i) {
          auto f = co_await thoonk::feed::async_create_or_open(c, names[i], asio::use_awaitable);
          thoonk::feed_subscribe_options opts;
          opts.catch_up = true;
          auto s = co_await f.async_subscribe(logs[i].callback(), opts, asio::use_awaitable);
          feeds.push_back(std::move(f));
          subs.push_back(std::move(s));
        }
        // One shard connection per primary, each SSUBSCRIBEd to its own
        // feed's channels only.
        CHECK(c.sub().stats().shard_connections == 3);
        for (std::size_t i = 0; i < names.size(); ++i) {
          const auto on = shard_channels_on(cl, ports[i]);
          CHECK(on.count("feed.publish:{" + names[i] + "}") == 1);
          CHECK(on.count("feed.edit:{" + names[i] + "}") == 1);
          CHECK(on.count("thoonk.sync:" + c.instance_id() + ":{" + names[i] + "}") == 1);
          for (std::size_t j = 0; j < names.size(); ++j)
            if (j != i) CHECK(on.count("feed.publish:{" + names[j] + "}") == 0);
        }
        for (auto& f : feeds) {
          thoonk::item_id id("hello");
          co_await f.async_publish(id, std::string("world"), asio::use_awaitable);
        }
        bool all = co_await wait_until([&] {
          for (const auto& l : logs)
            if (l.published.count("hello") == 0) return false;
          return classic->on("newfeed").size() >= names.size();
        });
        CHECK(all);
        // The management events came on classic pub/sub; the feed's events
        // and markers never did (SPUBLISH reaches shard subscribers only).
        CHECK(classic->on("newfeed").size() == names.size());
        for (const auto& m : classic->msgs) CHECK(m.first == "newfeed");
        for (const auto& l : logs) CHECK(l.duplicates() == 0);

        // A queue getter waiting on an empty queue wakes up at a put (the
        // wake-up is SPUBLISHed on the queue's shard), and a job's result
        // waiter hears job.finish.
        auto qname = name_on(cl, ports[1], "woken-");
        auto q = co_await thoonk::queue::async_create_or_open(c, qname, asio::use_awaitable);
        thoonk::client producer(ioc.get_executor(), cl.client_config());
        co_await producer.async_connect(asio::use_awaitable);
        auto pq = co_await thoonk::queue::async_open(producer, qname, asio::use_awaitable);
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              co_await sleep_for(300ms);
              co_await pq.async_put("late", asio::use_awaitable);
            },
            asio::detached);
        const auto t0 = std::chrono::steady_clock::now();
        auto got = co_await q.async_get(5s, asio::use_awaitable);
        const auto waited = std::chrono::steady_clock::now() - t0;
        CHECK(got.item == "late");
        CHECK(waited < 2s);
        CHECK(shard_channels_on(cl, ports[1]).count("feed.wake:{" + qname + "}") == 1);

        auto jname = name_on(cl, ports[2], "finished-");
        auto jq = co_await thoonk::job_queue::async_create_or_open(c, jname, asio::use_awaitable);
        auto pjq = co_await thoonk::job_queue::async_open(producer, jname, asio::use_awaitable);
        auto jid = co_await put_item(jq, "work");
        asio::co_spawn(
            ioc,
            [&]() -> asio::awaitable<void> {
              auto job = co_await pjq.async_claim(1s, asio::use_awaitable);
              co_await sleep_for(200ms);
              co_await pjq.async_finish(job, std::string("done"), asio::use_awaitable);
            },
            asio::detached);
        auto result = co_await jq.async_get_result(jid, 5s, asio::use_awaitable);
        CHECK(result == "done");
        CHECK(classic->on("job.finish:{" + jname + "}").empty());
        CHECK(c.sub().stats().shard_connections == 3);

        // A subscriber of its own (no client, so no slot map): each shard
        // channel goes to its seed first and follows the MOVED reply.
        thoonk::subscriber lone(ioc.get_executor(), cl.client_config());
        std::map<std::string, int> heard;
        std::vector<thoonk::subscription> lone_subs;
        for (const auto& n : names) {
          auto ch = "feed.publish:{" + n + "}";
          auto s = co_await lone.async_ssubscribe(
              ch, [&heard](const thoonk::message& m) { ++heard[std::string(m.channel)]; },
              asio::use_awaitable);
          lone_subs.push_back(std::move(s));
        }
        CHECK(lone.stats().shard_connections == 3);
        for (std::size_t i = 0; i < names.size(); ++i) {
          thoonk::item_id id("again");
          co_await feeds[i].async_publish(id, std::string("x"), asio::use_awaitable);
        }
        bool lone_heard = co_await wait_until([&] { return heard.size() == names.size(); });
        CHECK(lone_heard);
        lone.stop();
        producer.stop();
        c.stop();
      },
      60s);
}

TEST_CASE("cluster: a feed's slot migrated while subscribed: events keep arriving, each once",
          "[cluster][subscriber][sharded][migrate]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  const auto name = name_on(cl, ports.front(), "migrating-");
  const auto slot = hash_slot(name);
  const auto from = cl.primary_of(slot, cl.any_live_port());
  const auto to = other_primary(cl, from);
  asio::io_context ioc;
  auto cfg = cl.client_config();
  thoonk::client c(ioc.get_executor(), cfg);
  thoonk::client producer(ioc.get_executor(), cfg);
  std::optional<slot_migration> mover;
  feed_log log;
  std::vector<std::string> acked;
  std::size_t failed = 0;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(c, producer);
        auto [f, pf, sub] = co_await watch_feed(c, producer, name, log);
        CHECK(shard_channels_on(cl, from).count("feed.publish:{" + name + "}") == 1);
        bool stop = false, done = false;
        asio::co_spawn(ioc, publish_until(&pf, "m-", &stop, 2ms, &acked, &failed, &done),
                       asio::detached);
        co_await sleep_for(200ms);
        mover.emplace(cl, slot, to);
        bool moved = co_await wait_until([&] { return mover->done(); }, 30s);
        REQUIRE(moved);
        // Publishing goes on after the move, then stops.
        co_await sleep_for(300ms);
        stop = true;
        co_await wait_until([&] { return done; });
        bool all = co_await wait_until([&] {
          for (const auto& a : acked)
            if (log.published.count(a) == 0) return false;
          return true;
        });
        CHECK(all);
        CHECK(log.duplicates() == 0);
        // Nothing delivered that the feed does not hold.
        auto ids = co_await f.async_get_ids(asio::use_awaitable);
        std::set<std::string> in_feed(ids.begin(), ids.end());
        std::size_t foreign = 0;
        for (const auto& [id, n] : log.published) foreign += in_feed.count(id) == 0;
        CHECK(foreign == 0);
        CHECK(in_feed.size() == acked.size());
        // The channels followed the slot.
        CHECK(shard_channels_on(cl, to).count("feed.publish:{" + name + "}") == 1);
        CHECK(shard_channels_on(cl, from).count("feed.publish:{" + name + "}") == 0);
        std::cout << "sharded subscriber, slot migrated: " << acked.size() << " published, "
                  << log.published.size() << " delivered once each (" << log.replayed
                  << " by catch-up), " << sub.stats().catch_ups << " catch-ups, " << failed
                  << " publishes failed\n";
        CHECK(sub.stats().catch_ups >= 1);
        producer.stop();
        c.stop();
      },
      120s);
  if (mover) mover->finish();
  CHECK(failed == 0);
}

TEST_CASE(
    "cluster: a feed's primary killed while subscribed: the subscriber follows the "
    "promoted replica and catch-up covers the gap, each event once",
    "[cluster][subscriber][sharded][failover]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  const auto victim = ports.front();
  const auto name = name_on(cl, victim, "failing-feed-");
  const auto other_name = name_on(cl, ports.back(), "steady-feed-");
  const auto slot = hash_slot(name);
  asio::io_context ioc;
  auto cfg = cl.client_config();
  // The subscriber's client reads the map again less often than the
  // producer's: it notices the promotion a few hundred ms after the
  // producer publishes through the new primary, so there is a gap to
  // cover.
  auto slow = cfg;
  slow.reconnect_min_delay = 400ms;
  slow.reconnect_max_delay = 800ms;
  thoonk::client c(ioc.get_executor(), slow);
  thoonk::client producer(ioc.get_executor(), cfg);
  feed_log log, other_log;
  std::vector<std::string> acked, other_acked;
  std::size_t failed = 0, other_failed = 0;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(c, producer);
        auto [f, pf, sub] = co_await watch_feed(c, producer, name, log);
        auto [g, pg, other_sub] = co_await watch_feed(c, producer, other_name, other_log);
        // Management events still arrive (classic pub/sub, the subscriber's
        // own connection).
        auto classic = co_await capture_patterns(c.sub(), std::string("newfeed"));
        bool stop = false, done = false, other_done = false;
        asio::co_spawn(ioc, publish_until(&pf, "f-", &stop, 2ms, &acked, &failed, &done),
                       asio::detached);
        asio::co_spawn(
            ioc, publish_until(&pg, "g-", &stop, 2ms, &other_acked, &other_failed, &other_done),
            asio::detached);
        co_await sleep_for(300ms);
        cl.server_on(victim)->kill();
        // Until the replica is promoted and a few publishes went through it.
        const auto at_kill = acked.size();
        bool promoted = co_await wait_until([&] { return acked.size() >= at_kill + 50; }, 30s);
        REQUIRE(promoted);
        stop = true;
        co_await wait_until([&] { return done && other_done; });
        // Every event the feed holds now was delivered, once.
        auto ids = co_await f.async_get_ids(asio::use_awaitable);
        bool all = co_await wait_until(
            [&] {
              for (const auto& id : ids)
                if (log.published.count(id) == 0) return false;
              for (const auto& a : other_acked)
                if (other_log.published.count(a) == 0) return false;
              return true;
            },
            20s);
        CHECK(all);
        CHECK(log.duplicates() == 0);
        CHECK(other_log.duplicates() == 0);
        // Delivered but not in the feed: acknowledged publishes the dead
        // primary had not replicated (asynchronous replication).
        std::set<std::string> in_feed(ids.begin(), ids.end());
        std::size_t lost_writes = 0;
        for (const auto& [id, n] : log.published) lost_writes += in_feed.count(id) == 0;
        const auto now_primary = cl.primary_of(slot, cl.any_live_port());
        CHECK(now_primary != victim);
        CHECK(shard_channels_on(cl, now_primary).count("feed.publish:{" + name + "}") == 1);
        CHECK(c.sub().stats().shard_connections == 2);  // the dead node's connection went
        std::cout << "sharded subscriber, primary killed: " << acked.size() << " published ("
                  << failed << " failed during the failover), " << log.published.size()
                  << " delivered once each (" << log.replayed << " by catch-up, " << lost_writes
                  << " of them lost with the dead primary), " << sub.stats().catch_ups
                  << " catch-ups\n";
        // The replayed events arrive before the round that replayed them
        // ends (its marker and replay both in): wait for that end.
        const bool caught_up = co_await wait_until([&] { return sub.stats().catch_ups >= 1; });
        CHECK(caught_up);

        // Management events after the failover.
        auto fresh = name_on(cl, ports.back(), "after-failover-");
        co_await c.async_create_feed(fresh, thoonk::feed_type::feed, thoonk::feed_config{},
                                     asio::use_awaitable);
        bool heard = co_await wait_until([&] {
          for (const auto& m : classic->on("newfeed"))
            if (m.second.starts_with(fresh + std::string(1, '\0'))) return true;
          return false;
        });
        CHECK(heard);
        producer.stop();
        c.stop();
      },
      120s);
  CHECK(other_failed == 0);
}

TEST_CASE(
    "cluster: a dead-letter queue of another slot is refused with cluster_cross_slot and "
    "nothing changes; one with the queue's hash tag takes the dead letters",
    "[cluster][job][dead_letter]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  auto cfg = cl.client_config();
  cfg.allow_hash_tag_names = true;  // for the tagged dead-letter queue
  cluster_client cc(cfg);
  auto& [ioc, c] = cc;
  cc.run(
      [&]() -> asio::awaitable<void> {
        const auto qname = name_on(cl, ports.front(), "lettered-");
        const auto elsewhere = name_on(cl, ports.back(), "dead-");
        thoonk::job_queue::settings s;
        s.retry.max_retries = 1;
        s.dead_letter_queue = elsewhere;
        auto [cec, none] = co_await thoonk::job_queue::async_create_or_open(c, qname, s, nothrow);
        CHECK(cec == thoonk::error::cluster_cross_slot);
        auto listed = co_await c.async_feed_exists(qname, asio::use_awaitable);
        CHECK_FALSE(listed);  // refused before any I/O

        // The same setting written by another client: the call that would
        // dead-letter is refused and the job stays claimed, its failure
        // not counted.
        s.dead_letter_queue.reset();
        auto q = co_await thoonk::job_queue::async_create_or_open(c, qname, s, asio::use_awaitable);
        co_await c.async_set_config(qname, "dead_letter_queue", elsewhere, asio::use_awaitable);
        auto id = co_await put_item(q, "doomed");
        auto j = co_await q.async_claim(1s, asio::use_awaitable);
        auto [fec, fr] = co_await q.async_fail(j, "no way out", nothrow);
        CHECK(fec == thoonk::error::cluster_cross_slot);
        auto counts = co_await q.async_counts(asio::use_awaitable);
        CHECK(counts.claimed == 1);
        auto info = co_await q.async_get_job(id, asio::use_awaitable);
        REQUIRE(info);
        CHECK(info->failures == 0);

        // Every other way to a dead letter is refused too, and changes
        // nothing: abort, a worker failed on demand, a maintenance pass (not
        // even its promotion of a due scheduled job), and a runner, which
        // cannot register its worker.
        thoonk::abort_options ao;
        ao.outcome = thoonk::abort_options::outcome_t::failed;
        auto [aec] = co_await q.async_abort(id, ao, nothrow);
        CHECK(aec == thoonk::error::cluster_cross_slot);
        auto [wec, nw] = co_await q.async_fail_worker("some-worker", nothrow);
        CHECK(wec == thoonk::error::cluster_cross_slot);
        thoonk::put_options later;
        later.delay = 1ms;
        auto due = co_await q.async_put("due", later, asio::use_awaitable);
        co_await sleep_for(20ms);
        thoonk::maintenance_options mo;
        mo.publish_stats = false;
        auto [mec, rep] = co_await q.async_maintain(mo, nothrow);
        CHECK(mec == thoonk::error::cluster_cross_slot);
        auto due_info = co_await q.async_get_job(due.id, asio::use_awaitable);
        REQUIRE(due_info);
        CHECK(due_info->state == thoonk::job_state::scheduled);
        int handled = 0;
        thoonk::run_options ro;
        auto [rec_ec, report] = co_await q.async_run(
            thoonk::job_function([&](thoonk::job_context) -> std::optional<std::string> {
              ++handled;
              return std::nullopt;
            }),
            ro, nothrow);
        CHECK(rec_ec == thoonk::error::cluster_cross_slot);
        CHECK(handled == 0);
        auto after = co_await q.async_counts(asio::use_awaitable);
        CHECK(after.claimed == 1);
        CHECK(after.scheduled == 1);
        info = co_await q.async_get_job(id, asio::use_awaitable);
        REQUIRE(info);
        CHECK(info->failures == 0);
        CHECK(info->state == thoonk::job_state::claimed);

        // A dead-letter queue named with the queue's hash tag shares its
        // slot: the job goes there.
        const auto tagged = "{" + qname + "}.dead";
        auto dead =
            co_await thoonk::job_queue::async_create_or_open(c, tagged, asio::use_awaitable);
        co_await c.async_set_config(qname, "dead_letter_queue", tagged, asio::use_awaitable);
        thoonk::fail_options at_once;
        at_once.permanent = true;
        auto r = co_await q.async_fail(j, "to the tagged one", at_once, asio::use_awaitable);
        CHECK(r.outcome == thoonk::fail_result::outcome_t::dead_lettered);
        auto rec = co_await dead.async_claim(1s, asio::use_awaitable);
        CHECK(rec.item.find("to the tagged one") != std::string::npos);
      },
      60s);
}

namespace {

// The FUNCTION LOADs the server on `port` received since it started or
// since CONFIG RESETSTAT: INFO commandstats, calls (failed ones included)
// plus rejected calls.
std::uint64_t function_loads_on(const redis_cluster& cl, unsigned short port) {
  const auto info = cl.cli(port, {"INFO", "commandstats"});
  const auto at = info.find("cmdstat_function|load:");
  if (at == std::string::npos) return 0;
  const auto line = info.substr(at, info.find('\n', at) - at);
  auto field = [&](const std::string& name) -> std::uint64_t {
    const auto p = line.find(name + "=");
    if (p == std::string::npos) return 0;
    return std::stoull(line.substr(p + name.size() + 1));
  };
  return field("calls") + field("rejected_calls");
}

// `n` names whose slots the primary on `port` serves.
std::vector<std::string> names_on(const redis_cluster& cl, unsigned short port,
                                  const std::string& prefix, int n) {
  std::vector<std::string> out;
  for (int i = 0; static_cast<int>(out.size()) < n; ++i) {
    auto name = prefix + std::to_string(i);
    if (cl.primary_of(hash_slot(name), port) == port) out.push_back(name);
  }
  return out;
}

asio::awaitable<void> put_counted(thoonk::queue* q, std::string item, int* done,
                                  std::vector<std::string>* errors) {
  auto [ec, id] = co_await q->async_put(std::move(item), nothrow);
  if (ec) errors->push_back(ec.message());
  ++*done;
}

// The replicas of `cl`, as CLUSTER NODES lists them.
std::vector<unsigned short> replica_ports(const redis_cluster& cl) {
  std::vector<unsigned short> out;
  for (const auto& n : cl.nodes(cl.any_live_port()))
    if (!n.primary) out.push_back(n.port);
  return out;
}

}  // namespace

TEST_CASE(
    "cluster: replicas as the seeds connect; concurrent first calls load each function "
    "library once per primary",
    "[cluster][connect][functions]") {
  redis_cluster cl;
  const auto ports = primary_ports(cl);
  REQUIRE(ports.size() == 3);
  // Two replicas as the only seeds (as after failovers turned the listed
  // primaries into replicas).
  auto cfg = cl.client_config();
  const auto replicas = replica_ports(cl);
  REQUIRE(replicas.size() == 3);
  cfg.endpoints = {{"127.0.0.1", replicas[0]}, {"127.0.0.1", replicas[1]}};
  cfg.host = "127.0.0.1";
  cfg.port = replicas[0];
  std::vector<std::string> names;
  for (auto port : ports)
    for (auto& n : names_on(cl, port, "first-", 4)) names.push_back(std::move(n));
  cluster_client cc(cfg);
  auto& [ioc, c] = cc;
  cc.run(
      [&]() -> asio::awaitable<void> {
        CHECK(c.cluster_stats().primaries == 3);
        std::vector<thoonk::queue> queues;
        for (const auto& n : names)
          queues.push_back(co_await thoonk::queue::async_create_or_open(c, n, asio::use_awaitable));
        // The creates loaded their own libraries; count from here on.
        for (auto port : ports) cl.cli(port, {"CONFIG", "RESETSTAT"});
        // 400 first puts at once, on 12 queues over the 3 primaries: every
        // one finds the put library missing on its primary.
        constexpr int total = 400;
        int done = 0;
        std::vector<std::string> errors;
        for (int i = 0; i < total; ++i)
          asio::co_spawn(ioc,
                         put_counted(&queues[static_cast<std::size_t>(i) % queues.size()],
                                     "item-" + std::to_string(i), &done, &errors),
                         asio::detached);
        const bool finished = co_await wait_until([&] { return done == total; }, 60s);
        REQUIRE(finished);
        CHECK(errors.empty());
        for (auto port : ports) {
          INFO("primary " << port);
          CHECK(function_loads_on(cl, port) == 1);
        }
        std::size_t got = 0;
        for (auto& q : queues) got += (co_await drain(q)).size();
        CHECK(got == total);
      },
      120s);
}

TEST_CASE("cluster: request_timeout bounds a request when no seed answers",
          "[cluster][connect][timeout]") {
  asio::io_context ioc;
  thoonk::config cfg;
  cfg.cluster = true;
  cfg.host = "127.0.0.1";
  cfg.port = free_port(ioc);  // nothing listens there
  cfg.connect_timeout = 1s;
  cfg.request_timeout = 300ms;
  cfg.reconnect_min_delay = 10ms;
  cfg.reconnect_max_delay = 100ms;
  thoonk::client c(ioc.get_executor(), cfg);
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        auto [ec] = co_await c.async_connect(nothrow);
        CHECK(ec);
        thoonk::queue q(c, "nowhere");
        for (int i = 0; i < 2; ++i) {
          const auto t0 = std::chrono::steady_clock::now();
          auto [pec, id] = co_await q.async_put("x", nothrow);
          const auto took = std::chrono::steady_clock::now() - t0;
          CHECK(pec == thoonk::error::request_timeout);
          // An outcome check: the request ends (5 times the timeout is far
          // beyond any scheduling delay), it does not wait for the map.
          CHECK(took < 5 * cfg.request_timeout);
        }
        // A request's own timeout bounds it the same way.
        thoonk::request get;
        get.push("GET", "k");
        thoonk::exec_options eo;
        eo.timeout = 200ms;
        auto [gec, gresp] = co_await router_of(c).exec(get, "k", eo);
        CHECK(gec == thoonk::error::request_timeout);
        c.stop();
      },
      60s);
}

TEST_CASE(
    "cluster: the router's counters and slot map are public; request_timeout bounds a "
    "request when no node answers",
    "[cluster][stats][timeout][moved]") {
  redis_cluster cl;
  const std::string name = "counted";
  const auto slot = thoonk::hash_slot(name);
  CHECK(slot == hash_slot("feed.ids:{counted}"));
  const auto from = cl.primary_of(slot, cl.any_live_port());
  const auto to = other_primary(cl, from);
  REQUIRE(to != 0);
  auto cfg = cl.client_config();
  cfg.request_timeout = 500ms;
  cfg.cluster_refresh_interval = 0ms;  // the map is read on events only
  cluster_client cc(cfg);
  auto& [ioc, c] = cc;
  cc.run(
      [&]() -> asio::awaitable<void> {
        const auto st0 = c.cluster_stats();
        CHECK(st0.primaries == 3);
        CHECK(st0.refreshes >= 1);
        CHECK(st0.moved == 0);
        CHECK(st0.nodes.size() == 3);
        for (const auto& n : st0.nodes) CHECK(n.connected);
        CHECK(st0.node_connects == 3);
        const auto owner = c.node_for_slot(slot);
        REQUIRE(owner);
        CHECK(owner->port == from);
        CHECK_FALSE(c.node_for_slot(thoonk::cluster_hash_slots));

        auto q = co_await thoonk::queue::async_create_or_open(c, name, asio::use_awaitable);
        co_await q.async_put("before", asio::use_awaitable);
        // One resharding step behind the client's back: the next put is
        // answered MOVED and follows it; the map read after it agrees.
        cl.migrate_slot(slot, to, 10, 0ms);
        const auto reads = c.cluster_stats().refreshes;
        co_await q.async_put("after", asio::use_awaitable);
        const auto st1 = c.cluster_stats();
        CHECK(st1.moved == 1);
        CHECK(st1.asked == 0);
        const bool refreshed =
            co_await wait_until([&] { return c.cluster_stats().refreshes > reads; });
        CHECK(refreshed);
        const auto moved_to = c.node_for_slot(slot);
        REQUIRE(moved_to);
        CHECK(moved_to->port == to);
        const auto got = co_await drain(q);
        CHECK(got == std::set<std::string>{"before", "after"});

        // Every node stopped: a put can go nowhere, and fails with
        // request_timeout (it was never written), bounded by it.
        for (const auto& s : cl.servers()) s->kill();
        const auto t0 = std::chrono::steady_clock::now();
        auto [pec, pid] = co_await q.async_put("never", nothrow);
        const auto took = std::chrono::steady_clock::now() - t0;
        CHECK(pec == thoonk::error::request_timeout);
        CHECK(took < 5 * cfg.request_timeout);
        const auto st2 = c.cluster_stats();
        CHECK(st2.resent_unwritten > st1.resent_unwritten);
        std::size_t connected = 0;
        for (const auto& n : st2.nodes) connected += n.connected;
        CHECK(connected == 0);
      },
      60s);
}

TEST_CASE(
    "cluster: requests on a failed primary's slots go to its promoted replica as soon as the "
    "map shows it",
    "[cluster][failover][recovery]") {
  using clock = std::chrono::steady_clock;
  redis_cluster cl;
  const auto victim = primary_ports(cl).front();
  const auto name = name_on(cl, victim, "recovering-");
  const auto slot = hash_slot(name);
  std::string victim_id;
  for (const auto& n : cl.nodes(victim))
    if (n.port == victim) victim_id = n.id;
  unsigned short heir = 0;  // the victim's replica
  for (const auto& n : cl.nodes(victim))
    if (!n.primary && n.primary_id == victim_id) heir = n.port;
  REQUIRE(heir != 0);
  cluster_client cc(cl);
  auto& [ioc, c] = cc;
  // A plain connection to the replica: the test's own view of the map.
  thoonk::config raw_cfg;
  raw_cfg.host = "127.0.0.1";
  raw_cfg.port = heir;
  thoonk::connection raw(ioc.get_executor(), raw_cfg);
  std::map<std::string, int> failures;
  cc.run(
      [&]() -> asio::awaitable<void> {
        co_await raw.async_connect(asio::use_awaitable);
        auto q = co_await thoonk::queue::async_create_or_open(c, name, asio::use_awaitable);
        // Puts one after another; the time each one was acknowledged.
        std::vector<clock::time_point> acked;
        bool stop = false, stopped = false;
        auto producer = [&]() -> asio::awaitable<void> {
          for (int i = 0; !stop; ++i) {
            auto [ec, id] = co_await q.async_put("item-" + std::to_string(i), nothrow);
            if (!ec) acked.push_back(clock::now());
            else if (ec != thoonk::error::unknown_outcome) ++failures[ec.message()];
          }
          stopped = true;
        };
        asio::co_spawn(ioc, producer(), asio::detached);
        bool warm = co_await wait_until([&] { return acked.size() >= 50; }, 20s);
        REQUIRE(warm);
        const auto killed_at = clock::now();
        cl.server_on(victim)->kill();
        // When the replica's own map names it for the slot (it knows first).
        std::optional<clock::time_point> shown;
        thoonk::request shards;
        shards.push("CLUSTER", "SHARDS");
        const thoonk::detail::cluster_node heir_node{"127.0.0.1", heir};
        while (!shown && clock::now() - killed_at < 30s) {
          auto [ec, resp] = co_await raw.async_exec(shards, nothrow);
          if (!ec) {
            boost::system::error_code pec;
            auto m = thoonk::detail::slot_map::from_shards(resp[0], heir_node, pec);
            const auto* p = m.primary_for(slot);
            if (!pec && p && p->port == heir) shown = clock::now();
          }
          if (!shown) co_await sleep_for(2ms);
        }
        REQUIRE(shown);
        const auto acked_before = static_cast<std::size_t>(
            std::count_if(acked.begin(), acked.end(), [&](auto t) { return t < *shown; }));
        bool resumed = co_await wait_until([&] { return acked.size() >= acked_before + 20; }, 30s);
        CHECK(resumed);
        stop = true;
        co_await wait_until([&] { return stopped; }, 30s);
        REQUIRE(acked.size() > acked_before);
        const auto first_after = acked[acked_before];
        using ms = std::chrono::milliseconds;
        const auto st = c.cluster_stats();
        std::cout
            << "{\"case\":\"cluster_recovery\",\"kill_to_map_ms\":"
            << std::chrono::duration_cast<ms>(*shown - killed_at).count()
            << ",\"map_to_first_put_ms\":"
            << std::chrono::duration_cast<std::chrono::microseconds>(first_after - *shown).count() /
                   1000.0
            << ",\"refreshes\":" << st.refreshes << ",\"resent_unwritten\":" << st.resent_unwritten
            << ",\"clusterdown\":" << st.clusterdown << "}\n";
        // The client follows: puts succeed on the promoted replica.
        const auto now_serving = c.node_for_slot(slot);
        REQUIRE(now_serving);
        CHECK(now_serving->port == heir);
        raw.stop();
      },
      120s);
  CHECK(failures.empty());
}
