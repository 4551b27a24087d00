// Helpers shared by the integration tests, all in thoonk::test: the
// fixture (an io_context, a client, a fresh name), raw pub/sub capture,
// waits on events (fences, polled server conditions, the clock's next
// millisecond) under deadlines, key names, feeds and queues
// made with the contract's plain commands, raw key snapshots, typed event
// records.
#pragma once

#include "support/redis_server.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_events.hpp>
#include <thoonk/job_queue.hpp>
#include <thoonk/queue.hpp>
#include <thoonk/sorted_feed.hpp>
#include <thoonk/subscriber.hpp>

#include <boost/asio.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace thoonk::test {

namespace asio = boost::asio;
using namespace std::chrono_literals;

/// Completion token giving (error_code, values...) tuples instead of throwing.
inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

using msg = std::pair<std::string, std::string>;  // channel, payload

/// Every message seen by a raw subscriber on some patterns, in order.
struct capture {
  std::vector<msg> msgs;
  std::vector<thoonk::subscription> subs;

  std::vector<msg> on(std::string_view channel) const {
    std::vector<msg> out;
    for (const auto& m : msgs)
      if (m.first == channel) out.push_back(m);
    return out;
  }
};

/// Puts `args` (an item, and a priority or put_options) on the queue or
/// job queue `q` and returns the new job's id (its put_result's).
template <class Queue, class... Args>
asio::awaitable<std::string> put_item(Queue q, Args... args) {
  auto r = co_await q.async_put(std::move(args)..., asio::use_awaitable);
  co_return std::move(r.id);
}

/// Requests `c` has accepted on its command connections: the seed
/// connection and, on a cluster, every primary's.
inline std::uint64_t requests_accepted(thoonk::client& c) {
  auto n = c.conn().stats().requests;
  for (const auto& node : c.cluster_stats().nodes) n += node.requests;
  return n;
}

/// The management channels (classic pub/sub on a cluster too).
inline bool management_channel(std::string_view channel) {
  return channel == "newfeed" || channel == "delfeed" || channel == "conffeed";
}

/// The kinds of a feed's notification channels `feed.<kind>:<feed>` (every
/// channel a pattern `feed.*:<feed>` can match).
inline const std::vector<std::string>& feed_channel_kinds() {
  static const std::vector<std::string> kinds{"publish", "edit", "retract", "position", "wake"};
  return kinds;
}

/// The channels a raw capture of `pattern` subscribes to under
/// cluster_topology(), where the notifications are shard channels and
/// sharded pub/sub has no patterns: `feed.*:<feed>` names the feed's
/// channels, `feed.<kind>:<feed as in keys>` for every kind of
/// feed_channel_kinds(); a management channel stays as it is (classic);
/// any other name without glob characters is one shard channel as given.
/// Any other pattern cannot be heard on a cluster: std::logic_error.
inline std::vector<std::string> cluster_capture_channels(const std::string& pattern) {
  static const std::string feed_prefix = "feed.*:";
  if (pattern.starts_with(feed_prefix)) {
    const auto feed = pattern.substr(feed_prefix.size());
    std::vector<std::string> out;
    const bool tagged = feed.find('{') == std::string::npos;
    for (const auto& kind : feed_channel_kinds())
      out.push_back("feed." + kind + ":" + (tagged ? "{" + feed + "}" : feed));
    return out;
  }
  if (pattern.find_first_of("*?[") != std::string::npos)
    throw std::logic_error(
        "capture_patterns: sharded pub/sub has no patterns; name the channels"
        " (or feed.*:<feed>) instead of " +
        pattern);
  return {pattern};
}

inline std::string nul_join(std::string_view a, std::string_view b) {
  std::string s(a);
  s.push_back('\0');
  s.append(b);
  return s;
}

/// The feed's name as it appears in its keys (see key()), which is also
/// how the job extension channels `job.event:` and `job.abort:` name it
/// (docs/jobs.md).
inline std::string key_name(std::string_view feed) {
  const bool tagged = cluster_topology() && feed.find('{') == std::string_view::npos;
  return (tagged ? "{" : "") + std::string(feed) + (tagged ? "}" : "");
}

/// The name of feed `feed`'s key `what`, as the library names it:
/// `feed.<what>:<feed>` on one server; under cluster_topology()
/// `feed.<what>:{<feed>}`, the name as a hash tag (docs/cluster.md), unless
/// the name holds a brace already. Every test that reads or writes the
/// library's keys names them with this.
inline std::string key(std::string_view what, std::string_view feed) {
  return "feed." + std::string(what) + ":" + key_name(feed);
}

/// The feed's name as it appears in the library's notification channels:
/// the bare name on one server (the contract's channels); under
/// cluster_topology() key_name(), the hash tag, because the channels are
/// shard channels sent from the scripts (docs/cluster.md, "Notifications").
inline std::string channel_name(std::string_view feed) {
  return cluster_topology() ? key_name(feed) : std::string(feed);
}

/// A feed's channel `feed.<what>:<feed>` (`feed.<what>:{<feed>}` under
/// cluster_topology(), see channel_name()).
inline std::string feed_channel(std::string_view what, std::string_view feed) {
  return "feed." + std::string(what) + ":" + channel_name(feed);
}

/// A job queue's finish channel `job.finish:<feed>` (tagged on a cluster,
/// see channel_name()).
inline std::string job_finish_channel(std::string_view feed) {
  return "job.finish:" + channel_name(feed);
}

/// The command a plain client sends a feed, queue or job notification with:
/// PUBLISH on one server, SPUBLISH under cluster_topology() (shard
/// channels; raw_exec sends it to the primary serving the channel's slot,
/// inside a MULTI too when its first key shares that slot).
inline const char* notify_command() { return cluster_topology() ? "SPUBLISH" : "PUBLISH"; }

/// A raw notification on a feed, queue or job channel (not a management
/// one), as a contract client sends it: notify_command() through raw_exec.
inline asio::awaitable<thoonk::resp3::value> raw_notify(thoonk::connection& c, std::string channel,
                                                        std::string payload) {
  return cmd(c, notify_command(), channel, payload);
}

/// Subscribes `cb` to a feed, queue or job channel on `sub` as a contract
/// client must: SUBSCRIBE on one server, SSUBSCRIBE under
/// cluster_topology() (shard channels).
inline asio::awaitable<thoonk::subscription> subscribe_notifications(
    thoonk::subscriber& sub, std::string channel, thoonk::subscriber::callback cb) {
  if (cluster_topology())
    co_return co_await sub.async_ssubscribe(std::move(channel), std::move(cb), asio::use_awaitable);
  co_return co_await sub.async_subscribe(std::move(channel), std::move(cb), asio::use_awaitable);
}

// ---- waiting on events ------------------------------------------------------
//
// A test waits for the event it needs, never for a fixed time: a callback
// it counts (wait_until on a flag), a server condition it polls (wait_until
// with a coroutine predicate), the arrival of a sentinel behind the
// messages it checks (fence), the system clock's next millisecond
// (next_millisecond). Each wait has a deadline well above what the event
// takes on a loaded machine, so load slows a test but does not fail it.
// wait_until itself is in run_coro.hpp.

/// A fence on subscriber `sub`, for the checks that nothing more arrived:
/// returns once every message published before the call (by any client) on
/// the channels `sub` hears over the connection that carries `feed`'s
/// notifications has been delivered to sub's callbacks. It subscribes `sub`
/// to a fresh channel on that connection, publishes a sentinel there through
/// `via` (any connection to the test server) and waits until the sentinel
/// arrives; a server delivers one connection's messages in the order they
/// were published, and the subscriber invokes its callbacks in the order
/// they arrive.
///
/// On one server `sub` has one connection, which carries every channel.
/// Under cluster_topology(), with a `feed`, the sentinel is a shard channel
/// in the feed's hash slot (`fence-<random>:{<feed>}`), on the connection of
/// the feed's notifications and job channels; without one, a classic
/// channel, for the management channels and patterns, with a sentinel
/// published on every node: a cluster relays a classic message from the
/// node that got it to each other node over one link, in order.
///
/// A feed subscription with catch-up holds back the live events that arrive
/// during a catch-up (docs/feeds.md): fence it after its catch-up has been
/// reported. Fails the test (REQUIRE) when the sentinel does not arrive
/// within 10 s.
inline asio::awaitable<void> fence(thoonk::subscriber& sub, thoonk::connection& via,
                                   std::string_view feed = {}) {
  auto seen = std::make_shared<std::size_t>(0);
  thoonk::subscriber::callback count = [seen](const thoonk::message&) { ++*seen; };
  std::size_t sentinels = 1;
  thoonk::subscription s;
  if (!cluster_topology()) {
    const auto channel = unique_name("fence");
    s = co_await sub.async_subscribe(channel, count, asio::use_awaitable);
    co_await cmd(via, "PUBLISH", channel, "fence");
  } else if (!feed.empty()) {
    const auto channel = unique_name("fence") + ":" + key_name(feed);
    s = co_await sub.async_ssubscribe(channel, count, asio::use_awaitable);
    co_await cmd(via, "SPUBLISH", channel, "fence");
  } else {
    const auto channel = unique_name("fence");
    s = co_await sub.async_subscribe(channel, count, asio::use_awaitable);
    const auto ports = cluster_ports(false);
    sentinels = ports.size();
    for (auto port : ports) {
      thoonk::request r;
      r.push("PUBLISH", channel, "fence");
      co_await exec_on_node(via, port, r);
    }
  }
  const bool arrived = co_await wait_until([&] { return *seen >= sentinels; });
  INFO("fence on " << (feed.empty() ? std::string("the classic channels") : std::string(feed))
                   << ": " << *seen << " of " << sentinels << " sentinels arrived");
  REQUIRE(arrived);
}

/// A fixed 50 ms pause before a check that nothing more arrived. It proves
/// nothing on a loaded machine and slows every caller: use fence(). Kept for
/// the files that still call it.
inline asio::awaitable<void> settle() { co_await sleep_for(50ms); }

/// Milliseconds since the Unix epoch by the system clock, as the library
/// stamps feed publishes and job claims.
inline std::int64_t ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

/// Returns once ms_now() has moved past the millisecond it read on entry,
/// polling the clock: a feed publish made after it is stamped a later
/// millisecond than any made before it (the feed's order is publish ms,
/// then id).
inline asio::awaitable<void> next_millisecond() {
  const auto start = ms_now();
  while (ms_now() <= start)
    co_await asio::post(co_await asio::this_coro::executor, asio::use_awaitable);
}

/// Subscribes a raw capture to `patterns` on `sub`, as a contract client
/// listens: on one server with PSUBSCRIBE; under cluster_topology() each
/// pattern becomes the channels cluster_capture_channels() names, a
/// management channel with PSUBSCRIBE (classic pub/sub, heard on any node)
/// and every other with SSUBSCRIBE on the primary serving its slot (`sub`,
/// a subscriber of test_config(), goes to its seed and follows the MOVED
/// reply there). One feed's channels share a slot, hence one shard
/// connection: the capture keeps their order.
/// (Variadic: g++ 12 rejects braced lists inside co_await expressions.)
template <class... Patterns>
asio::awaitable<std::shared_ptr<capture>> capture_patterns(thoonk::subscriber& sub,
                                                           Patterns... ps) {
  std::vector<std::string> patterns;
  (patterns.emplace_back(std::move(ps)), ...);
  auto cap = std::make_shared<capture>();
  auto record = [cap](const thoonk::message& m) {
    cap->msgs.emplace_back(std::string(m.channel), std::string(m.payload));
  };
  bool classic = false;
  for (const auto& p : patterns) {
    if (!cluster_topology()) {
      auto s = co_await sub.async_psubscribe(p, record, asio::use_awaitable);
      cap->subs.push_back(std::move(s));
      continue;
    }
    for (const auto& ch : cluster_capture_channels(p)) {
      if (management_channel(ch)) {
        classic = true;
        auto s = co_await sub.async_psubscribe(ch, record, asio::use_awaitable);
        cap->subs.push_back(std::move(s));
      } else {
        auto s = co_await sub.async_ssubscribe(ch, record, asio::use_awaitable);
        cap->subs.push_back(std::move(s));
      }
    }
  }
  if (classic) {
    // A cluster forwards a PUBLISH to the other nodes over its bus after
    // the publisher has its reply: messages on the management channels of
    // operations made before this capture may still reach it. Let them
    // pass, and forget them. (A shard channel's message goes only to the
    // subscribers its primary has when it runs the SPUBLISH.)
    // (The fence's sentinels go over connections of their own to each
    // node, made with `via`'s config: `via` itself never connects.)
    thoonk::connection via(sub.get_executor(), test_config());
    co_await fence(sub, via);
    via.stop();
    cap->msgs.clear();
  }
  co_return cap;
}

/// A hash (HGETALL `hash_key`) as a map, e.g. hash_of(conn, key("config", name)).
inline asio::awaitable<std::map<std::string, std::string>> hash_of(thoonk::connection& c,
                                                                   std::string hash_key) {
  auto v = co_await cmd(c, "HGETALL", hash_key);
  std::map<std::string, std::string> out;
  for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2)
    out[v.elements[i].str] = v.elements[i + 1].str;
  co_return out;
}

/// A recorded typed event (owning copies).
struct rec {
  thoonk::feed_event::kind_t kind;
  std::string id, item, where;
  bool replayed = false;
  friend bool operator==(const rec&, const rec&) = default;
};

inline rec to_rec(const thoonk::feed_event& e) {
  return rec{e.kind, std::string(e.id), std::string(e.item),
             e.kind == thoonk::feed_event::position ? e.where.to_string() : std::string{},
             e.replayed};
}

/// What a catch-up subscription delivered: every event (as rec) and, in
/// the same stream, a marker `{position "caught-up"}` where each catch-up
/// ended, with its catch_up_info in `infos`. Subscribe with
/// `sub(log.callback(), log.options(), token)`; `log` must outlive it.
struct catch_up_log {
  std::vector<rec> got;
  std::vector<thoonk::catch_up_info> infos;

  thoonk::feed_callback callback() {
    return [this](const thoonk::feed_event& e) { got.push_back(to_rec(e)); };
  }
  thoonk::feed_subscribe_options options() {
    thoonk::feed_subscribe_options opts;
    opts.catch_up = true;
    opts.on_catch_up = [this](const thoonk::catch_up_info& i) {
      infos.push_back(i);
      got.push_back(rec{thoonk::feed_event::position, "caught-up", {}, {}, false});
    };
    return opts;
  }
};

inline std::ostream& operator<<(std::ostream& os, const rec& r) {
  static const char* names[] = {"publish", "edit", "retract", "position"};
  return os << "{" << names[r.kind] << " " << r.id << " [" << r.item << "] " << r.where
            << (r.replayed ? " replayed" : "") << "}";
}

/// {{"max_length", n}}
inline thoonk::feed_config max_len(int n) { return {{"max_length", std::to_string(n)}}; }

/// Creates a feed with a unique name and returns the name.
inline asio::awaitable<std::string> make_feed(thoonk::client& c, std::string_view prefix,
                                              thoonk::feed_type type,
                                              thoonk::feed_config cfg = {}) {
  auto name = unique_name(prefix);
  co_await c.async_create_feed(name, type, std::move(cfg), asio::use_awaitable);
  co_return name;
}

// A user whose connections can be locked out, so a test can hold a
// subscriber disconnected while it changes the feed (a deterministic gap).
struct gap_user {
  std::string name = unique_name("gapuser");
  std::string pass = "pw-" + unique_name("x");

  thoonk::config config() const {
    auto cfg = test_config();
    cfg.username = name;
    cfg.password = pass;
    return cfg;
  }
  asio::awaitable<void> create(thoonk::connection& admin) const {
    co_await cmd(admin, "ACL", "SETUSER", name, "on", ">" + pass, "~*", "&*", "+@all");
  }
  /// Creates the user with exactly `rules` (ACL SETUSER ... reset on
  /// >pass rules...), for tests of what a user without a permission gets.
  template <class... Rules>
  asio::awaitable<void> create_with(thoonk::connection& admin, const Rules&... rules) const {
    co_await cmd(admin, "ACL", "SETUSER", name, "reset", "on", ">" + pass, rules...);
  }
  // Disables the user and kills its subscriber connection: it cannot come
  // back until close(). On one server that is one connection; under
  // cluster_topology() every pubsub connection of the user on every node
  // (the subscriber keeps one per primary serving a subscribed shard
  // channel, besides its own once it holds a classic channel), at least one.
  asio::awaitable<void> open_gap(thoonk::connection& admin) const {
    co_await cmd(admin, "ACL", "SETUSER", name, "off");
    std::int64_t expected = 1;
    if (cluster_topology()) {
      auto list = co_await cmd(admin, "CLIENT", "LIST", "TYPE", "pubsub");
      expected = 0;
      std::istringstream in(list.str);
      for (std::string line; std::getline(in, line);)
        expected += line.find(" user=" + name + " ") != std::string::npos;
      CHECK(expected >= 1);
    }
    auto killed = co_await cmd(admin, "CLIENT", "KILL", "USER", name, "TYPE", "pubsub");
    CHECK(killed.integer == expected);
  }
  asio::awaitable<void> close_gap(thoonk::connection& admin) const {
    co_await cmd(admin, "ACL", "SETUSER", name, "on");
  }
  asio::awaitable<void> remove(thoonk::connection& admin) const {
    co_await cmd(admin, "ACL", "DELUSER", name);
  }
};

/// The parties of a catch-up test with a deterministic gap: an admin
/// connection, a library publisher, and a client `c` of a gap_user, whose
/// subscriber the admin can lock out. Use as
/// `gap_parties p; auto& [ioc, admin, pub, user, c] = p;`.
struct gap_parties {
  asio::io_context ioc;
  thoonk::connection admin{ioc.get_executor(), test_config()};
  thoonk::client pub{ioc.get_executor(), test_config()};
  gap_user user;
  std::optional<thoonk::client> c;

  /// Connects everyone (the gap user is created first).
  asio::awaitable<void> start() {
    co_await admin.async_connect(asio::use_awaitable);
    co_await pub.async_connect(asio::use_awaitable);
    co_await user.create(admin);
    c.emplace(ioc.get_executor(), user.config());
    co_await c->async_connect(asio::use_awaitable);
  }
  /// Removes the gap user and stops everyone.
  asio::awaitable<void> finish() {
    c->stop();
    co_await user.remove(admin);
    pub.stop();
    admin.stop();
  }
};

// ---- queues and job queues ----------------------------------------------------

using boost::system::error_code;

using fields = std::vector<std::pair<std::string, std::string>>;

/// Creates a queue/job feed the way the contract does (SADD feeds + config;
/// two requests: on a cluster the `feeds` set and the config hash sit in
/// different slots).
inline asio::awaitable<void> create_feed(thoonk::connection& c, std::string name, std::string type,
                                         fields extra = {}) {
  thoonk::request listed;
  listed.push("SADD", "feeds", name);
  co_await raw_exec(c, listed);
  thoonk::request r;
  r.push("HSET", key("config", name), "type", type);
  for (auto& [f, v] : extra) r.push("HSET", key("config", name), f, v);
  co_await raw_exec(c, r);
}

/// Runs the commands `build(r)` pushes in one MULTI/EXEC on `c`, as a
/// plain client of the contract would; returns the replies (the last is
/// EXEC's).
template <class Build>
asio::awaitable<thoonk::response> plain_transaction(thoonk::connection& c, Build build) {
  thoonk::request r;
  r.push("MULTI");
  build(r);
  r.push("EXEC");
  co_return co_await raw_exec(c, r);
}

/// Every raw key of a job queue, rendered deterministically.
inline asio::awaitable<std::string> snapshot(thoonk::connection& c, std::string name) {
  thoonk::request r;
  r.push("LRANGE", key("ids", name), 0, -1);
  r.push("HGETALL", key("items", name));
  r.push("ZRANGE", key("claimed", name), 0, -1, "WITHSCORES");
  r.push("ZRANGE", key("published", name), 0, -1, "WITHSCORES");
  r.push("HGETALL", key("cancelled", name));
  r.push("SMEMBERS", key("stalled", name));
  r.push("GET", key("publishes", name));
  r.push("GET", key("finishes", name));
  r.push("HGETALL", key("attempts", name));
  r.push("SMEMBERS", key("unaccounted", name));
  auto resp = co_await raw_exec(c, r);
  std::string out;
  const char* names[] = {"ids",     "items",     "claimed",  "published", "cancelled",
                         "stalled", "publishes", "finishes", "attempts",  "unaccounted"};
  for (std::size_t i = 0; i < resp.size(); ++i) {
    auto& v = resp[i];
    // Hashes and sets: order-independent rendering.
    if (v.type == thoonk::resp3::type::map || v.type == thoonk::resp3::type::set ||
        (v.type == thoonk::resp3::type::array &&
         (i == 1 || i == 4 || i == 5 || i == 8 || i == 9))) {
      std::vector<std::string> parts;
      auto& e = v.elements;
      bool pairs = i == 1 || i == 4 || i == 8;
      for (std::size_t j = 0; j < e.size(); j += pairs ? 2 : 1) {
        // feed.attempts keeps one field, "\0encoding", for its encoding
        // (docs/jobs.md); it is no job's.
        if (i == 8 && !e[j].str.empty() && e[j].str[0] == '\0') continue;
        parts.push_back(pairs && j + 1 < e.size() ? e[j].str + "=" + e[j + 1].str : e[j].str);
      }
      std::sort(parts.begin(), parts.end());
      out += std::string(names[i]) + ":{";
      for (auto& p : parts) out += p + ",";
      out += "}\n";
    } else {
      out += std::string(names[i]) + ":" + thoonk::resp3::debug_string(v) + "\n";
    }
  }
  co_return out;
}

/// A job's result awaited in the background (result_in_background).
struct background_result {
  std::string value;
  bool done = false;
};

inline asio::awaitable<void> await_result_into(thoonk::job_queue q, std::string id,
                                               std::shared_ptr<background_result> out) {
  out->value = co_await q.async_get_result(std::move(id), 10s, asio::use_awaitable);
  out->done = true;
}

/// Starts q.get_result(id, 10 s) in its own coroutine; the result lands in
/// the returned record.
inline std::shared_ptr<background_result> result_in_background(asio::io_context& ioc,
                                                               thoonk::job_queue q,
                                                               std::string id) {
  auto out = std::make_shared<background_result>();
  asio::co_spawn(ioc, await_result_into(std::move(q), std::move(id), out), asio::detached);
  return out;
}

inline asio::awaitable<std::int64_t> llen(thoonk::connection& c, std::string k) {
  auto v = co_await cmd(c, "LLEN", k);
  co_return v.integer;
}

/// Connects each of `services` (clients, connections, subscribers), in order.
template <class Service, class... Rest>
asio::awaitable<void> connect_all(Service& service, Rest&... rest) {
  co_await service.async_connect(asio::use_awaitable);
  if constexpr (sizeof...(rest) > 0) co_await connect_all(rest...);
}

/// expect_each_fails, from the operation at `position` (counted from 1).
template <class Op, class... Rest>
asio::awaitable<void> expect_each_fails_from(std::size_t position,
                                             boost::system::error_code expected, Op op,
                                             Rest... rest) {
  auto result = co_await op();
  INFO("operation " << position);
  CHECK(std::get<0>(result) == expected);
  if constexpr (sizeof...(rest) > 0)
    co_await expect_each_fails_from(position + 1, expected, std::move(rest)...);
}

/// Runs each `op()` in order (a callable returning the awaitable of an
/// operation started with `nothrow`) and checks that it fails with
/// `expected`; a failed check names the operation by its position, from 1.
template <class... Ops>
asio::awaitable<void> expect_each_fails(boost::system::error_code expected, Ops... ops) {
  co_await expect_each_fails_from(1, expected, std::move(ops)...);
}

/// A connected client on the shared test server with a unique client name.
/// test_config() with a client name (CLIENT LIST / CLIENT KILL can find it).
inline thoonk::config named_config(std::string client_name = "thoonk-test") {
  auto cfg = test_config();
  cfg.client_name = std::move(client_name);
  return cfg;
}

/// Connects `service` (a client or a connection), runs `body` under the
/// test deadline, then stops `service`.
template <class Service>
void run_connected(asio::io_context& ioc, Service& service, coro_fn body,
                   std::chrono::milliseconds deadline = 20s) {
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await service.async_connect(asio::use_awaitable);
        co_await body();
        service.stop();
      },
      deadline);
}

/// The name of a dead-letter queue of job queue `queue`: `name` on one
/// server; under cluster_topology() `{<queue>}.<name>`, the queue's name as
/// its hash tag, so that its keys share the queue's slot (a dead-letter
/// queue of another slot fails with error::cluster_cross_slot there,
/// docs/cluster.md "Dead-letter queues"). A client opening it needs
/// config::allow_hash_tag_names on a cluster (dead_letter_config()).
inline std::string dead_letter_name(std::string_view queue, std::string name) {
  if (!cluster_topology()) return name;
  return "{" + std::string(queue) + "}." + name;
}

/// named_config() for a client that opens dead-letter queues named by
/// dead_letter_name(): under cluster_topology() with
/// config::allow_hash_tag_names (their names hold the queue's hash tag);
/// unchanged on one server.
inline thoonk::config dead_letter_config() {
  auto cfg = named_config();
  if (cluster_topology()) cfg.allow_hash_tag_names = true;
  return cfg;
}

/// Maintenance without the stats feed.
inline thoonk::maintenance_options no_stats() {
  thoonk::maintenance_options o;
  o.publish_stats = false;
  return o;
}

/// The fixture of the integration tests: an io_context, a client on the
/// shared test server, a raw subscriber for capturing messages (neither
/// connects before its first use), and a fresh feed or queue name starting
/// with `prefix`.
struct fixture {
  explicit fixture(const char* prefix = "t", thoonk::config cfg = named_config())
      : c(ioc.get_executor(), std::move(cfg)), name(unique_name(prefix)) {}
  asio::io_context ioc;
  thoonk::client c;
  thoonk::subscriber raw{ioc.get_executor(), test_config()};
  std::string name;

  /// Connects the client, runs `body` under the test deadline, then stops
  /// the client.
  void run_connected(coro_fn body, std::chrono::milliseconds deadline = 20s) {
    test::run_connected(ioc, c, std::move(body), deadline);
  }
};

/// Runs `body(name)` (a coroutine) on `fx` under run_coro's deadline, for
/// the feed tests that need exactly this frame: connects the client, creates
/// a feed of `type` with config `cfg` and a fresh name starting with
/// `prefix`; after the body, deletes the feed and stops the client and the
/// raw subscriber.
template <class Body>
void run_with_feed(fixture& fx, std::string_view prefix, thoonk::feed_type type,
                   thoonk::feed_config cfg, Body body,
                   std::chrono::milliseconds deadline = std::chrono::seconds(20)) {
  run_coro(
      fx.ioc,
      [&]() -> asio::awaitable<void> {
        co_await fx.c.async_connect(asio::use_awaitable);
        const auto name = co_await make_feed(fx.c, prefix, type, std::move(cfg));
        co_await body(name);
        co_await fx.c.async_delete_feed(name, asio::use_awaitable);
        fx.raw.stop();
        fx.c.stop();
      },
      deadline);
}

/// Connects f's client, creates f.name as a job queue with the contract's
/// plain commands, and returns an unchecked handle on it.
inline asio::awaitable<thoonk::job_queue> contract_job_queue(fixture& f,
                                                             thoonk::job_queue_options o = {}) {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "job");
  co_return thoonk::job_queue(f.c, f.name, std::move(o));
}

/// contract_job_queue with extra config fields (e.g. claim_timeout_ms).
inline asio::awaitable<thoonk::job_queue> contract_job_queue(fixture& f, fields cfg,
                                                             thoonk::job_queue_options o = {}) {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "job", std::move(cfg));
  co_return thoonk::job_queue(f.c, f.name, std::move(o));
}

/// Runs `body(q)` (a coroutine) on f under run_coro's deadline, q being
/// contract_job_queue(f): the frame most job tests share.
template <class Body>
void run_with_job_queue(fixture& f, Body body, std::chrono::milliseconds deadline = 20s) {
  run_coro(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        auto q = co_await contract_job_queue(f);
        co_await body(q);
      },
      deadline);
}

/// A job put and then claimed: its id and the claim.
struct put_claim {
  std::string id;
  thoonk::claimed_job job;
};

/// Puts `item` on `q` and claims it (q must hold no other waiting job):
/// the claimed job is the one just put.
inline asio::awaitable<put_claim> put_and_claim(thoonk::job_queue& q, std::string item) {
  auto id = (co_await q.async_put(std::move(item), asio::use_awaitable)).id;
  auto job = co_await q.async_claim(1s, asio::use_awaitable);
  CHECK(job.id == id);
  co_return put_claim{std::move(id), std::move(job)};
}

/// Checks that `id` is the one stalled job of f's queue `q` (stalled, or a
/// dead letter: in feed.stalled:[f], where a contract client looks for it)
/// and that no job is claimed, waiting or scheduled.
inline asio::awaitable<void> expect_only_stalled(fixture& f, thoonk::job_queue& q, std::string id) {
  auto counts = co_await q.async_counts(asio::use_awaitable);
  CHECK(counts.stalled == 1);
  CHECK(counts.claimed == 0);
  CHECK(counts.waiting == 0);
  CHECK(counts.scheduled == 0);
  auto member = co_await cmd(f.c.conn(), "SISMEMBER", key("stalled", f.name), id);
  CHECK(member.integer == 1);
}

/// Waits until the claim of job `id` on job queue `queue` has lapsed as
/// maintenance judges it (maintenance/expire.lua): its claim time, the
/// job's score in feed.claimed (ms, moved by each heartbeat), lies more
/// than `timeout` (the queue's claim_timeout_ms) before ms_now(). Reads the
/// claim time once, then polls the clock. Returns false when the job is not
/// claimed, or when the claim has not lapsed within `timeout` + 10 s.
inline asio::awaitable<bool> claim_lapsed(thoonk::connection& c, std::string queue, std::string id,
                                          std::chrono::milliseconds timeout) {
  auto score = co_await cmd(c, "ZSCORE", key("claimed", queue), id);
  if (score.type == thoonk::resp3::type::null) co_return false;
  const double at =
      score.type == thoonk::resp3::type::double_number ? score.dbl : std::stod(score.str);
  const auto since = static_cast<std::int64_t>(at);
  co_return co_await wait_until([&] { return ms_now() > since + timeout.count(); }, timeout + 10s);
}

/// How many times `command` (lower case, e.g. "rpop") has run on the node
/// serving queue or job queue `queue` (its `calls` in INFO commandstats,
/// calls from scripts included): the claim script pops once per call
/// (RPOP), a result wait reads the result once per look (LINDEX). Counts
/// the whole server's calls: for a test alone on its server or cluster.
inline asio::awaitable<std::int64_t> command_calls_on(thoonk::connection& c, std::string queue,
                                                      std::string command) {
  thoonk::request r;
  r.push("INFO", "commandstats");
  std::string stats;
  if (cluster_topology()) {
    auto resp = co_await exec_on_node(c, owner_port(key("ids", queue)), r);
    stats = resp.at(0).str;
  } else {
    auto v = co_await exec_one(c, std::move(r));
    stats = v.str;
  }
  auto pos = stats.find("cmdstat_" + command + ":calls=");
  if (pos == std::string::npos) co_return 0;
  pos = stats.find('=', pos) + 1;
  co_return std::stoll(stats.substr(pos, stats.find(',', pos) - pos));
}

/// Waits until `command` has run on `queue`'s node more than `before` times
/// (command_calls_on): a claimer (RPOP) or a result wait (LINDEX) started
/// since `before` was read has made its first look and is waiting.
inline asio::awaitable<bool> ran_since(thoonk::connection& c, std::string queue,
                                       std::string command, std::int64_t before) {
  co_return co_await wait_until([&]() -> asio::awaitable<bool> {
    co_return co_await command_calls_on(c, queue, command) > before;
  });
}

/// Waits until the connection whose CLIENT ID is `id` has a command the
/// server holds (flags=b in CLIENT LIST: a blocking command, or a write
/// held by CLIENT PAUSE WRITE), asking over `admin`; one server (a
/// cluster's node answers for its own connections only). Returns false when
/// it does not happen within 10 s.
inline asio::awaitable<bool> held_by_server(thoonk::connection& admin, std::int64_t id) {
  co_return co_await wait_until([&]() -> asio::awaitable<bool> {
    auto v = co_await cmd(admin, "CLIENT", "LIST", "ID", std::to_string(id));
    const auto at = v.str.find(" flags=");
    if (at == std::string::npos) co_return false;
    const auto from = at + 7;
    co_return v.str.substr(from, v.str.find(' ', from) - from).find('b') != std::string::npos;
  });
}

/// contract_job_queue for a queue.
inline asio::awaitable<thoonk::queue> contract_queue(fixture& f, thoonk::queue_options o = {}) {
  co_await f.c.async_connect(asio::use_awaitable);
  co_await create_feed(f.c.conn(), f.name, "queue");
  co_return thoonk::queue(f.c, f.name, o);
}

inline std::int64_t ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t)
      .count();
}

}  // namespace thoonk::test

#define THOONK_TEST_CAT2_(a, b) a##b
#define THOONK_TEST_CAT_(a, b) THOONK_TEST_CAT2_(a, b)
#define THOONK_TEST_EXPAND_(...) __VA_ARGS__
// A name for the body of the test case on this line. THOONK_UNITY_ID is a
// name of the file that CMake's unity build (THOONK_TEST_UNITY_BATCH)
// defines while it includes the file; outside one it stays a plain token.
#define THOONK_TEST_FN_ \
  THOONK_TEST_CAT_(THOONK_TEST_CAT_(thoonk_coro_test_, THOONK_UNITY_ID), __LINE__)
// The frame of the coroutine test-case macros: declares the body
// THOONK_TEST_FN_ with the parameter list `params`, defines TEST_CASE(...)
// making `fixture fx fxargs` (`fxargs` the parenthesised arguments of the
// fixture's constructor, e.g. `(prefix)`) and running `run` (a
// parenthesised statement that calls the body), and opens the body's
// definition.
#define THOONK_CORO_TEST_CASE_(params, fx, fxargs, run, ...)    \
  static ::boost::asio::awaitable<void> THOONK_TEST_FN_ params; \
  TEST_CASE(__VA_ARGS__) {                                      \
    ::thoonk::test::fixture fx fxargs;                          \
    THOONK_TEST_EXPAND_ run                                     \
  }                                                             \
  static ::boost::asio::awaitable<void> THOONK_TEST_FN_ params

/// A test case whose body is a coroutine with a fresh `fixture f(prefix)`
/// in scope, run under run_coro's deadline:
///
///     FIXTURE_TEST_CASE("jobs", "claim returns the job", "[job][claim]") {
///       co_await f.c.async_connect(asio::use_awaitable);
///       ...
///     }
///
/// The body is a coroutine function taking `fixture& f`; SECTIONs work in it
/// as in any test case.
#define FIXTURE_TEST_CASE(prefix, ...) \
  FIXTURE_TEST_CASE_WITHIN(::std::chrono::seconds(20), prefix, __VA_ARGS__)

/// FIXTURE_TEST_CASE under a deadline of its own (a std::chrono duration),
/// for the slow tests:
///
///     FIXTURE_TEST_CASE_WITHIN(60s, "runkill", "run: ...", "[job][run][process]") {
///       ...
///     }
#define FIXTURE_TEST_CASE_WITHIN(deadline, prefix, ...)                                    \
  THOONK_CORO_TEST_CASE_(                                                                  \
      ([[maybe_unused]] ::thoonk::test::fixture & f), f, (prefix),                         \
      (::thoonk::test::run_coro(                                                           \
           f.ioc, [&f]() -> ::boost::asio::awaitable<void> { return THOONK_TEST_FN_(f); }, \
           deadline);),                                                                    \
      __VA_ARGS__)

/// FIXTURE_TEST_CASE whose fixture's client has config `cfg` (an
/// expression, e.g. dead_letter_config()):
///
///     FIXTURE_TEST_CASE_WITH_CONFIG(dead_letter_config(), "retry", "...", "[job]") {
///       ...
///     }
#define FIXTURE_TEST_CASE_WITH_CONFIG(cfg, prefix, ...)                                    \
  THOONK_CORO_TEST_CASE_(                                                                  \
      ([[maybe_unused]] ::thoonk::test::fixture & f), f, (prefix, cfg),                    \
      (::thoonk::test::run_coro(                                                           \
           f.ioc, [&f]() -> ::boost::asio::awaitable<void> { return THOONK_TEST_FN_(f); }, \
           ::std::chrono::seconds(20));),                                                  \
      __VA_ARGS__)

/// FIXTURE_TEST_CASE with a second client in scope: `other`, on f's
/// io_context with the client name "thoonk-<prefix>-other", not connected
/// before the body and stopped after it, for the tests of what one client
/// sees of another's calls:
///
///     TWO_CLIENT_TEST_CASE("abort", "abort: from another client", "[job][abort]") {
///       auto worker = co_await engine_queue(f);
///       auto boss = co_await open_on(other, f.name);
///       ...
///     }
#define TWO_CLIENT_TEST_CASE(prefix, ...)                                                    \
  THOONK_CORO_TEST_CASE_(                                                                    \
      ([[maybe_unused]] ::thoonk::test::fixture & f, ::thoonk::client & other), f, (prefix), \
      (::thoonk::client other(                                                               \
           f.ioc.get_executor(),                                                             \
           ::thoonk::test::named_config(std::string("thoonk-") + prefix + "-other"));        \
       ::thoonk::test::run_coro(f.ioc,                                                       \
                                [&]() -> ::boost::asio::awaitable<void> {                    \
                                  co_await THOONK_TEST_FN_(f, other);                        \
                                  other.stop();                                              \
                                });),                                                        \
      __VA_ARGS__)

/// A test case whose body is a coroutine on a fresh fixture `fx(prefix)`
/// whose client `c` is connected before the body; after it, the client and
/// the raw subscriber are stopped:
///
///     CLIENT_TEST_CASE("handle", "feed handles: open", "[feed][open]") {
///       auto f = co_await thoonk::feed::async_create_or_open(c, fx.name, asio::use_awaitable);
///       ...
///     }
#define CLIENT_TEST_CASE(prefix, ...)                                                             \
  THOONK_CORO_TEST_CASE_(                                                                         \
      ([[maybe_unused]] ::thoonk::test::fixture & fx, [[maybe_unused]] ::thoonk::client & c), fx, \
      (prefix), (fx.run_connected([&fx]() -> ::boost::asio::awaitable<void> {                     \
        co_await THOONK_TEST_FN_(fx, fx.c);                                                       \
        fx.raw.stop();                                                                            \
      });),                                                                                       \
      __VA_ARGS__)

/// A test case whose body is a coroutine run by run_with_feed on a fresh
/// fixture; in scope are `fx` (the fixture), `c` (its client, connected)
/// and `name` (a new feed of `type` with config `cfg`, its name starting
/// with `prefix`, deleted after the body):
///
///     FEED_TEST_CASE("edit", thoonk::feed_type::feed, max_len(3),
///                    "feed: edit moves the item", "[feed][publish]") {
///       thoonk::feed f(c, name);
///       ...
///     }
#define FEED_TEST_CASE(prefix, type, cfg, ...)                                                    \
  THOONK_CORO_TEST_CASE_(([[maybe_unused]] ::thoonk::test::fixture & fx,                          \
                          [[maybe_unused]] ::thoonk::client & c, const std::string& name),        \
                         fx, (prefix),                                                            \
                         (::thoonk::test::run_with_feed(fx, prefix, type, cfg,                    \
                                                        [&fx](const std::string& name) {          \
                                                          return THOONK_TEST_FN_(fx, fx.c, name); \
                                                        });),                                     \
                         __VA_ARGS__)

/// A test case whose body is a coroutine run by run_with_job_queue on a
/// fresh fixture `f(prefix)`; in scope are `f` (its client connected) and
/// `q`, f.name made a job queue with the contract's plain commands
/// (contract_job_queue):
///
///     JOB_QUEUE_TEST_CASE("jobs-flow", "job: put then claim", "[job][put][claim]") {
///       auto [id, j] = co_await put_and_claim(q, "x");
///       ...
///     }
#define JOB_QUEUE_TEST_CASE(prefix, ...)                                                    \
  THOONK_CORO_TEST_CASE_(                                                                   \
      ([[maybe_unused]] ::thoonk::test::fixture & f, ::thoonk::job_queue & q), f, (prefix), \
      (::thoonk::test::run_with_job_queue(                                                  \
           f, [&f](::thoonk::job_queue& q) { return THOONK_TEST_FN_(f, q); });),            \
      __VA_ARGS__)

namespace Catch {
template <>
struct StringMaker<thoonk::test::rec> {
  static std::string convert(const thoonk::test::rec& r) {
    std::ostringstream os;
    thoonk::test::operator<<(os, r);
    return os.str();
  }
};
}  // namespace Catch
