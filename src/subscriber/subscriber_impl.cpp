#include "subscriber/subscriber_impl.hpp"

#include "detail/executor_util.hpp"

#include <thoonk/error.hpp>

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
    : conn_(std::make_shared<connection_impl>(std::move(ex),
                                              without_request_timeout(std::move(cfg)))) {
  conn_->subscriber_mode = true;
}

subscriber_impl::~subscriber_impl() { conn_->stop(); }

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
      // why, for callers that asked (with_diagnostics).
      diagnostics_access::set(w.diag, error_reply.str);
      complete_handler(w.handler.take(), executor(), error_code(error::subscribe_refused),
                       subscription{});
    }
  }
  if (restore_pending_.erase(restore_key(pattern, name)) && restore_pending_.empty() &&
      conn_->connected())
    emit({subscriber_event::connected, {}});
}

void subscriber_impl::async_subscribe(bool pattern, std::string name, subscriber::callback cb,
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
  auto kind = pattern ? subscription::kind::pattern : subscription::kind::channel;
  auto id = next_id_++;
  auto [it, inserted] = tbl(pattern).try_emplace(name);
  entry& e = it->second;
  bool had_live = live(e);
  e.callbacks.push_back({id, std::move(cb)});
  if (e.confirmed) {
    complete_handler(std::move(h), executor(), error_code{},
                     subscription(weak_from_this(), kind, std::move(name), id));
    return;
  }
  auto slot = asio::get_associated_cancellation_slot(h.handler);
  e.waiters.push_back({id, std::move(h.handler), h.diag});
  if (slot.is_connected()) {
    slot.assign([weak = weak_from_this(), pattern, name, id](asio::cancellation_type) {
      auto self = weak.lock();
      if (!self) return;
      auto it2 = self->tbl(pattern).find(name);
      if (it2 == self->tbl(pattern).end()) return;
      auto& ws = it2->second.waiters;
      auto w = std::find_if(ws.begin(), ws.end(), [&](const waiter& x) { return x.id == id; });
      if (w == ws.end()) return;
      auto handler = w->handler.take();
      ws.erase(w);
      self->remove(pattern ? subscription::kind::pattern : subscription::kind::channel, name, id);
      post_handler(std::move(handler), self->executor(), error_code(asio::error::operation_aborted),
                   subscription{});
    });
  }
  // The first live callback of a name sends the SUBSCRIBE; later ones ride
  // on its confirmation. While disconnected the request waits in the queue,
  // and the reconnect's setup subscribes anyway.
  if (!had_live) subscribe_on_server(pattern, name);
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
    emit({subscriber_event::connected, {}});
}

void subscriber_impl::on_push(resp3::value&& v) {
  if (v.elements.size() < 2) return;
  const auto& kind = v.elements[0].str;
  const auto& e = v.elements;
  if (kind == "message" && e.size() >= 3) {
    ++stats_.messages;
    auto it = channels_.find(e[1].str);
    if (it != channels_.end()) deliver(it->second, message{e[1].str, e[2].str, {}});
  } else if (kind == "pmessage" && e.size() >= 4) {
    ++stats_.messages;
    auto it = patterns_.find(e[1].str);
    if (it != patterns_.end()) deliver(it->second, message{e[2].str, e[3].str, e[1].str});
  } else if (kind == "subscribe") {
    confirm(false, e[1].str);
  } else if (kind == "psubscribe") {
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
    for (auto& [pattern, name] : todo) cleanup(pattern, name);
  }
}

void subscriber_impl::remove(subscription::kind k, const std::string& name, std::uint64_t id) {
  if (k == subscription::kind::listener) {
    for (auto& l : listeners_)
      if (l.first == id) l.second = nullptr;
    std::erase_if(listeners_, [](const auto& l) { return !l.second; });
    return;
  }
  bool pattern = k == subscription::kind::pattern;
  auto it = tbl(pattern).find(name);
  if (it == tbl(pattern).end()) return;
  for (auto& s : it->second.callbacks)
    if (s.id == id) s.fn = nullptr;
  if (dispatching_ > 0) deferred_cleanup_.emplace_back(pattern, name);
  else cleanup(pattern, name);
}

void subscriber_impl::cleanup(bool pattern, const std::string& name) {
  auto it = tbl(pattern).find(name);
  if (it == tbl(pattern).end()) return;
  entry& e = it->second;
  std::erase_if(e.callbacks, [](const callback_slot& s) { return !s.fn; });
  if (!e.callbacks.empty() || !e.waiters.empty()) return;
  if (!e.confirmed && conn_->connected()) {
    // Our SUBSCRIBE is still on its way; its confirmation is not for a
    // later registration of the same name.
    ++(pattern ? stale_pattern_confirms_ : stale_channel_confirms_)[name];
  }
  tbl(pattern).erase(it);
  if (!stopped_) send(pattern ? "PUNSUBSCRIBE" : "UNSUBSCRIBE", name);
  // Dropping the last name still awaiting its restore completes the restore.
  if (restore_pending_.erase(restore_key(pattern, name)) && restore_pending_.empty() &&
      conn_->connected())
    emit({subscriber_event::connected, {}});
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
      if (restore_pending_.empty()) emit({subscriber_event::connected, {}});
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
  for (auto* t : {&channels_, &patterns_}) {
    for (auto it = t->begin(); it != t->end();) {
      entry& e = it->second;
      for (auto& w : e.waiters) {
        std::erase_if(e.callbacks, [&](const callback_slot& s) { return s.id == w.id; });
        failed.push_back(std::move(w.handler));
      }
      e.waiters.clear();
      if (e.callbacks.empty()) it = t->erase(it);
      else ++it;
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
  for (auto* t : {&channels_, &patterns_}) {
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
  return s;
}

}  // namespace thoonk::detail
