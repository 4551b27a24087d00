#include "subscriber/subscriber_impl.hpp"

#include "detail/executor_util.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
// restore_pending_ holds channel names as "c:<name>" and patterns as "p:<name>".
std::string restore_key(bool pattern, const std::string& name) {
  return (pattern ? "p:" : "c:") + name;
}

// The subscriber's commands are its own bookkeeping: a SUBSCRIBE that timed
// out while disconnected would only be dropped from the queue while its
// subscribe() kept waiting (the reconnect re-subscribes anyway), so
// config::request_timeout does not apply to them.
config without_request_timeout(config cfg) {
  cfg.request_timeout = std::chrono::milliseconds(0);
  return cfg;
}
}  // namespace

subscriber_impl::subscriber_impl(asio::any_io_executor ex, config cfg)
    : conn_(std::make_shared<connection_impl>(ex, without_request_timeout(cfg))),
      cfg_(without_request_timeout(std::move(cfg))) {
  conn_->subscriber_mode = true;
}

subscriber_impl::~subscriber_impl() {
  conn_->stop();
  for (auto& [key, sc] : shard_conns_) sc.conn->stop();
}

void subscriber_impl::init() {
  // The connection outlives nothing of ours: hooks hold weak references.
  std::weak_ptr<subscriber_impl> weak = shared_from_this();
  conn_->on_push = [weak](resp3::value&& v) {
    if (auto self = weak.lock()) self->on_push(std::move(v));
  };
  conn_->on_setup = [weak](request& req) {
    if (auto self = weak.lock()) self->on_setup(req);
  };
  conn_->on_unmatched_error = [weak](resp3::value&& v) {
    if (auto self = weak.lock()) self->on_refused(std::move(v));
  };
  conn_->add_listener([weak](const connection_event& ev) {
    if (auto self = weak.lock()) self->on_connection_event(ev);
  });
}

bool subscriber_impl::live(const entry& e) {
  return std::any_of(e.callbacks.begin(), e.callbacks.end(),
                     [](const callback_slot& s) { return static_cast<bool>(s.fn); });
}

void subscriber_impl::send(std::string_view command, const std::string& name) {
  request req;
  req.push(command, name);
  // Fire and forget: the confirmation comes back as a push.
  conn_->async_exec(req, exec_options{}, exec_handler{});
}

void subscriber_impl::subscribe_on_server(bool pattern, const std::string& name, request* setup) {
  if (setup) {
    // Setup commands are written before anything queued: they are next.
    unconfirmed_.emplace_back(pattern, name);
    setup->push(pattern ? "PSUBSCRIBE" : "SUBSCRIBE", name);
    return;
  }
  request req;
  req.push(pattern ? "PSUBSCRIBE" : "SUBSCRIBE", name);
  // The command expects no reply, so its handler runs when it is written:
  // only then does it take its place in the order the server answers in.
  // (One queued before a reconnect is written after the setup's own
  // re-subscription; the duplicate is harmless and accounted for.)
  exec_handler on_written([weak = weak_from_this(), pattern, name](error_code ec, response) {
    if (ec) return;
    if (auto self = weak.lock()) self->unconfirmed_.emplace_back(pattern, name);
  });
  conn_->async_exec(req, exec_options{}, std::move(on_written));
}

void subscriber_impl::on_refused(resp3::value&& error_reply) {
  if (unconfirmed_.empty()) return;  // an error for nothing we sent: ignore
  auto [pattern, name] = std::move(unconfirmed_.front());
  unconfirmed_.pop_front();
  auto it = tbl(pattern).find(name);
  if (it != tbl(pattern).end()) {
    // The registration failed: its subscribe() calls fail and it is dropped.
    auto waiters = std::move(it->second.waiters);
    it->second.waiters.clear();
    tbl(pattern).erase(it);
    for (auto& w : waiters) {
      // The code says what happened; the server's text ("NOPERM ...") says
      // why, for callers that asked (capture_diagnostics).
      diagnostics_access::set(w.diag, error_reply.str);
      complete_handler(w.handler.take(), executor(), error_code(error::subscribe_refused),
                       subscription{});
    }
  }
  if (restore_pending_.erase(restore_key(pattern, name)) && restore_pending_.empty() &&
      conn_->connected())
    emit_connected_if_restored();
}

void subscriber_impl::async_subscribe(kind k, std::string name, subscriber::callback cb,
                                      subscribe_handler h) {
  if (stopped_) {
    complete_handler(std::move(h), executor(), error_code(error::client_stopped), subscription{});
    return;
  }
  if (auto refused = conn_->refusal()) {
    // The server refuses our setup (wrong password...): as for requests,
    // fail now rather than wait for someone to fix the config or the ACL.
    complete_handler(std::move(h), executor(), refused, subscription{});
    return;
  }
  auto id = next_id_++;
  auto [it, inserted] = tbl(k).try_emplace(name);
  entry& e = it->second;
  bool had_live = live(e);
  e.callbacks.push_back({id, std::move(cb)});
  if (e.confirmed) {
    complete_handler(std::move(h), executor(), error_code{},
                     subscription(weak_from_this(), k, std::move(name), id));
    return;
  }
  auto slot = asio::get_associated_cancellation_slot(h.handler);
  e.waiters.push_back({id, std::move(h.handler), h.diag});
  if (slot.is_connected()) {
    slot.assign([weak = weak_from_this(), k, name, id](asio::cancellation_type) {
      auto self = weak.lock();
      if (!self) return;
      auto it2 = self->tbl(k).find(name);
      if (it2 == self->tbl(k).end()) return;
      auto& ws = it2->second.waiters;
      auto w = std::find_if(ws.begin(), ws.end(), [&](const waiter& x) { return x.id == id; });
      if (w == ws.end()) return;
      auto handler = w->handler.take();
      ws.erase(w);
      self->remove(k, name, id);
      post_handler(std::move(handler), self->executor(), error_code(asio::error::operation_aborted),
                   subscription{});
    });
  }
  // The first live callback of a name sends the SUBSCRIBE; later ones ride
  // on its confirmation. While disconnected the request waits in the queue,
  // and the reconnect's setup subscribes anyway.
  if (had_live) return;
  if (k == kind::shard) {
    if (!placement_.contains(name)) shard_subscribe(name, placement_.add(name, map_lookup()));
  } else {
    subscribe_on_server(k == kind::pattern, name);
  }
}

void subscriber_impl::confirm(bool pattern, const std::string& name) {
  for (auto u = unconfirmed_.begin(); u != unconfirmed_.end(); ++u) {
    if (u->first == pattern && u->second == name) {
      unconfirmed_.erase(u);
      break;
    }
  }
  auto& stale = pattern ? stale_pattern_confirms_ : stale_channel_confirms_;
  if (auto s = stale.find(name); s != stale.end()) {
    if (--s->second == 0) stale.erase(s);
    return;
  }
  auto it = tbl(pattern).find(name);
  if (it != tbl(pattern).end()) {
    entry& e = it->second;
    e.confirmed = true;
    auto kind = pattern ? subscription::kind::pattern : subscription::kind::channel;
    auto waiters = std::move(e.waiters);
    e.waiters.clear();
    for (auto& w : waiters)
      complete_handler(w.handler.take(), executor(), error_code{},
                       subscription(weak_from_this(), kind, name, w.id));
  }
  if (!restore_pending_.empty() && restore_pending_.erase(restore_key(pattern, name)) &&
      restore_pending_.empty())
    emit_connected_if_restored();
}

void subscriber_impl::on_push(resp3::value&& v) {
  if (v.elements.size() < 2) return;
  const auto& what = v.elements[0].str;
  const auto& e = v.elements;
  if (what == "message" && e.size() >= 3) {
    ++stats_.messages;
    auto it = channels_.find(e[1].str);
    if (it != channels_.end()) deliver(it->second, message{e[1].str, e[2].str, {}});
  } else if (what == "pmessage" && e.size() >= 4) {
    ++stats_.messages;
    auto it = patterns_.find(e[1].str);
    if (it != patterns_.end()) deliver(it->second, message{e[2].str, e[3].str, e[1].str});
  } else if (what == "subscribe") {
    confirm(false, e[1].str);
  } else if (what == "psubscribe") {
    confirm(true, e[1].str);
  }
  // unsubscribe/punsubscribe confirmations need no action.
}

void subscriber_impl::deliver(entry& e, const message& m) {
  ++dispatching_;
  // Index loop: callbacks may register more callbacks (push_back) or drop
  // handles (tombstoned until the fan-out ends).
  for (std::size_t i = 0; i < e.callbacks.size(); ++i) {
    if (!e.callbacks[i].fn) continue;
    ++stats_.deliveries;
    try {
      auto fn = e.callbacks[i].fn;  // a copy: the slot may be tombstoned by the call
      fn(m);
    } catch (...) {
      ++stats_.callback_errors;
      if (error_handler_) {
        try {
          error_handler_(std::current_exception());
        } catch (...) {
        }
      }
    }
  }
  if (--dispatching_ == 0 && !deferred_cleanup_.empty()) {
    auto todo = std::move(deferred_cleanup_);
    deferred_cleanup_.clear();
    for (auto& [k, name] : todo) cleanup(k, name);
  }
}

void subscriber_impl::remove(kind k, const std::string& name, std::uint64_t id) {
  if (k == kind::listener) {
    for (auto& l : listeners_)
      if (l.first == id) l.second = nullptr;
    std::erase_if(listeners_, [](const auto& l) { return !l.second; });
    return;
  }
  auto it = tbl(k).find(name);
  if (it == tbl(k).end()) return;
  for (auto& s : it->second.callbacks)
    if (s.id == id) s.fn = nullptr;
  if (dispatching_ > 0) deferred_cleanup_.emplace_back(k, name);
  else cleanup(k, name);
}

void subscriber_impl::cleanup(kind k, const std::string& name) {
  auto it = tbl(k).find(name);
  if (it == tbl(k).end()) return;
  entry& e = it->second;
  std::erase_if(e.callbacks, [](const callback_slot& s) { return !s.fn; });
  if (!e.callbacks.empty() || !e.waiters.empty()) return;
  const bool confirmed = e.confirmed;
  tbl(k).erase(it);
  if (k == kind::shard) {
    const bool was_lost = placement_.any_lost();
    auto node = placement_.remove(name);
    if (node && !stopped_) {
      auto sc = shard_conns_.find(node->host.empty() ? std::string() : to_string(*node));
      if (!confirmed && sc != shard_conns_.end() &&
          std::find(sc->second.unconfirmed.begin(), sc->second.unconfirmed.end(), name) !=
              sc->second.unconfirmed.end())
        ++sc->second.stale[name];  // its answer is not for a later registration
      shard_unsubscribe(name, *node);
    }
    drop_idle_shard_conns();
    // Dropping the last lost channel ends the gap.
    if (was_lost && !placement_.any_lost()) emit_connected_if_restored();
    return;
  }
  const bool pattern = k == kind::pattern;
  if (!confirmed && conn_->connected()) {
    // Our SUBSCRIBE is still on its way; its confirmation is not for a
    // later registration of the same name.
    ++(pattern ? stale_pattern_confirms_ : stale_channel_confirms_)[name];
  }
  if (!stopped_) send(pattern ? "PUNSUBSCRIBE" : "UNSUBSCRIBE", name);
  // Dropping the last name still awaiting its restore completes the restore.
  if (restore_pending_.erase(restore_key(pattern, name)) && restore_pending_.empty() &&
      conn_->connected())
    emit_connected_if_restored();
}

void subscriber_impl::on_setup(request& req) {
  // Every (re)connect starts from an unsubscribed server connection.
  restore_pending_.clear();
  unconfirmed_.clear();
  stale_channel_confirms_.clear();
  stale_pattern_confirms_.clear();
  for (auto& [name, e] : channels_) {
    e.confirmed = false;
    if (!live(e) && e.waiters.empty()) continue;
    subscribe_on_server(false, name, &req);
    restore_pending_.insert(restore_key(false, name));
  }
  for (auto& [name, e] : patterns_) {
    e.confirmed = false;
    if (!live(e) && e.waiters.empty()) continue;
    subscribe_on_server(true, name, &req);
    restore_pending_.insert(restore_key(true, name));
  }
}

void subscriber_impl::on_connection_event(const connection_event& ev) {
  switch (ev.kind) {
    case connection_event::connected:
      // With nothing to restore we are fully connected now; otherwise the
      // last restore confirmation emits `connected` (see confirm()).
      if (restore_pending_.empty()) emit_connected_if_restored();
      break;
    case connection_event::disconnected:
      for (auto& [n, e] : channels_) e.confirmed = false;
      for (auto& [n, e] : patterns_) e.confirmed = false;
      emit({subscriber_event::disconnected, ev.error});
      break;
    case connection_event::connect_failed:
      if (ev.setup_refused) fail_waiters(ev.error);
      break;
    case connection_event::client_name_refused: break;
  }
}

void subscriber_impl::fail_waiters(error_code ec) {
  // subscribe() calls still waiting for a confirmation fail with the setup
  // error and their callbacks go; registrations confirmed on an earlier
  // connection stay and are restored when an attempt succeeds.
  std::vector<handler_box<void(error_code, subscription)>> failed;
  for (auto* t : {&channels_, &patterns_, &shards_}) {
    for (auto it = t->begin(); it != t->end();) {
      entry& e = it->second;
      for (auto& w : e.waiters) {
        std::erase_if(e.callbacks, [&](const callback_slot& s) { return s.id == w.id; });
        failed.push_back(std::move(w.handler));
      }
      e.waiters.clear();
      if (e.callbacks.empty()) {
        if (t == &shards_) placement_.remove(it->first);
        it = t->erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto& h : failed) complete_handler(h.take(), executor(), ec, subscription{});
}

subscription subscriber_impl::add_listener(std::function<void(const subscriber_event&)> l) {
  auto id = next_id_++;
  listeners_.emplace_back(id, std::move(l));
  return subscription(weak_from_this(), subscription::kind::listener, {}, id);
}

void subscriber_impl::emit(const subscriber_event& ev) {
  // Listeners may add or remove listeners: work on a snapshot.
  auto snapshot = listeners_;
  for (auto& [id, fn] : snapshot) {
    if (!fn) continue;
    try {
      fn(ev);
    } catch (...) {
      ++stats_.callback_errors;
    }
  }
}

void subscriber_impl::stop() {
  if (stopped_) return;
  stopped_ = true;
  conn_->stop();
  for (auto& [key, sc] : shard_conns_) sc.conn->stop();
  if (auto t = heal_timer_.lock()) t->cancel();
  for (auto* t : {&channels_, &patterns_, &shards_}) {
    for (auto& [name, e] : *t) {
      auto waiters = std::move(e.waiters);
      e.waiters.clear();
      for (auto& w : waiters)
        complete_handler(w.handler.take(), executor(), error_code(error::client_stopped),
                         subscription{});
    }
  }
}

subscriber_stats subscriber_impl::stats() const noexcept {
  auto s = stats_;
  s.connection = conn_->stats();
  s.shard_connections = shard_conns_.size();
  return s;
}

// ---- shard channels --------------------------------------------------------------

void subscriber_impl::emit_connected_if_restored() {
  // `connected` means every registration is subscribed: the classic ones
  // on this subscriber's connection and every shard channel on its node.
  if (!conn_->connected() || !restore_pending_.empty() || placement_.any_lost()) return;
  shard_gap_ = false;
  emit({subscriber_event::connected, {}});
}

shard_placement::lookup subscriber_impl::map_lookup() const {
  auto src = slots_.lock();
  if (!src) return {};
  return [src](std::uint16_t slot) { return src->primary_for(slot); };
}

subscriber_impl::shard_conn& subscriber_impl::shard_conn_for(const cluster_node& node) {
  const std::string key = node.host.empty() ? std::string() : to_string(node);
  auto it = shard_conns_.find(key);
  if (it != shard_conns_.end()) return it->second;
  // A primary of the cluster, as the router connects to it; on one server
  // (no node) the subscriber's own address.
  config c = node.host.empty() ? cfg_ : node_config(cfg_, node);
  auto& sc = shard_conns_[key];
  sc.node = node;
  sc.conn = std::make_shared<connection_impl>(conn_->executor(), std::move(c));
  sc.conn->subscriber_mode = true;
  std::weak_ptr<subscriber_impl> weak = shared_from_this();
  sc.conn->on_push = [weak, key](resp3::value&& v) {
    if (auto self = weak.lock()) self->on_shard_push(key, std::move(v));
  };
  sc.conn->on_setup = [weak, key](request& req) {
    if (auto self = weak.lock()) self->on_shard_setup(key, req);
  };
  sc.conn->on_unmatched_error = [weak, key](resp3::value&& v) {
    if (auto self = weak.lock()) self->on_shard_refused(key, std::move(v));
  };
  sc.conn->add_listener([weak, key](const connection_event& ev) {
    if (auto self = weak.lock()) self->on_shard_event(key, ev);
  });
  return sc;
}

void subscriber_impl::shard_subscribe(const std::string& channel, const cluster_node& node) {
  auto& sc = shard_conn_for(node);
  request req;
  req.push("SSUBSCRIBE", channel);
  // Confirmed (or refused) in the order written, like subscribe_on_server.
  exec_handler on_written([weak = weak_from_this(),
                           key = std::string(node.host.empty() ? std::string() : to_string(node)),
                           channel](error_code ec, response) {
    if (ec) return;
    auto self = weak.lock();
    if (!self) return;
    auto it = self->shard_conns_.find(key);
    if (it != self->shard_conns_.end()) it->second.unconfirmed.push_back(channel);
  });
  sc.conn->async_exec(req, exec_options{}, std::move(on_written));
}

void subscriber_impl::shard_unsubscribe(const std::string& channel, const cluster_node& node) {
  const std::string key = node.host.empty() ? std::string() : to_string(node);
  auto it = shard_conns_.find(key);
  if (it == shard_conns_.end() || !it->second.conn->connected()) return;
  ++it->second.own_unsubscribes[channel];
  request req;
  req.push("SUNSUBSCRIBE", channel);
  it->second.conn->async_exec(req, exec_options{}, exec_handler{});
}

void subscriber_impl::on_shard_setup(const std::string& key, request& req) {
  auto it = shard_conns_.find(key);
  if (it == shard_conns_.end()) return;
  // A new connection: nothing is subscribed on it yet.
  it->second.unconfirmed.clear();
  it->second.own_unsubscribes.clear();
  it->second.stale.clear();
  for (auto& channel : placement_.on_node_setup(it->second.node)) {
    it->second.unconfirmed.push_back(channel);
    req.push("SSUBSCRIBE", channel);
  }
}

void subscriber_impl::on_shard_event(const std::string& key, const connection_event& ev) {
  auto it = shard_conns_.find(key);
  if (it == shard_conns_.end()) return;
  if (ev.kind != connection_event::disconnected && ev.kind != connection_event::connect_failed)
    return;
  if (ev.kind == connection_event::disconnected)
    for (auto& [name, e] : shards_)
      if (placement_.node_of(name) == it->second.node) e.confirmed = false;
  // Its channels wait for that connection to come back, or for a map that
  // moves their slots (a failover).
  after_shard_change(placement_.on_node_lost(it->second.node));
}

void subscriber_impl::on_shard_push(const std::string& key, resp3::value&& v) {
  if (v.elements.size() < 2) return;
  const auto& what = v.elements[0].str;
  const auto& e = v.elements;
  if (what == "smessage" && e.size() >= 3) {
    ++stats_.messages;
    auto it = shards_.find(e[1].str);
    if (it != shards_.end()) deliver(it->second, message{e[1].str, e[2].str, {}});
  } else if (what == "ssubscribe") {
    confirm_shard(key, e[1].str);
  } else if (what == "sunsubscribe") {
    auto sc = shard_conns_.find(key);
    if (sc == shard_conns_.end()) return;
    auto own = sc->second.own_unsubscribes.find(e[1].str);
    if (own != sc->second.own_unsubscribes.end()) {
      // The confirmation of our own SUNSUBSCRIBE.
      if (--own->second == 0) sc->second.own_unsubscribes.erase(own);
      return;
    }
    // The server dropped the channel: its slot left this node (a
    // migration, or the node turned replica). Subscribe where it lives now.
    auto it = shards_.find(e[1].str);
    if (it != shards_.end()) it->second.confirmed = false;
    after_shard_change(placement_.on_server_unsubscribed(e[1].str, sc->second.node));
  }
}

void subscriber_impl::confirm_shard(const std::string& key, const std::string& channel) {
  auto sc = shard_conns_.find(key);
  if (sc == shard_conns_.end()) return;
  auto& pending = sc->second.unconfirmed;
  if (auto u = std::find(pending.begin(), pending.end(), channel); u != pending.end())
    pending.erase(u);
  if (auto s = sc->second.stale.find(channel); s != sc->second.stale.end()) {
    if (--s->second == 0) sc->second.stale.erase(s);
    return;
  }
  const bool was_lost = placement_.any_lost();
  if (!placement_.on_confirmed(channel, sc->second.node)) {
    // Placed elsewhere since, or dropped before its SSUBSCRIBE was
    // written: not wanted on this node.
    shard_unsubscribe(channel, sc->second.node);
    return;
  }
  auto it = shards_.find(channel);
  if (it != shards_.end()) {
    entry& e = it->second;
    e.confirmed = true;
    auto waiters = std::move(e.waiters);
    e.waiters.clear();
    for (auto& w : waiters)
      complete_handler(w.handler.take(), executor(), error_code{},
                       subscription(weak_from_this(), kind::shard, channel, w.id));
  }
  if (was_lost && !placement_.any_lost()) emit_connected_if_restored();
}

void subscriber_impl::on_shard_refused(const std::string& key, resp3::value&& error_reply) {
  auto sc = shard_conns_.find(key);
  if (sc == shard_conns_.end() || sc->second.unconfirmed.empty()) return;
  std::string channel = std::move(sc->second.unconfirmed.front());
  sc->second.unconfirmed.pop_front();
  const cluster_node node = sc->second.node;
  if (auto s = sc->second.stale.find(channel); s != sc->second.stale.end()) {
    // The answer to an SSUBSCRIBE whose registration was dropped.
    if (--s->second == 0) sc->second.stale.erase(s);
    return;
  }
  const redirect r = parse_redirect(error_reply);
  if (r.kind == redirect::moved) {
    // The slot lives elsewhere: send it there at once (the map is read
    // again by the healing loop when the router has one).
    cluster_node target = r.target;
    if (target.host.empty()) target.host = node.host.empty() ? cfg_.host : node.host;
    if (auto to = placement_.on_moved(channel, node, target)) shard_subscribe(channel, *to);
    drop_idle_shard_conns();
    if (!slots_.expired()) start_healing();
    return;
  }
  if (r.kind != redirect::none) {
    // ASK, TRYAGAIN, CLUSTERDOWN: the slot is moving or not served; try
    // again after a pause.
    placement_.on_retry(channel, node);
    start_healing();
    return;
  }
  auto it = shards_.find(channel);
  if (it == shards_.end()) return;
  // Refused for good (ACL): the registration's subscribe() calls fail.
  auto waiters = std::move(it->second.waiters);
  shards_.erase(it);
  placement_.remove(channel);
  drop_idle_shard_conns();
  for (auto& w : waiters) {
    diagnostics_access::set(w.diag, error_reply.str);
    complete_handler(w.handler.take(), executor(), error_code(error::subscribe_refused),
                     subscription{});
  }
}

void subscriber_impl::after_shard_change(bool became_lost) {
  if (became_lost && !shard_gap_) {
    // Messages of the lost channels are missed from now on until they are
    // subscribed again: a gap, as when this subscriber's connection drops
    // (feeds catch up after the `connected` that ends it).
    shard_gap_ = true;
    emit({subscriber_event::disconnected, error_code(error::not_connected)});
  }
  if (placement_.needs_work()) start_healing();
}

void subscriber_impl::apply_plan() {
  for (auto& s : placement_.plan(map_lookup())) {
    if (s.unsubscribe_from) shard_unsubscribe(s.channel, *s.unsubscribe_from);
    shard_subscribe(s.channel, s.to);
  }
  drop_idle_shard_conns();
}

void subscriber_impl::drop_idle_shard_conns() {
  auto in_use = placement_.nodes();
  for (auto it = shard_conns_.begin(); it != shard_conns_.end();) {
    if (std::find(in_use.begin(), in_use.end(), it->second.node) == in_use.end()) {
      it->second.conn->stop();
      retired_.push_back(std::move(it->second.conn));
      it = shard_conns_.erase(it);
    } else {
      ++it;
    }
  }
  // Stopped connections finish their coroutines on their own; keep only a
  // few references (they hold nothing of ours).
  if (retired_.size() > 16) retired_.erase(retired_.begin(), retired_.begin() + 8);
}

void subscriber_impl::start_healing() {
  if (healing_ || stopped_) return;
  healing_ = true;
  asio::co_spawn(executor(), heal(shared_from_this()), asio::detached);
}

asio::awaitable<void> subscriber_impl::heal(std::shared_ptr<subscriber_impl> self) {
  // While shard channels are lost, unplaced or wait for a connection that
  // is down: read the map again, send what moved, pause, again. The pause
  // doubles from reconnect_min_delay to reconnect_max_delay, as the
  // connection's own reconnects do.
  try {
    auto pause = std::max(self->cfg_.reconnect_min_delay, std::chrono::milliseconds(10));
    auto timer = std::make_shared<asio::steady_timer>(self->executor());
    self->heal_timer_ = timer;  // stop() cancels it
    while (!self->stopped_ && self->placement_.needs_work()) {
      if (auto src = self->slots_.lock()) co_await src->refresh();
      if (self->stopped_) break;
      self->apply_plan();
      timer->expires_after(pause);
      co_await timer->async_wait(asio::as_tuple(asio::use_awaitable));
      pause = std::min(pause * 2, std::max(self->cfg_.reconnect_max_delay, pause));
    }
  } catch (...) {
    // Nothing here throws by design; never let it escape detached.
  }
  self->healing_ = false;
}

}  // namespace thoonk::detail
