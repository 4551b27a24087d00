// Feed subscriptions: typed events on top of the subscriber's channels, and
// catch-up after reconnects.
//
// Catch-up in one paragraph (docs/feeds.md has the full story): the
// library's scripts keep `feed.changes` (id -> value of the contract's
// `feed.publishes` counter at its latest publish/edit) and `feed.retracts`
// (retracted id -> counter value when retracted). A catch-up read returns,
// atomically, everything changed after a counter value and PUBLISHes a
// *marker* on this client's private channel in the same step: a sync point
// in the ordered message stream. Live messages before the marker are covered
// by the read and dropped; those after it are buffered until the replay has
// been delivered, then delivered live. The replay starts from the counter
// value of the previous sync point (the *anchor*), and the ledger
// (catch_up_ledger.hpp) filters out what the application was already given
// live since then, so nothing is delivered twice, nothing is lost, and the
// non-atomic publishes of other contract clients cannot shift the position.
// For feeds, the read also scans the items scored at or above the anchor's
// newest score that no library change accounts for: changes made by other
// contract clients during the gap.
//
// Every decision of that (phase, buffer, cursor, rounds, re-anchors) is made
// by catch_up_tracker (catch_up_tracker.hpp), which does no I/O; the code
// here only runs the reads, invokes the callbacks and asks it what to do.
#include <thoonk/feed_events.hpp>

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>

#include "detail/impl_access.hpp"
#include "detail/keys.hpp"
#include "detail/spawn.hpp"
#include "detail/use_nothrow.hpp"
#include "feeds/catch_up_tracker.hpp"
#include "feeds/common.hpp"
#include "feeds/subscription.hpp"
#include "subscriber/notify.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <deque>
#include <optional>

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

// ---- feed_position -----------------------------------------------------------

std::string feed_position::to_string() const {
  switch (where) {
    case begin: return "begin:";
    case before: return ":" + relative_id;
    case after: return relative_id + ":";
    case end: break;
  }
  return ":end";
}

std::optional<feed_position> feed_position::parse(std::string_view s) {
  if (s == ":end") return at_end();
  if (s == "begin:") return at_begin();
  if (s.size() >= 2 && s.front() == ':') return before_id(std::string(s.substr(1)));
  if (s.size() >= 2 && s.back() == ':') return after_id(std::string(s.substr(0, s.size() - 1)));
  return std::nullopt;
}

namespace detail {

namespace {

// Replay batches: at most this many changed items, or about this many bytes
// of items, per script call (each call is atomic and must stay short).
constexpr std::size_t replay_batch_items = 1000;
constexpr std::size_t replay_batch_bytes = 4u << 20;
// Catch-up read, one atomic step: the items changed by library scripts
// after `from` (in publish-counter order), the retractions logged at or
// after it, optionally the marker PUBLISH with the sync point it stands for,
// and optionally a page of the score window (feeds: items scored at or above
// the anchor's newest score whose last library change is not after `from`,
// i.e. changed by another contract client). The script:
// src/lua/feeds/catch_up.lua (detail::scripts::feeds_catch_up(), run by read()).

enum class chan { publish, edit, retract, position, marker, newfeed, delfeed, conffeed };

std::atomic<std::uint64_t> next_state_id{1};

struct tombstone {
  std::string id;
  std::uint64_t seq;
};

}  // namespace

class feed_sub_state : public std::enable_shared_from_this<feed_sub_state> {
 public:
  // Kept alive by the state, so rounds in flight never reach a destroyed
  // connection; closed() once the client object is gone.
  std::shared_ptr<detail::client_core> cli;
  std::string name;
  feed_type type = feed_type::feed;
  feed_callback cb;
  feed_admin_callback admin_cb;
  feed_subscribe_options opts;
  std::uint64_t id = next_state_id++;
  std::vector<subscription> subs;
  subscription listener;
  bool stopped = false;
  feed_subscription_stats stats;

  // ---- catch-up: phases, buffer, cursor, ledger and rounds are decided by
  // ---- the tracker; this class performs the reads and the callbacks ----
  catch_up_tracker tracker;
  error_code failed;                           // why the first sync failed
  asio::steady_timer* ready_waiter = nullptr;  // subscribe() waiting for a cursor

  bool current(std::uint64_t r) const { return !stopped && tracker.is_round(r) && !cli->closed(); }

  void stop() {
    if (stopped) return;
    stopped = true;
    tracker.stop();
    auto s = std::move(subs);
    subs.clear();
    s.clear();  // removes the callbacks (inert when the client is gone)
    listener.reset();
    wake_waiter();
  }

  void wake_waiter() {
    if (ready_waiter) ready_waiter->cancel();
  }

  // ---- delivery ----

  void invoke(const feed_event& ev) {
    if (stopped) return;
    ++stats.delivered;
    if (ev.replayed) ++stats.replayed;
    try {
      cb(ev);
    } catch (...) {
      ++stats.callback_errors;
    }
  }

  // A live event of a catch-up subscription, in any phase.
  void handle_live(const feed_event& ev) {
    switch (tracker.on_live(ev)) {
      case catch_up_tracker::live_action::deliver_and_reanchor:
        asio::co_spawn(cli->get_executor(),
                       run_reanchor(shared_from_this(), tracker.current_reanchor()),
                       asio::detached);
        [[fallthrough]];
      case catch_up_tracker::live_action::deliver: invoke(ev); break;
      default: break;  // buffered, dropped, or the late message of a replayed change
    }
  }

  void on_feed_message(chan k, const message& m) {
    if (stopped) return;
    feed_event ev;
    ev.feed = name;
    std::string_view p = m.payload;
    switch (k) {
      case chan::publish:
      case chan::edit: {
        auto nul = p.find('\0');
        if (nul == std::string_view::npos) {
          ++stats.malformed;
          return;
        }
        ev.kind = k == chan::publish ? feed_event::publish : feed_event::edit;
        ev.id = p.substr(0, nul);
        ev.item = p.substr(nul + 1);
        break;
      }
      case chan::retract:
        ev.kind = feed_event::retract;
        ev.id = p;
        break;
      case chan::position: {
        auto nul = p.find('\0');
        std::optional<feed_position> pos;
        if (nul != std::string_view::npos) pos = feed_position::parse(p.substr(nul + 1));
        if (!pos) {
          ++stats.malformed;
          return;
        }
        ev.kind = feed_event::position;
        ev.id = p.substr(0, nul);
        ev.where = std::move(*pos);
        break;
      }
      default: return;
    }
    if (!opts.catch_up) {
      invoke(ev);
      return;
    }
    handle_live(ev);
  }

  void on_admin_message(chan k, const message& m) {
    if (stopped) return;
    auto p = m.payload;
    auto nul = p.find('\0');
    if (nul == std::string_view::npos) {
      ++stats.malformed;
      return;
    }
    feed_admin_event ev;
    ev.kind = k == chan::newfeed   ? feed_admin_event::created
              : k == chan::delfeed ? feed_admin_event::deleted
                                   : feed_admin_event::config_changed;
    ev.feed = p.substr(0, nul);
    ev.instance = p.substr(nul + 1);
    ++stats.delivered;
    try {
      admin_cb(ev);
    } catch (...) {
      ++stats.callback_errors;
    }
  }

  void on_marker(const message& m) {
    if (stopped) return;
    if (tracker.on_marker(m.payload) == catch_up_tracker::marker_action::finish_round)
      finish_round();
  }

  void on_subscriber_event(const subscriber_event& ev) {
    if (stopped) return;
    if (ev.kind == subscriber_event::disconnected) tracker.on_disconnected();
    else if (tracker.on_connected()) start_round();
  }

  // ---- the catch-up read ----

  struct read_args {
    std::uint64_t from = 0;
    std::string upper;     // '' = the counter now
    std::size_t rows = 0;  // 0 = no rows
    bool retractions = false;
    std::string marker;     // '' = no marker
    std::string window_lo;  // '' = no window
    std::uint64_t window_skip = 0;
    std::string window_hi;  // '' = the newest score now
  };

  asio::awaitable<std::tuple<error_code, resp3::value>> read(const read_args& a) {
    const auto keys = data_keys(feed_names(cli->get_config(), name));
    std::vector<std::string> args;
    args.emplace_back(to_string(type));
    args.push_back(std::to_string(a.from));
    args.push_back(a.upper);
    args.push_back(std::to_string(a.rows));
    args.push_back(std::to_string(replay_batch_bytes));
    args.emplace_back(a.retractions ? "1" : "0");
    args.push_back(a.marker.empty()
                       ? std::string()
                       : catchup_channel(cli->instance_id(), feed_names(cli->get_config(), name)));
    args.push_back(a.marker);
    args.push_back(a.window_lo);
    args.push_back(std::to_string(a.window_skip));
    args.push_back(a.window_hi);
    args.push_back(std::to_string(replay_batch_items));
    auto [ec, v] = co_await run_script(*cli, scripts::feeds_catch_up(), keys, std::move(args));
    if (!ec && v.elements.size() != 11) ec = error::unexpected_type;
    co_return std::tuple{ec, std::move(v)};
  }

  // The sync point a read with a marker stands for.
  sync_point parse_sync(const resp3::value& v) const {
    sync_point sp;
    error_code pec;
    sp.seq = as_u64(v.elements[0], pec);
    const auto& s = v.elements[6].elements;
    if (type == feed_type::feed && !s.empty()) {
      sp.window_from = s[0].str.empty() ? std::string("-inf") : s[0].str;
      for (std::size_t i = 1; i < s.size(); ++i) sp.window_excluded.insert(s[i].str);
    }
    for (const auto& e : v.elements[7].elements) sp.retracted_at_seq.insert(e.str);
    return sp;
  }

  // ---- re-anchoring ----

  static asio::awaitable<void> run_reanchor(std::shared_ptr<feed_sub_state> self,
                                            catch_up_tracker::reanchor_request req) {
    try {
      read_args a;
      a.from = req.from;
      a.marker = std::move(req.marker);
      auto [ec, v] = co_await self->read(a);
      if (self->stopped) co_return;
      std::optional<sync_point> sp;
      if (!ec) sp = self->parse_sync(v);
      self->tracker.on_reanchor_read(req.generation, std::move(sp));
    } catch (...) {
      // Nothing here throws by design; never let it escape detached.
    }
  }

  // ---- catch-up rounds ----

  void start_round() {
    if (stopped) return;
    const std::uint64_t r = tracker.start_round();
    asio::co_spawn(cli->get_executor(), run_round(shared_from_this(), r), asio::detached);
  }

  void report_catch_up() {
    if (!opts.on_catch_up) return;
    try {
      opts.on_catch_up(tracker.info());
    } catch (...) {
      ++stats.callback_errors;
    }
  }

  // Both the round's marker and its replay are in: report, then deliver the
  // live events buffered meanwhile.
  void finish_round() {
    switch (tracker.finish_round()) {
      case catch_up_tracker::round_end::restart: start_round(); return;
      case catch_up_tracker::round_end::caught_up:
        ++stats.catch_ups;
        report_catch_up();
        break;
      case catch_up_tracker::round_end::initial: break;
    }
    while (!stopped) {
      auto e = tracker.next_buffered();
      if (!e) break;
      handle_live(e->view(name));
    }
    tracker.end_flush();
  }

  void replay_publish(std::string_view rid, std::string_view item) {
    feed_event ev;
    ev.kind = feed_event::publish;
    ev.feed = name;
    ev.id = rid;
    ev.item = item;
    ev.replayed = true;
    invoke(ev);
  }

  void replay_retract(const tombstone& t) {
    if (!tracker.take_retraction(t.id, t.seq)) return;
    feed_event ev;
    ev.kind = feed_event::retract;
    ev.feed = name;
    ev.id = t.id;
    ev.replayed = true;
    invoke(ev);
  }

  static asio::awaitable<void> run_round(std::shared_ptr<feed_sub_state> self, std::uint64_t r) {
    try {
      co_await self->round_body(r);
    } catch (...) {
      // Nothing in a round throws by design; never let it escape detached.
    }
  }

  asio::awaitable<void> round_body(std::uint64_t r) {
    auto backoff = std::chrono::milliseconds(50);
    std::deque<tombstone> tombs;
    std::uint64_t upper = 0;
    resp3::value window;  // the first page of the score window, delivered last

    // First call: the sync point (marker) plus the first batches.
    for (;;) {
      if (!current(r)) co_return;
      auto req = tracker.next_sync();
      read_args a;
      a.from = req.from;
      a.marker = std::move(req.marker);
      if (!req.initial) {
        a.rows = replay_batch_items;
        a.retractions = true;
        if (req.window_from) a.window_lo = *req.window_from;
      }
      auto [ec, v] = co_await read(a);
      if (!current(r)) co_return;
      if (ec) {
        if (!co_await handle_error(ec, r, backoff)) co_return;
        tracker.retry_sync();
        continue;
      }
      sync_point sp = parse_sync(v);
      upper = sp.seq;
      const auto action = tracker.on_sync(std::move(sp), v.elements[4].integer == 1);
      if (action == catch_up_tracker::sync_action::counter_reset) continue;
      if (action == catch_up_tracker::sync_action::initial) {
        wake_waiter();
        if (tracker.replay_done()) finish_round();
        co_return;
      }
      error_code pec;
      const auto& t = v.elements[2].elements;
      for (std::size_t i = 0; i + 1 < t.size(); i += 2)
        tombs.push_back(tombstone{t[i].str, as_u64(t[i + 1], pec)});
      deliver_batch(v.elements[1].elements, tombs);
      bool more = v.elements[3].integer == 1;
      std::uint64_t last = as_u64(v.elements[5], pec);
      window = std::move(v);
      // Later batches: no marker, bounded by the sync point's counter.
      while (more && current(r)) {
        read_args b;
        b.from = last;
        b.upper = std::to_string(upper);
        b.rows = replay_batch_items;
        auto [ec2, v2] = co_await read(b);
        if (!current(r)) co_return;
        if (ec2) {
          if (!co_await handle_error(ec2, r, backoff)) co_return;
          continue;  // same batch again
        }
        deliver_batch(v2.elements[1].elements, tombs);
        more = v2.elements[3].integer == 1;
        last = as_u64(v2.elements[5], pec);
      }
      break;
    }
    if (!current(r)) co_return;
    while (!tombs.empty() && !stopped) {
      replay_retract(tombs.front());
      tombs.pop_front();
    }
    // Then the score window: items changed by other contract clients, in
    // score order, bounded by the newest score at the sync point.
    if (tracker.ledger().anchor().window_from) {
      const std::uint64_t from = tracker.ledger().anchor().seq;
      for (;;) {
        if (!current(r)) co_return;
        deliver_window(window.elements[8].elements);
        const auto& next = window.elements[10].elements;
        if (window.elements[9].integer != 1 || next.size() != 3) break;
        read_args w;
        w.from = from;
        w.window_lo = next[0].str;
        error_code pec;
        w.window_skip = as_u64(next[1], pec);
        w.window_hi = next[2].str;
        for (;;) {
          auto [ec3, v3] = co_await read(w);
          if (!current(r)) co_return;
          if (!ec3) {
            window = std::move(v3);
            break;
          }
          if (!co_await handle_error(ec3, r, backoff)) co_return;
        }
      }
    }
    if (tracker.replay_done()) finish_round();
  }

  // Delivers one batch of rows, each after the retractions that preceded it.
  void deliver_batch(const resp3::value_list& rows, std::deque<tombstone>& tombs) {
    error_code pec;
    for (std::size_t i = 0; i + 2 < rows.size() && !stopped; i += 3) {
      std::uint64_t seq = as_u64(rows[i + 1], pec);
      while (!tombs.empty() && tombs.front().seq < seq && !stopped) {
        replay_retract(tombs.front());
        tombs.pop_front();
      }
      if (tracker.take_change(rows[i].str, rows[i + 2].str))
        replay_publish(rows[i].str, rows[i + 2].str);
    }
  }

  // Delivers one page of the score window ({id, score, item} triples).
  void deliver_window(const resp3::value_list& rows) {
    for (std::size_t i = 0; i + 2 < rows.size() && !stopped; i += 3) {
      if (tracker.take_window_item(rows[i].str, rows[i + 1].str, rows[i + 2].str))
        replay_publish(rows[i].str, rows[i + 2].str);
    }
  }

  // A failed catch-up call: false to give up the round, true to retry
  // (after a pause).
  asio::awaitable<bool> handle_error(error_code ec, std::uint64_t r,
                                     std::chrono::milliseconds& backoff) {
    if (ec == error::feed_not_found || ec == error::wrong_feed_type ||
        ec == error::client_stopped) {
      if (!tracker.fail_round(ec)) {  // no first sync point: subscribe() fails
        failed = ec;
        wake_waiter();
        co_return false;
      }
      report_catch_up();  // live now, with nothing replayed
      co_return false;
    }
    // Transport trouble: try again. A disconnect of the subscriber starts
    // a new round anyway (and abandons this one).
    asio::steady_timer t(cli->get_executor(), backoff);
    co_await t.async_wait(use_nothrow);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(2000));
    co_return current(r);
  }
};

namespace {

subscriber::callback feed_callback_for(const std::shared_ptr<feed_sub_state>& st, chan k) {
  return [weak = std::weak_ptr<feed_sub_state>(st), k](const message& m) {
    auto self = weak.lock();
    if (!self) return;
    if (k == chan::marker) self->on_marker(m);
    else if (k == chan::newfeed || k == chan::delfeed || k == chan::conffeed)
      self->on_admin_message(k, m);
    else self->on_feed_message(k, m);
  };
}

// Registers `cb` on each channel; the caller removes what was registered
// on failure. A refusal carries the server's text (subscribe_refused).
asio::awaitable<op_status> register_channels(detail::client_core* c,
                                             std::shared_ptr<feed_sub_state> st,
                                             std::vector<std::pair<std::string, chan>> chans) {
  for (auto& [channel, k] : chans) {
    auto callback = feed_callback_for(st, k);
    diagnostics diag;
    // The management channels are classic pub/sub everywhere; the feed's
    // own (and its catch-up markers) are shard channels in cluster mode.
    const bool management = k == chan::newfeed || k == chan::delfeed || k == chan::conffeed;
    error_code ec;
    subscription s;
    if (management) {
      std::tie(ec, s) = co_await c->sub().async_subscribe(channel, std::move(callback),
                                                          capture_diagnostics(diag, use_nothrow));
    } else {
      std::tie(ec, s) = co_await subscribe_notifications(*c, channel, std::move(callback),
                                                         capture_diagnostics(diag, use_nothrow));
    }
    if (ec) co_return op_status(ec, diag.server_message());
    st->subs.push_back(std::move(s));
  }
  co_return op_status{};
}

// Clears the state's pointer to the waiting timer when the frame goes.
struct waiter_guard {
  feed_sub_state* st;
  ~waiter_guard() { st->ready_waiter = nullptr; }
};

asio::awaitable<op_result<feed_subscription>> subscribe_op(detail::client_core* c,
                                                           std::shared_ptr<feed_sub_state> st) {
  const auto& cfg = c->get_config();
  if (auto ec = validate_name(cfg, st->name)) co_return std::tuple{ec, feed_subscription{}};
  feed_names n(cfg, st->name);
  {
    request req;
    push_type_check(req, n);
    auto [checked, resp] = co_await exec_checked(*c, n, req, st->type);
    if (checked) co_return std::tuple{std::move(checked), feed_subscription{}};
  }
  if (st->opts.catch_up) {
    catch_up_tracker::options topts;
    topts.score_window = st->type == feed_type::feed;
    st->tracker = catch_up_tracker(std::to_string(st->id), topts);
    std::weak_ptr<feed_sub_state> weak = st;
    st->listener = c->sub().on_event([weak](const subscriber_event& ev) {
      if (auto self = weak.lock()) self->on_subscriber_event(ev);
    });
  }
  std::vector<std::pair<std::string, chan>> chans;
  chans.emplace_back(n.channel("publish"), chan::publish);
  if (st->type == feed_type::feed) chans.emplace_back(n.channel("edit"), chan::edit);
  chans.emplace_back(n.channel("retract"), chan::retract);
  if (st->type == feed_type::sorted_feed) chans.emplace_back(n.channel("position"), chan::position);
  if (st->opts.catch_up) chans.emplace_back(catchup_channel(c->instance_id(), n), chan::marker);
  if (auto refused = co_await register_channels(c, st, std::move(chans))) {
    st->stop();
    co_return std::tuple{std::move(refused), feed_subscription{}};
  }
  if (!st->opts.catch_up) {
    co_return std::tuple{op_status{}, feed_subscription(st)};
  }
  if (st->opts.resume_from) {
    // A saved cursor carries no score: the replay covers the library's own
    // changes after it (docs/feeds.md).
    st->tracker.resume_from(*st->opts.resume_from);
  }
  st->start_round();
  if (!st->tracker.has_cursor() && !st->failed) {
    asio::steady_timer ready(c->get_executor(), asio::steady_timer::time_point::max());
    st->ready_waiter = &ready;
    waiter_guard guard{st.get()};
    co_await ready.async_wait(use_nothrow);
  }
  if (!st->tracker.has_cursor()) {
    error_code ec = st->failed ? st->failed : error_code(asio::error::operation_aborted);
    st->stop();
    co_return std::tuple{ec, feed_subscription{}};
  }
  co_return std::tuple{op_status{}, feed_subscription(st)};
}

asio::awaitable<op_result<feed_subscription>> subscribe_admin_op(
    detail::client_core* c, std::shared_ptr<feed_sub_state> st) {
  std::vector<std::pair<std::string, chan>> chans;
  chans.emplace_back(std::string(newfeed_channel), chan::newfeed);
  chans.emplace_back(std::string(delfeed_channel), chan::delfeed);
  chans.emplace_back(std::string(conffeed_channel), chan::conffeed);
  if (auto refused = co_await register_channels(c, st, std::move(chans))) {
    st->stop();
    co_return std::tuple{std::move(refused), feed_subscription{}};
  }
  co_return std::tuple{op_status{}, feed_subscription(st)};
}

}  // namespace

void start_feed_subscribe(const std::shared_ptr<detail::client_core>& c, std::string name,
                          feed_type type, feed_callback cb, feed_subscribe_options opts,
                          feed_subscribe_handler h) {
  auto st = std::make_shared<feed_sub_state>();
  st->cli = c;
  st->name = std::move(name);
  st->type = type;
  st->cb = std::move(cb);
  st->opts = std::move(opts);
  spawn_op(c, subscribe_op(c.get(), std::move(st)), std::move(h));
}

void start_subscribe_feed_admin(client* c, feed_admin_callback cb, feed_subscribe_handler h) {
  const auto& core = client_access::core(*c);
  auto st = std::make_shared<feed_sub_state>();
  st->cli = core;
  st->admin_cb = std::move(cb);
  spawn_op(core, subscribe_admin_op(core.get(), std::move(st)), std::move(h));
}

}  // namespace detail

// ---- feed_subscription ----------------------------------------------------------

feed_subscription& feed_subscription::operator=(feed_subscription&& o) noexcept {
  if (this != &o) {
    reset();
    state_ = std::move(o.state_);
  }
  return *this;
}

feed_subscription::~feed_subscription() { reset(); }

void feed_subscription::reset() {
  if (auto s = std::move(state_)) s->stop();
}

bool feed_subscription::active() const noexcept {
  return state_ && !state_->stopped && !state_->cli->closed();
}

std::uint64_t feed_subscription::cursor() const noexcept {
  return state_ && state_->opts.catch_up ? state_->tracker.cursor() : 0;
}

feed_subscription_stats feed_subscription::stats() const noexcept {
  return state_ ? state_->stats : feed_subscription_stats{};
}

}  // namespace thoonk
