// The router's cluster mode: the slot map, one connection per primary,
// redirects followed. The decisions are cluster.hpp's (no I/O); this file
// only sends, waits and keeps the map (docs/cluster.md).
#include "connection/router.hpp"

#include "connection/cluster.hpp"
#include "detail/use_nothrow.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <unordered_map>
#include <variant>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

class cluster_router : public slot_source, public std::enable_shared_from_this<cluster_router> {
 public:
  explicit cluster_router(connection& seed)
      : seed_(&seed),
        cfg_(seed.get_config()),
        ex_(seed.get_executor()),
        refreshed_(ex_),
        periodic_(ex_) {
    refreshed_.expires_at(asio::steady_timer::time_point::max());
  }

  asio::awaitable<std::tuple<error_code, response>> exec(const request& req, std::string_view key,
                                                         exec_options opts);
  asio::awaitable<error_code> connect();
  asio::awaitable<std::tuple<error_code, std::vector<cluster_node>>> primaries();
  asio::awaitable<std::tuple<error_code, response>> exec_on(const cluster_node& node,
                                                            const request& req);
  void stop();
  const cluster_stats& stats() const noexcept { return stats_; }

  std::optional<cluster_node> primary_for(std::uint16_t slot) const override {
    const auto* p = have_map_ ? map_.primary_for(slot) : nullptr;
    if (!p) return std::nullopt;
    return *p;
  }
  asio::awaitable<void> refresh() override {
    auto self = shared_from_this();
    co_await refresh_wait();
  }

 private:
  struct node_conn {
    cluster_node node;
    std::unique_ptr<connection> conn;
  };

  connection& connection_for(const cluster_node& node);
  asio::awaitable<error_code> connect_node(connection& conn);
  asio::awaitable<error_code> refresh_once();
  asio::awaitable<void> refresh_wait();
  void request_refresh();
  void install(slot_map m);
  std::chrono::milliseconds pause_for(unsigned attempt) const noexcept;
  static asio::awaitable<void> run_refresh(std::shared_ptr<cluster_router> self);
  static asio::awaitable<void> run_periodic(std::shared_ptr<cluster_router> self);

  connection* seed_;  // the client's; not used after stop()
  config cfg_;
  asio::any_io_executor ex_;
  slot_map map_;
  bool have_map_ = false;
  std::map<std::string, node_conn> nodes_;
  // Per slot with traffic: the order keeper, the node its current route
  // goes to, and the requests waiting for it to open (FIFO).
  struct slot_gate {
    slot_order order;
    std::optional<cluster_node> node;
    slot_waiters<std::shared_ptr<asio::steady_timer>> waiters;
  };
  std::unordered_map<std::uint16_t, slot_gate> gates_;
  void wake(slot_gate& g);
  // Releases a request's ticket whatever way exec ends.
  struct ticket_guard {
    cluster_router* self;
    slot_gate* gate;
    slot_order::ticket t;
    ~ticket_guard() {
      if (gate->order.release(t)) self->wake(*gate);
    }
  };
  std::vector<std::unique_ptr<connection>> retired_;
  bool refreshing_ = false, again_ = false, stopped_ = false, periodic_started_ = false;
  asio::steady_timer refreshed_;  // cancelled when a refresh ends: wakes its waiters
  asio::steady_timer periodic_;
  cluster_stats stats_;
};

std::chrono::milliseconds cluster_router::pause_for(unsigned attempt) const noexcept {
  auto d = cfg_.reconnect_min_delay;
  for (unsigned i = 0; i < attempt && d < cfg_.reconnect_max_delay; ++i) d *= 2;
  return std::min(d, cfg_.reconnect_max_delay);
}

connection& cluster_router::connection_for(const cluster_node& node) {
  auto name = to_string(node);
  auto it = nodes_.find(name);
  if (it != nodes_.end()) return *it->second.conn;
  auto& n = nodes_[name];
  n.node = node;
  n.conn = std::make_unique<connection>(ex_, node_config(cfg_, node));
  // A primary's connection lost: a failover may have begun; read the map.
  n.conn->on_event([weak = weak_from_this()](const connection_event& e) {
    if (e.kind != connection_event::disconnected) return;
    if (auto self = weak.lock()) self->request_refresh();
  });
  return *n.conn;
}

asio::awaitable<error_code> cluster_router::connect_node(connection& conn) {
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(ex_, cfg_.connect_timeout);
  auto r = co_await (conn.async_connect(use_nothrow) || timer.async_wait(use_nothrow));
  if (r.index() == 1) co_return error_code(error::connect_timeout);
  co_return std::get<0>(std::get<0>(r));
}

void cluster_router::wake(slot_gate& g) {
  // In order: each waiter resumes and sends before the next one runs.
  for (auto& t : g.waiters.take_all()) t->cancel();
}

void cluster_router::install(slot_map m) {
  map_ = std::move(m);
  // Slots with requests in flight on a route the new map changed: those
  // requests drain (MOVED) before newer ones go.
  for (auto& [slot, g] : gates_) {
    if (!g.node || g.order.in_flight() == 0) continue;
    const auto* p = map_.primary_for(slot);
    if (!p || !(*p == *g.node)) {
      g.order.on_route_change();
      g.node.reset();
    }
  }
  have_map_ = true;
  ++stats_.refreshes;
  stats_.primaries = map_.primaries().size();
  for (const auto& p : map_.primaries()) connection_for(p);
  // Connections to nodes that serve nothing now and are not connected
  // (a primary that died and was replaced) stop reconnecting. A connected
  // one stays: requests on it are answered (MOVED sends them on).
  for (auto it = nodes_.begin(); it != nodes_.end();) {
    bool listed = false;
    for (const auto& p : map_.primaries()) listed = listed || p == it->second.node;
    if (!listed && !it->second.conn->is_connected()) {
      it->second.conn->stop();
      retired_.push_back(std::move(it->second.conn));
      it = nodes_.erase(it);
    } else {
      ++it;
    }
  }
  if (!periodic_started_ && cfg_.cluster_refresh_interval.count() > 0) {
    periodic_started_ = true;
    asio::co_spawn(ex_, run_periodic(shared_from_this()), asio::detached);
  }
}

asio::awaitable<error_code> cluster_router::refresh_once() {
  // Whoever answers: the seed connection, then each connected primary.
  std::vector<std::pair<connection*, cluster_node>> asked;
  asked.emplace_back(seed_, cluster_node{cfg_.host, cfg_.port});
  for (auto& [name, n] : nodes_)
    if (n.conn->is_connected()) asked.emplace_back(n.conn.get(), n.node);
  for (auto& [conn, node] : asked) {
    if (stopped_) co_return error_code(error::client_stopped);
    exec_options eo;
    // The seed may be reconnecting (to another seed, after a failover):
    // wait for it a while. A node connection that is down is skipped.
    if (conn == seed_) eo.timeout = cfg_.connect_timeout * 2;
    else eo.wait_for_connection = false;
    request req;
    req.push("CLUSTER", "SHARDS");
    auto [ec, resp] = co_await conn->async_exec(req, eo, use_nothrow);
    if (stopped_) co_return error_code(error::client_stopped);
    if (ec || resp.empty()) continue;
    error_code pec;
    auto m = slot_map::from_shards(resp[0], node, pec);
    if (pec) {
      // Before Redis 7.0: CLUSTER SLOTS.
      req.clear();
      req.push("CLUSTER", "SLOTS");
      auto [ec2, resp2] = co_await conn->async_exec(req, eo, use_nothrow);
      if (stopped_) co_return error_code(error::client_stopped);
      if (ec2 || resp2.empty()) continue;
      m = slot_map::from_slots(resp2[0], node, pec);
    }
    if (pec || m.covered() == 0) continue;
    install(std::move(m));
    co_return error_code{};
  }
  ++stats_.refresh_failures;
  co_return error_code(error::cluster_topology_unavailable);
}

asio::awaitable<void> cluster_router::run_refresh(std::shared_ptr<cluster_router> self) {
  do {
    self->again_ = false;
    co_await self->refresh_once();
  } while (self->again_ && !self->stopped_);
  self->refreshing_ = false;
  self->refreshed_.cancel();
}

asio::awaitable<void> cluster_router::run_periodic(std::shared_ptr<cluster_router> self) {
  while (!self->stopped_) {
    self->periodic_.expires_after(self->cfg_.cluster_refresh_interval);
    // Expiry or cancellation (by stop): stopped_ says which.
    co_await self->periodic_.async_wait(use_nothrow);
    if (self->stopped_) break;
    self->request_refresh();
  }
}

void cluster_router::request_refresh() {
  if (stopped_) return;
  if (refreshing_) {
    again_ = true;
    return;
  }
  refreshing_ = true;
  asio::co_spawn(ex_, run_refresh(shared_from_this()), asio::detached);
}

asio::awaitable<void> cluster_router::refresh_wait() {
  request_refresh();
  if (!refreshing_) co_return;
  auto [ec] = co_await refreshed_.async_wait(use_nothrow);
  (void)ec;  // cancelled by the refresher when it ends
}

asio::awaitable<error_code> cluster_router::connect() {
  auto self = shared_from_this();
  if (!have_map_) co_await refresh_wait();
  if (stopped_) co_return error_code(error::client_stopped);
  if (!have_map_) co_return error_code(error::cluster_topology_unavailable);
  // Connect to every primary now, so the first requests find them ready.
  // A primary that does not answer is not an error of connect(): a
  // failover may be under way, and requests for its slots retry it and
  // read the map again (exec).
  std::vector<connection*> conns;
  for (const auto& p : map_.primaries()) conns.push_back(&connection_for(p));
  for (auto* c : conns) {
    if (stopped_) co_return error_code(error::client_stopped);  // stop() freed them
    auto ec = co_await connect_node(*c);
    if (ec == asio::error::operation_aborted) co_return ec;
  }
  co_return error_code{};
}

asio::awaitable<std::tuple<error_code, std::vector<cluster_node>>> cluster_router::primaries() {
  auto self = shared_from_this();
  if (!have_map_ && !stopped_) co_await refresh_wait();
  if (stopped_)
    co_return std::tuple{error_code(error::client_stopped), std::vector<cluster_node>{}};
  if (!have_map_)
    co_return std::tuple{error_code(error::cluster_topology_unavailable),
                         std::vector<cluster_node>{}};
  co_return std::tuple{error_code{}, map_.primaries()};
}

asio::awaitable<std::tuple<error_code, response>> cluster_router::exec_on(const cluster_node& node,
                                                                          const request& req) {
  auto self = shared_from_this();
  if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
  // Only a connection the router holds: making one here would leave it to
  // the next map to retire.
  auto it = nodes_.find(to_string(node));
  if (it == nodes_.end())
    co_return std::tuple{error_code(error::cluster_topology_unavailable), response{}};
  auto [ec, resp] = co_await it->second.conn->async_exec(req, exec_options{}, use_nothrow);
  co_return std::tuple{ec, std::move(resp)};
}

asio::awaitable<std::tuple<error_code, response>> cluster_router::exec(const request& req,
                                                                       std::string_view key,
                                                                       exec_options opts) {
  auto self = shared_from_this();
  if (key.empty()) {
    // Keyless commands (SCRIPT LOAD of a keyless script, PING): the seed.
    auto [ec, resp] = co_await seed_->async_exec(req, opts, use_nothrow);
    co_return std::tuple{ec, std::move(resp)};
  }
  const std::uint16_t slot = hash_slot(key);
  ticket_guard guard{this, &gates_[slot], {}};
  auto& gate = *guard.gate;
  if (gate.waiters.must_wait(gate.order)) {
    // Older requests of this slot are being sent again: go after them.
    auto t = std::make_shared<asio::steady_timer>(ex_, asio::steady_timer::time_point::max());
    gate.waiters.push(t);
    auto [wec] = co_await t->async_wait(use_nothrow);
    (void)wec;  // cancelled by wake(), or by the caller's cancellation
    const bool was_woken = gate.waiters.resumed(t);
    if (gate.waiters.should_wake(gate.order)) wake(gate);
    auto cs = co_await asio::this_coro::cancellation_state;
    if (!was_woken || cs.cancelled() != asio::cancellation_type::none)
      co_return std::tuple{error_code(asio::error::operation_aborted), response{}};
  }
  redirect_policy policy(cfg_);
  std::optional<cluster_node> ask_to;
  unsigned unreachable = 0;
  exec_options eo = opts;
  // Never queued on a node that is down: such a request comes back
  // not_connected (it was not written) and goes where the map says next.
  eo.wait_for_connection = false;
  auto give_up_or_wait = [&](unsigned n) { return n > cfg_.unavailable_retries; };
  for (;;) {
    if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
    if (!have_map_) co_await refresh_wait();
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
      co_return std::tuple{error_code(asio::error::operation_aborted), response{}};
    cluster_node node;
    if (ask_to) {
      node = *ask_to;
    } else if (const auto* p = have_map_ ? map_.primary_for(slot) : nullptr) {
      node = *p;
    } else {
      // No primary serves the slot (yet): read the map again after a pause.
      gate.order.hold(guard.t);
      if (give_up_or_wait(++unreachable))
        co_return std::tuple{error_code(error::cluster_topology_unavailable), response{}};
      asio::steady_timer t(ex_, pause_for(unreachable - 1));
      auto [tec] = co_await t.async_wait(use_nothrow);
      if (tec) co_return std::tuple{error_code(asio::error::operation_aborted), response{}};
      co_await refresh_wait();
      continue;
    }
    auto& conn = connection_for(node);
    error_code ec;
    response resp;
    bool unwritten = false;  // failed before the request could be written
    if (!conn.is_connected()) {
      ec = co_await connect_node(conn);
      if (ec == asio::error::operation_aborted) co_return std::tuple{ec, response{}};
      if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
      unwritten = static_cast<bool>(ec);
    }
    if (!ec) {
      request asking;
      if (ask_to) asking = asking_request(req);
      const request& out = ask_to ? asking : req;
      if (!ask_to) gate.node = node;
      gate.order.on_send(guard.t);
      std::tie(ec, resp) = co_await conn.async_exec(out, eo, use_nothrow);
      gate.order.on_answer(guard.t);
      unwritten = ec == error::not_connected || ec == error::client_stopped;
    }
    if (unwritten) {
      // The node is down or was dropped from the map. Read the map again
      // (a replica may have taken over) and send it where it says.
      if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
      gate.order.hold(guard.t);
      ++stats_.resent_unwritten;
      if (give_up_or_wait(++unreachable)) co_return std::tuple{ec, response{}};
      ask_to.reset();
      asio::steady_timer t(ex_, pause_for(unreachable - 1));
      auto [tec] = co_await t.async_wait(use_nothrow);
      if (tec) co_return std::tuple{error_code(asio::error::operation_aborted), response{}};
      co_await refresh_wait();
      continue;
    }
    if (ec) {
      // Written and cut off (unknown_outcome), cancelled, timed out: as on
      // one server. A lost connection may mean a failover: read the map.
      if (ec == error::unknown_outcome) request_refresh();
      co_return std::tuple{ec, response{}};
    }
    if (ask_to) drop_asking_replies(resp);  // ASKING's +OKs
    auto a = policy.decide(resp, node);
    switch (a.kind) {
      case redirect_action::done: co_return std::tuple{error_code{}, std::move(resp)};
      case redirect_action::resend:
        ++stats_.moved;
        if (a.slot == slot && gate.node && !(*gate.node == a.target)) {
          gate.order.on_route_change();
          gate.node.reset();
        }
        gate.order.hold(guard.t);
        map_.assign(a.slot, a.target);
        ask_to.reset();
        request_refresh();
        continue;
      case redirect_action::ask:
        ++stats_.asked;
        gate.order.hold(guard.t);
        ask_to = a.target;
        continue;
      case redirect_action::retry_later: {
        ++stats_.retried;
        gate.order.hold(guard.t);
        ask_to.reset();
        asio::steady_timer t(ex_, a.delay);
        auto [tec] = co_await t.async_wait(use_nothrow);
        if (tec) co_return std::tuple{error_code(asio::error::operation_aborted), response{}};
        continue;
      }
      case redirect_action::give_up:
        co_return std::tuple{error_code(error::cluster_redirect_limit), response{}};
    }
  }
}

void cluster_router::stop() {
  if (stopped_) return;
  stopped_ = true;
  periodic_.cancel();
  refreshed_.cancel();
  // Let go of the node connections, not only stop them. A request in
  // flight on one is a coroutine frame that holds this router (exec's
  // `self`), and the connection's queue holds that frame: a cycle. When
  // stop() runs off the executor (a client destroyed after its io_context
  // stopped), the connection's own stop is only posted and never runs, so
  // the frames would never be released. Without the router owning them,
  // the connections go when their run loops and queues go, and with them
  // the frames. Every coroutine here checks stopped_ after each suspension
  // before it touches a node connection again.
  auto nodes = std::move(nodes_);
  nodes_.clear();
  auto retired = std::move(retired_);
  retired_.clear();
  for (auto& [name, n] : nodes) n.conn->stop();
  for (auto& c : retired) c->stop();
  for (auto& [slot, g] : gates_) wake(g);  // they see stopped_ and complete
}

// ---- router -----------------------------------------------------------------------

router::router(connection& single)
    : single_(&single), functions_(single.get_config().use_functions) {
  if (single.get_config().cluster) cluster_ = std::make_shared<cluster_router>(single);
}

router::~router() { stop(); }

void router::stop() {
  if (cluster_) cluster_->stop();
}

asio::awaitable<std::tuple<error_code, response>> router::exec(const request& req,
                                                               std::string_view key,
                                                               exec_options opts) {
  if (cluster_) {
    auto c = cluster_;
    co_return co_await c->exec(req, key, opts);
  }
  auto [ec, resp] = co_await single_->async_exec(req, opts, use_nothrow);
  co_return std::tuple{ec, std::move(resp)};
}

asio::awaitable<error_code> router::connect() {
  if (!cluster_) co_return error_code{};
  auto c = cluster_;
  co_return co_await c->connect();
}

asio::awaitable<std::tuple<error_code, std::vector<cluster_node>>> router::primaries() {
  if (!cluster_) co_return std::tuple{error_code{}, std::vector<cluster_node>{}};
  auto c = cluster_;
  co_return co_await c->primaries();
}

asio::awaitable<std::tuple<error_code, response>> router::exec_on(const cluster_node& node,
                                                                  const request& req) {
  if (!cluster_) co_return std::tuple{error_code(error::cluster_topology_unavailable), response{}};
  auto c = cluster_;
  co_return co_await c->exec_on(node, req);
}

std::shared_ptr<slot_source> router::slots() const noexcept { return cluster_; }

cluster_stats router::stats() const noexcept {
  return cluster_ ? cluster_->stats() : cluster_stats{};
}

}  // namespace thoonk::detail
