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

namespace {
// How a wait for the slot map ended. Outside the class, in an unnamed
// namespace: GCC gives a member enum default visibility even under
// -fvisibility=hidden, and libthoonk.so would export Asio's awaitable
// instantiations for it (docs/packaging.md, "Exported symbols").
enum class wait_end { done, time_up, aborted };
}  // namespace

class cluster_router : public slot_source, public std::enable_shared_from_this<cluster_router> {
 public:
  using clock = std::chrono::steady_clock;

  explicit cluster_router(connection& seed)
      : seed_(&seed),
        cfg_(seed.get_config()),
        ex_(seed.get_executor()),
        refreshed_(ex_),
        map_changed_(ex_),
        periodic_(ex_),
        poll_(ex_) {
    refreshed_.expires_at(asio::steady_timer::time_point::max());
    map_changed_.expires_at(asio::steady_timer::time_point::max());
  }

  asio::awaitable<std::tuple<error_code, response>> exec(const request& req, std::string_view key,
                                                         exec_options opts);
  asio::awaitable<error_code> connect();
  asio::awaitable<std::tuple<error_code, std::vector<cluster_node>>> primaries();
  asio::awaitable<std::tuple<error_code, response>> exec_on(const cluster_node& node,
                                                            const request& req);
  void stop();
  cluster_stats stats() const;

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
  asio::awaitable<bool> refresh_until(clock::time_point until);
  asio::awaitable<void> refresh_join();
  asio::awaitable<wait_end> wait_route(const route_wait* w, clock::time_point until);
  void request_refresh();
  void install(slot_map m);
  void map_changed();
  void retire_counts(const connection& c) noexcept;
  void start_poll();
  std::chrono::milliseconds pause_for(unsigned attempt) const noexcept;
  static asio::awaitable<void> run_refresh(std::shared_ptr<cluster_router> self);
  static asio::awaitable<void> run_periodic(std::shared_ptr<cluster_router> self);
  static asio::awaitable<void> run_poll(std::shared_ptr<cluster_router> self);

  connection* seed_;  // the client's; not used after stop()
  config cfg_;
  asio::any_io_executor ex_;
  slot_map map_;
  bool have_map_ = false;
  // Counts the changes of the map's routes (a new map that routes some slot
  // otherwise, a MOVED): a CLUSTERDOWN wait ends at the next one.
  std::uint64_t map_version_ = 0;
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
  // Requests waiting for the map to change (wait_route): while there are
  // any, the map is read every map_poll_interval.
  std::size_t stuck_ = 0;
  bool polling_ = false;
  asio::steady_timer refreshed_;    // cancelled when a refresh ends: wakes its waiters
  asio::steady_timer map_changed_;  // cancelled when the routes change: wakes wait_route
  asio::steady_timer periodic_;
  asio::steady_timer poll_;
  cluster_stats stats_;  // the counters; the node entries are made by stats()
};

std::chrono::milliseconds cluster_router::pause_for(unsigned attempt) const noexcept {
  auto d = cfg_.reconnect_min_delay;
  for (unsigned i = 0; i < attempt && d < cfg_.reconnect_max_delay; ++i) d *= 2;
  return std::min(d, cfg_.reconnect_max_delay);
}

cluster_stats cluster_router::stats() const {
  cluster_stats s = stats_;  // node_connects and node_reconnects: closed ones so far
  for (const auto& [name, n] : nodes_) {
    const auto cs = n.conn->stats();
    s.node_connects += cs.connects;
    s.node_reconnects += cs.reconnects;
    s.nodes.push_back({n.node.host, n.node.port, n.conn->is_connected(), cs.connects, cs.reconnects,
                       cs.requests, cs.unknown_outcomes});
  }
  return s;
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

void cluster_router::map_changed() {
  ++map_version_;
  map_changed_.cancel();
}

void cluster_router::retire_counts(const connection& c) noexcept {
  const auto cs = c.stats();
  stats_.node_connects += cs.connects;
  stats_.node_reconnects += cs.reconnects;
}

void cluster_router::install(slot_map m) {
  const bool changed = !have_map_ || !map_.same_routes(m);
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
      retire_counts(*it->second.conn);
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
  // Requests waiting for the map (a failover's promotion) go now.
  if (changed) map_changed();
}

asio::awaitable<error_code> cluster_router::refresh_once() {
  // Whoever answers: the connected ones first (the seed connection, then
  // each connected primary); a seed that is reconnecting (to another seed,
  // after a failover) last, as it may take a while.
  std::vector<std::pair<connection*, cluster_node>> asked;
  const bool seed_up = seed_->is_connected();
  if (seed_up) asked.emplace_back(seed_, cluster_node{cfg_.host, cfg_.port});
  for (auto& [name, n] : nodes_)
    if (n.conn->is_connected()) asked.emplace_back(n.conn.get(), n.node);
  if (!seed_up) asked.emplace_back(seed_, cluster_node{cfg_.host, cfg_.port});
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

void cluster_router::start_poll() {
  if (polling_ || stopped_) return;
  polling_ = true;
  asio::co_spawn(ex_, run_poll(shared_from_this()), asio::detached);
}

asio::awaitable<void> cluster_router::run_poll(std::shared_ptr<cluster_router> self) {
  // While requests wait for the map to change, read it every
  // map_poll_interval: the wait ends as soon as it shows the change (a
  // replica promoted), not when the request's own pause runs out.
  while (!self->stopped_ && self->stuck_ > 0) {
    self->poll_.expires_after(map_poll_interval(self->cfg_));
    co_await self->poll_.async_wait(use_nothrow);
    if (self->stopped_ || self->stuck_ == 0) break;
    co_await self->refresh_join();
  }
  self->polling_ = false;
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

asio::awaitable<bool> cluster_router::refresh_until(clock::time_point until) {
  request_refresh();
  if (!refreshing_) co_return true;
  if (until == clock::time_point::max()) {
    auto [ec] = co_await refreshed_.async_wait(use_nothrow);
    (void)ec;  // cancelled by the refresher when it ends
    co_return true;
  }
  using namespace asio::experimental::awaitable_operators;
  asio::steady_timer timer(ex_, until);
  auto r = co_await (refreshed_.async_wait(use_nothrow) || timer.async_wait(use_nothrow));
  co_return r.index() == 0;
}

asio::awaitable<void> cluster_router::refresh_join() {
  if (!refreshing_) request_refresh();
  if (!refreshing_) co_return;
  auto [ec] = co_await refreshed_.async_wait(use_nothrow);
  (void)ec;  // cancelled by the refresher when it ends
}

asio::awaitable<wait_end> cluster_router::wait_route(const route_wait* w, clock::time_point until) {
  using namespace asio::experimental::awaitable_operators;
  // Counted while it waits, so that the map is read again and again.
  struct stuck_guard {
    std::size_t* n;
    ~stuck_guard() {
      if (n) --*n;
    }
  } guard{w ? &stuck_ : nullptr};
  if (w) {
    ++stuck_;
    start_poll();
  }
  asio::steady_timer timer(ex_, until);
  for (;;) {
    if (stopped_) co_return wait_end::aborted;
    if (w && w->satisfied(have_map_ ? &map_ : nullptr, map_version_)) co_return wait_end::done;
    if (clock::now() >= until) co_return wait_end::time_up;
    // A new map (map_changed_ cancelled), or the time up.
    co_await (map_changed_.async_wait(use_nothrow) || timer.async_wait(use_nothrow));
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none) co_return wait_end::aborted;
  }
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
  using namespace asio::experimental::awaitable_operators;
  auto self = shared_from_this();
  if (key.empty()) {
    // Keyless commands (SCRIPT LOAD of a keyless script, PING): the seed.
    auto [ec, resp] = co_await seed_->async_exec(req, opts, use_nothrow);
    co_return std::tuple{ec, std::move(resp)};
  }
  // One deadline for the whole request: every attempt, pause and wait for
  // a map counts against it (config::request_timeout's promise).
  const request_deadline dl(clock::now(),
                            opts.timeout.count() > 0 ? opts.timeout : cfg_.request_timeout);
  auto timed_out = [] { return std::tuple{error_code(error::request_timeout), response{}}; };
  auto aborted = [this] {
    return std::tuple{
        stopped_ ? error_code(error::client_stopped) : error_code(asio::error::operation_aborted),
        response{}};
  };
  const std::uint16_t slot = hash_slot(key);
  ticket_guard guard{this, &gates_[slot], {}};
  auto& gate = *guard.gate;
  if (gate.waiters.must_wait(gate.order)) {
    // Older requests of this slot are being sent again: go after them.
    auto t = std::make_shared<asio::steady_timer>(ex_, dl.at());
    gate.waiters.push(t);
    auto [wec] = co_await t->async_wait(use_nothrow);
    const bool was_woken = gate.waiters.resumed(t);
    if (gate.waiters.should_wake(gate.order)) wake(gate);
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
      co_return std::tuple{error_code(asio::error::operation_aborted), response{}};
    // Not woken: the timer ran out (the deadline) or was cancelled.
    if (!was_woken) co_return wec ? aborted() : timed_out();
  }
  redirect_policy policy(cfg_);
  std::optional<cluster_node> ask_to;
  unsigned unreachable = 0;
  exec_options eo = opts;
  // Never queued on a node that is down: such a request comes back
  // not_connected (it was not written) and goes where the map says next.
  eo.wait_for_connection = false;
  auto give_up_or_wait = [&](unsigned n) { return n > cfg_.unavailable_retries; };
  // After a wait for the map: go on, or how the request ends.
  auto after_wait = [&](wait_end end) -> std::optional<std::tuple<error_code, response>> {
    if (end == wait_end::aborted) return aborted();
    if (end == wait_end::time_up && dl.passed(clock::now())) return timed_out();
    return std::nullopt;
  };
  for (;;) {
    if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
    if (!have_map_ && !co_await refresh_until(dl.at())) {
      if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
      co_return dl.passed(clock::now()) ? timed_out() : aborted();
    }
    auto cs = co_await asio::this_coro::cancellation_state;
    if (cs.cancelled() != asio::cancellation_type::none)
      co_return std::tuple{error_code(asio::error::operation_aborted), response{}};
    if (dl.passed(clock::now())) co_return timed_out();
    cluster_node node;
    if (ask_to) {
      node = *ask_to;
    } else if (const auto* p = have_map_ ? map_.primary_for(slot) : nullptr) {
      node = *p;
    } else {
      // No primary serves the slot (yet): wait for a map where one does,
      // at most a pause.
      gate.order.hold(guard.t);
      if (give_up_or_wait(++unreachable))
        co_return std::tuple{error_code(error::cluster_topology_unavailable), response{}};
      request_refresh();
      const auto w = route_wait::away_from(slot, std::nullopt);
      auto end = co_await wait_route(&w, dl.cap(clock::now() + pause_for(unreachable - 1)));
      if (auto out = after_wait(end)) co_return std::move(*out);
      continue;
    }
    auto& conn = connection_for(node);
    error_code ec;
    response resp;
    bool unwritten = false;  // failed before the request could be written
    if (!conn.is_connected()) {
      // Connect, unless the map sends the slot elsewhere meanwhile (a node
      // that does not answer, replaced by its promoted replica).
      const auto until = dl.cap(clock::now() + cfg_.connect_timeout);
      const auto w = route_wait::away_from(slot, node);
      auto r =
          co_await (conn.async_connect(use_nothrow) || wait_route(ask_to ? nullptr : &w, until));
      if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
      if (r.index() == 0) {
        ec = std::get<0>(std::get<0>(r));
      } else {
        const auto end = std::get<1>(r);
        if (end == wait_end::done) continue;  // where the new map says
        if (end == wait_end::aborted) co_return aborted();
        if (dl.passed(clock::now())) co_return timed_out();
        ec = error::connect_timeout;
      }
      if (ec == asio::error::operation_aborted) co_return std::tuple{ec, response{}};
      unwritten = static_cast<bool>(ec);
    }
    if (!ec) {
      request asking;
      if (ask_to) asking = asking_request(req);
      const request& out = ask_to ? asking : req;
      if (!ask_to) gate.node = node;
      if (dl.bounded()) eo.timeout = dl.left(clock::now());
      gate.order.on_send(guard.t);
      std::tie(ec, resp) = co_await conn.async_exec(out, eo, use_nothrow);
      gate.order.on_answer(guard.t);
      unwritten = ec == error::not_connected || ec == error::client_stopped;
    }
    if (unwritten) {
      // The node is down or was dropped from the map. Wait for a map that
      // sends the slot elsewhere (a replica taking over), at most a pause,
      // and send it where the map says then.
      if (stopped_) co_return std::tuple{error_code(error::client_stopped), response{}};
      gate.order.hold(guard.t);
      ++stats_.resent_unwritten;
      if (give_up_or_wait(++unreachable)) co_return std::tuple{ec, response{}};
      const bool asked = ask_to.has_value();
      ask_to.reset();
      request_refresh();
      const auto w = route_wait::away_from(slot, node);
      auto end = co_await wait_route(asked ? nullptr : &w,
                                     dl.cap(clock::now() + pause_for(unreachable - 1)));
      if (auto out = after_wait(end)) co_return std::move(*out);
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
      case redirect_action::resend: {
        ++stats_.moved;
        if (a.slot == slot && gate.node && !(*gate.node == a.target)) {
          gate.order.on_route_change();
          gate.node.reset();
        }
        gate.order.hold(guard.t);
        const auto* before = map_.primary_for(a.slot);
        const bool moves = !before || !(*before == a.target);
        map_.assign(a.slot, a.target);
        if (moves) map_changed();
        ask_to.reset();
        request_refresh();
        continue;
      }
      case redirect_action::ask:
        ++stats_.asked;
        gate.order.hold(guard.t);
        ask_to = a.target;
        continue;
      case redirect_action::retry_later: {
        gate.order.hold(guard.t);
        ask_to.reset();
        const auto until = dl.cap(clock::now() + a.delay);
        wait_end end;
        if (a.cause == redirect::clusterdown) {
          // A slot lost its primary: the wait ends early when the routes
          // change (the failover done), read every map_poll_interval.
          ++stats_.clusterdown;
          request_refresh();
          const auto w = route_wait::map_change(map_version_);
          end = co_await wait_route(&w, until);
        } else {
          ++stats_.tryagain;  // a migration: only time helps
          end = co_await wait_route(nullptr, until);
        }
        if (auto out = after_wait(end)) co_return std::move(*out);
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
  poll_.cancel();
  refreshed_.cancel();
  map_changed_.cancel();
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
  for (auto& [name, n] : nodes) retire_counts(*n.conn);
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

cluster_stats router::stats() const { return cluster_ ? cluster_->stats() : cluster_stats{}; }

std::optional<cluster_node> router::node_for_slot(std::uint16_t slot) const {
  if (!cluster_) return std::nullopt;
  return cluster_->primary_for(slot);
}

std::string router::node_key(std::string_view key) const {
  if (!cluster_) return {};
  auto p = cluster_->primary_for(hash_slot(key));
  return p ? to_string(*p) : std::string{};
}

}  // namespace thoonk::detail
