// Feed subscriptions: typed events on top of the subscriber's channels, and
// catch-up after reconnects.
//
// Catch-up in one paragraph (docs/feeds.md has the full story): every
// publish or edit increments the contract's `feed.publishes` counter and
// PUBLISHes exactly one message, atomically, so a subscription that knows
// the counter value at one point of its message stream (its *cursor*) can
// keep it exact by counting publish/edit messages. The library's scripts
// also keep `feed.changes` (id → counter value of its latest publish/edit)
// and `feed.retracts` (retracted id → counter value when retracted). After
// a reconnect, the catch-up script reads, atomically, everything changed
// after the cursor and PUBLISHes a *marker* on this client's private channel
// in the same step. Live messages that arrive before the marker are covered
// by the read and dropped; those after it are buffered until the replay has
// been delivered, then delivered live. Nothing is delivered twice, nothing
// is lost.
#include <thoonk/feed_events.hpp>

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>

#include "detail/keys.hpp"
#include "detail/spawn.hpp"
#include "feeds/common.hpp"
#include "feeds/subscription.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <atomic>
#include <deque>
#include <unordered_set>

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

constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

// Replay batches: at most this many changed items, or about this many bytes
// of items, per script call (each call is atomic and must stay short).
constexpr std::size_t replay_batch_items = 1000;
constexpr std::size_t replay_batch_bytes = 4u << 20;
// Live events buffered during a replay beyond these bounds are dropped and
// the subscription runs one more catch-up round instead.
constexpr std::size_t buffer_max_events = 100000;
constexpr std::size_t buffer_max_bytes = 64u << 20;

// Catch-up read: items changed after the cursor (in publish-counter order),
// retractions at or after it, and the marker PUBLISH, in one atomic step.
const script catchup_script{std::string(lua_prelude) + R"lua(
-- ARGV[1] expected type  ARGV[2] cursor  ARGV[3] upper bound ('' = now)
-- ARGV[4] max rows  ARGV[5] max item bytes  ARGV[6] '1': read retractions too
-- ARGV[7] marker channel ('' = none)  ARGV[8] marker payload
-- Returns {counter, {id, seq, item, ...}, {retracted id, seq, ...},
--          more (0/1), retractions complete (0/1), last seq examined}.
local err = open_feed(ARGV[1])
if err then return err end
local m = publish_count()
local hi = ARGV[3]
if hi == '' then hi = tostring(m) end
local limit = tonumber(ARGV[4])
local rows, more, last = {}, 0, tonumber(ARGV[2])
if limit > 0 then
  local found = redis.call('ZRANGEBYSCORE', K_CHANGES, '(' .. ARGV[2], hi,
                           'WITHSCORES', 'LIMIT', 0, limit)
  local budget, bytes = tonumber(ARGV[5]), 0
  for i = 1, #found, 2 do
    last = tonumber(found[i + 1])
    local item = redis.call('HGET', K_ITEMS, found[i])
    if item then
      rows[#rows + 1] = found[i]
      rows[#rows + 1] = found[i + 1]
      rows[#rows + 1] = item
      bytes = bytes + #item
    end
    if bytes >= budget and i + 1 < #found then
      more = 1
      break
    end
  end
  if #found >= 2 * limit then more = 1 end
end
local tombs, complete = {}, 1
if ARGV[6] == '1' then
  tombs = redis.call('ZRANGEBYSCORE', K_RETRACTS, ARGV[2], '+inf', 'WITHSCORES')
  local trimmed = tonumber(redis.call('GET', K_TRIM) or '-1') or -1
  if trimmed >= tonumber(ARGV[2]) then complete = 0 end
end
if ARGV[7] ~= '' then redis.call('PUBLISH', ARGV[7], ARGV[8]) end
return {m, rows, tombs, more, complete, last}
)lua"};

enum class chan { publish, edit, retract, position, marker, newfeed, delfeed, conffeed };

std::atomic<std::uint64_t> next_state_id{1};

// A live event kept during a replay.
struct owned_event {
  feed_event::kind_t kind;
  std::string id, item;
  feed_position where;
};

struct tombstone {
  std::string id;
  std::uint64_t seq;
};

}  // namespace

class feed_sub_state : public std::enable_shared_from_this<feed_sub_state> {
 public:
  enum class phase {
    starting,   // subscribe() is registering: events are not ours yet
    gap,        // subscriber disconnected: waiting for `connected`
    syncing,    // catch-up read sent, its marker not seen: live events are covered, drop
    buffering,  // marker seen, replay not finished: keep live events
    live,
  };

  client* cli = nullptr;
  std::weak_ptr<subscriber_impl> alive;  // expires with the client
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

  // ---- catch-up ----
  phase ph = phase::starting;
  bool have_cursor = false;
  std::uint64_t cursor = 0;
  // Retractions delivered since the last publish/edit: their log entries
  // carry the cursor value itself, so a replay must not report them again.
  std::unordered_set<std::string> retracts_at_cursor;
  std::uint64_t round = 0, attempt = 0;
  std::string token;  // marker payload of the current attempt
  bool marker_seen = false, replay_done = false, overflow = false;
  std::deque<owned_event> buffer;
  std::size_t buffer_bytes = 0;
  catch_up_info info;
  bool round_initial = false;
  error_code failed;                         // why the first sync failed
  asio::steady_timer* ready_waiter = nullptr;  // subscribe() waiting for a cursor

  bool current(std::uint64_t r) const { return !stopped && r == round && !alive.expired(); }

  void stop() {
    if (stopped) return;
    stopped = true;
    ++round;
    auto s = std::move(subs);
    subs.clear();
    s.clear();  // removes the callbacks (inert when the client is gone)
    listener.reset();
    buffer.clear();
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

  // A live event: advances the cursor, then reaches the callback.
  void deliver_live(const feed_event& ev) {
    if (opts.catch_up) {
      if (ev.kind == feed_event::publish || ev.kind == feed_event::edit) {
        ++cursor;
        retracts_at_cursor.clear();
      } else if (ev.kind == feed_event::retract) {
        retracts_at_cursor.emplace(ev.id);
      }
    }
    invoke(ev);
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
      default:
        return;
    }
    if (!opts.catch_up) {
      invoke(ev);
      return;
    }
    switch (ph) {
      case phase::live:
        deliver_live(ev);
        break;
      case phase::buffering:
        if (overflow) break;
        buffer_bytes += ev.id.size() + ev.item.size() + 64;
        buffer.push_back(owned_event{ev.kind, std::string(ev.id), std::string(ev.item), ev.where});
        if (buffer.size() > buffer_max_events || buffer_bytes > buffer_max_bytes) {
          overflow = true;  // the next round replays them from the data
          buffer.clear();
          buffer_bytes = 0;
        }
        break;
      default:
        break;  // before the sync point: covered by the catch-up read
    }
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
    if (stopped || ph != phase::syncing || m.payload != token) return;
    marker_seen = true;
    ph = phase::buffering;
    if (replay_done) finish_round();
  }

  void on_subscriber_event(const subscriber_event& ev) {
    if (stopped || ph == phase::starting) return;
    if (ev.kind == subscriber_event::disconnected) {
      ph = phase::gap;
      ++round;  // abandons a catch-up in progress; its progress is in `cursor`
      buffer.clear();
      buffer_bytes = 0;
    } else if (ph != phase::live) {
      // After a gap, or when a round's marker may have been published while
      // the subscriber was away (it is then never seen): a new round.
      start_round();
    }
  }

  // ---- catch-up rounds ----

  void new_attempt() {
    ++attempt;
    token = std::to_string(id) + ":" + std::to_string(round) + ":" + std::to_string(attempt);
    ph = phase::syncing;
    marker_seen = false;
    replay_done = false;
    overflow = false;
    buffer.clear();
    buffer_bytes = 0;
  }

  void start_round() {
    if (stopped) return;
    ++round;
    new_attempt();
    asio::co_spawn(cli->get_executor(), run_round(shared_from_this(), round), asio::detached);
  }

  void finish_round() {
    if (overflow) {  // live events were dropped: fetch them from the data
      start_round();
      return;
    }
    ph = phase::live;
    if (!round_initial) {
      ++stats.catch_ups;
      if (opts.on_catch_up) {
        try {
          opts.on_catch_up(info);
        } catch (...) {
          ++stats.callback_errors;
        }
      }
    }
    auto buf = std::move(buffer);
    buffer.clear();
    buffer_bytes = 0;
    for (auto& e : buf) {
      if (stopped || ph != phase::live) break;
      feed_event ev;
      ev.kind = e.kind;
      ev.feed = name;
      ev.id = e.id;
      ev.item = e.item;
      ev.where = std::move(e.where);
      deliver_live(ev);
    }
  }

  void deliver_row(std::string_view rid, std::uint64_t seq, std::string_view item) {
    if (seq > cursor) {
      cursor = seq;
      retracts_at_cursor.clear();
    }
    ++info.items;
    feed_event ev;
    ev.kind = feed_event::publish;
    ev.feed = name;
    ev.id = rid;
    ev.item = item;
    ev.replayed = true;
    invoke(ev);
  }

  void deliver_tomb(const tombstone& t) {
    if (t.seq == cursor && retracts_at_cursor.contains(t.id)) return;  // seen live
    if (t.seq > cursor) {
      cursor = t.seq;
      retracts_at_cursor.clear();
    }
    retracts_at_cursor.insert(t.id);
    ++info.retractions;
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
    feed_names n(cli->get_config(), name);
    const auto keys = data_keys(n);
    const std::string marker_channel = catchup_channel(cli->instance_id());
    auto backoff = std::chrono::milliseconds(50);
    std::deque<tombstone> tombs;
    std::uint64_t upper = 0;
    std::uint64_t from = 0;
    bool counter_reset = false;

    // First call: the sync point (marker) plus the first batch.
    for (;;) {
      if (!current(r)) co_return;
      round_initial = !have_cursor;
      from = cursor;
      std::vector<std::string> args;
      args.emplace_back(to_string(type));
      args.push_back(std::to_string(from));
      args.emplace_back("");
      args.push_back(std::to_string(round_initial ? 0 : replay_batch_items));
      args.push_back(std::to_string(replay_batch_bytes));
      args.emplace_back(round_initial ? "0" : "1");
      args.push_back(marker_channel);
      args.push_back(token);
      auto [ec, v] = co_await run_script(*cli, catchup_script, keys, args);
      if (!current(r)) co_return;
      if (!ec && (v.elements.size() != 6)) ec = error::unexpected_type;
      if (ec) {
        if (!co_await handle_error(ec, r, backoff)) co_return;
        new_attempt();
        continue;
      }
      error_code pec;
      upper = as_u64(v.elements[0], pec);
      if (round_initial) {
        cursor = upper;
        have_cursor = true;
        replay_done = true;
        wake_waiter();
        if (marker_seen) finish_round();
        co_return;
      }
      if (upper < from) {
        // The counter went backwards: the feed was re-created (or the
        // server lost its data). Replay this incarnation from its start.
        counter_reset = true;
        cursor = 0;
        retracts_at_cursor.clear();
        new_attempt();
        continue;
      }
      info = catch_up_info{};
      info.counter_reset = counter_reset;
      info.from = from;
      info.to = upper;
      info.retractions_complete = v.elements[4].integer == 1;
      const auto& t = v.elements[2].elements;
      for (std::size_t i = 0; i + 1 < t.size(); i += 2)
        tombs.push_back(tombstone{t[i].str, as_u64(t[i + 1], pec)});
      deliver_batch(v.elements[1].elements, tombs);
      bool more = v.elements[3].integer == 1;
      std::uint64_t last = as_u64(v.elements[5], pec);
      if (!more || !current(r)) break;
      // Later batches: no marker, bounded by the sync point's counter.
      for (;;) {
        std::vector<std::string> args2;
        args2.emplace_back(to_string(type));
        args2.push_back(std::to_string(last));
        args2.push_back(std::to_string(upper));
        args2.push_back(std::to_string(replay_batch_items));
        args2.push_back(std::to_string(replay_batch_bytes));
        args2.emplace_back("0");
        args2.emplace_back("");
        args2.emplace_back("");
        auto [ec2, v2] = co_await run_script(*cli, catchup_script, keys, args2);
        if (!current(r)) co_return;
        if (!ec2 && (v2.elements.size() != 6)) ec2 = error::unexpected_type;
        if (ec2) {
          if (!co_await handle_error(ec2, r, backoff)) co_return;
          continue;  // same batch again
        }
        deliver_batch(v2.elements[1].elements, tombs);
        more = v2.elements[3].integer == 1;
        last = as_u64(v2.elements[5], pec);
        if (!more || !current(r)) break;
      }
      break;
    }
    if (!current(r)) co_return;
    while (!tombs.empty() && !stopped) {
      deliver_tomb(tombs.front());
      tombs.pop_front();
    }
    if (upper > cursor) {
      cursor = upper;
      retracts_at_cursor.clear();
    }
    replay_done = true;
    if (marker_seen) finish_round();
  }

  // Delivers one batch of rows, each after the retractions that preceded it.
  void deliver_batch(const std::vector<resp3::value>& rows, std::deque<tombstone>& tombs) {
    error_code pec;
    for (std::size_t i = 0; i + 2 < rows.size() && !stopped; i += 3) {
      std::uint64_t seq = as_u64(rows[i + 1], pec);
      while (!tombs.empty() && tombs.front().seq < seq && !stopped) {
        deliver_tomb(tombs.front());
        tombs.pop_front();
      }
      deliver_row(rows[i].str, seq, rows[i + 2].str);
    }
  }

  // A failed catch-up call: false to give up the round, true to retry
  // (after a pause).
  asio::awaitable<bool> handle_error(error_code ec, std::uint64_t r,
                                     std::chrono::milliseconds& backoff) {
    if (ec == error::feed_not_found || ec == error::wrong_feed_type ||
        ec == error::client_stopped) {
      if (!have_cursor) {
        failed = ec;
        wake_waiter();
        co_return false;
      }
      info = catch_up_info{};
      info.from = info.to = cursor;
      info.error = ec;
      ph = phase::live;  // nothing to replay; keep delivering whatever comes
      buffer.clear();
      buffer_bytes = 0;
      if (opts.on_catch_up) {
        try {
          opts.on_catch_up(info);
        } catch (...) {
          ++stats.callback_errors;
        }
      }
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
    else
      self->on_feed_message(k, m);
  };
}

// Registers `cb` on each channel; on failure removes what was registered.
asio::awaitable<error_code> register_channels(client* c, std::shared_ptr<feed_sub_state> st,
                                              std::vector<std::pair<std::string, chan>> chans) {
  for (auto& [channel, k] : chans) {
    auto callback = feed_callback_for(st, k);
    auto [ec, s] = co_await c->sub().subscribe(channel, std::move(callback), use_nothrow);
    if (ec) co_return ec;
    st->subs.push_back(std::move(s));
  }
  co_return error_code{};
}

// Clears the state's pointer to the waiting timer when the frame goes.
struct waiter_guard {
  feed_sub_state* st;
  ~waiter_guard() { st->ready_waiter = nullptr; }
};

asio::awaitable<std::tuple<error_code, feed_subscription>> subscribe_op(
    client* c, std::shared_ptr<feed_sub_state> st) {
  const auto& cfg = c->get_config();
  if (auto ec = validate_name(cfg, st->name)) co_return std::tuple{ec, feed_subscription{}};
  feed_names n(cfg, st->name);
  {
    request req;
    push_type_check(req, n);
    auto [ec, resp] = co_await exec_checked(*c, req, st->type);
    if (ec) co_return std::tuple{ec, feed_subscription{}};
  }
  if (st->opts.catch_up) {
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
  if (st->opts.catch_up) chans.emplace_back(catchup_channel(c->instance_id()), chan::marker);
  if (auto ec = co_await register_channels(c, st, std::move(chans))) {
    st->stop();
    co_return std::tuple{ec, feed_subscription{}};
  }
  if (!st->opts.catch_up) {
    st->ph = feed_sub_state::phase::live;
    co_return std::tuple{error_code{}, feed_subscription(st)};
  }
  if (st->opts.resume_from) {
    st->cursor = *st->opts.resume_from;
    st->have_cursor = true;
  }
  st->start_round();
  if (!st->have_cursor && !st->failed) {
    asio::steady_timer ready(c->get_executor(), asio::steady_timer::time_point::max());
    st->ready_waiter = &ready;
    waiter_guard guard{st.get()};
    co_await ready.async_wait(use_nothrow);
  }
  if (!st->have_cursor) {
    error_code ec = st->failed ? st->failed : error_code(asio::error::operation_aborted);
    st->stop();
    co_return std::tuple{ec, feed_subscription{}};
  }
  co_return std::tuple{error_code{}, feed_subscription(st)};
}

asio::awaitable<std::tuple<error_code, feed_subscription>> subscribe_admin_op(
    client* c, std::shared_ptr<feed_sub_state> st) {
  std::vector<std::pair<std::string, chan>> chans;
  chans.emplace_back(std::string(newfeed_channel), chan::newfeed);
  chans.emplace_back(std::string(delfeed_channel), chan::delfeed);
  chans.emplace_back(std::string(conffeed_channel), chan::conffeed);
  if (auto ec = co_await register_channels(c, st, std::move(chans))) {
    st->stop();
    co_return std::tuple{ec, feed_subscription{}};
  }
  st->ph = feed_sub_state::phase::live;
  co_return std::tuple{error_code{}, feed_subscription(st)};
}

}  // namespace

void start_feed_subscribe(client& c, std::string name, feed_type type, feed_callback cb,
                          feed_subscribe_options opts, feed_subscribe_handler h) {
  auto st = std::make_shared<feed_sub_state>();
  st->cli = &c;
  st->alive = c.sub().impl();
  st->name = std::move(name);
  st->type = type;
  st->cb = std::move(cb);
  st->opts = std::move(opts);
  spawn_op(c.get_executor(), subscribe_op(&c, std::move(st)), std::move(h));
}

void start_subscribe_feed_admin(client& c, feed_admin_callback cb, feed_subscribe_handler h) {
  auto st = std::make_shared<feed_sub_state>();
  st->cli = &c;
  st->alive = c.sub().impl();
  st->admin_cb = std::move(cb);
  spawn_op(c.get_executor(), subscribe_admin_op(&c, std::move(st)), std::move(h));
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
  return state_ && !state_->stopped && !state_->alive.expired();
}

std::uint64_t feed_subscription::cursor() const noexcept {
  return state_ && state_->opts.catch_up ? state_->cursor : 0;
}

feed_subscription_stats feed_subscription::stats() const noexcept {
  return state_ ? state_->stats : feed_subscription_stats{};
}

}  // namespace thoonk
