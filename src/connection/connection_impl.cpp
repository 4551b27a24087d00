#include "connection/connection_impl.hpp"

#include "connection/handshake.hpp"

#include "detail/executor_util.hpp"
#include "detail/use_nothrow.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstring>
#include <string_view>

namespace thoonk::detail {

namespace asio = boost::asio;
using namespace asio::experimental::awaitable_operators;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

namespace {

constexpr std::size_t read_chunk = 64 * 1024;

// The first element of a RESP2 array that is a pub/sub event.
bool is_pubsub_kind(std::string_view k) {
  return k == "message" || k == "pmessage" || k == "smessage" || k == "subscribe" ||
         k == "psubscribe" || k == "ssubscribe" || k == "unsubscribe" || k == "punsubscribe" ||
         k == "sunsubscribe";
}

}  // namespace

connection_impl::connection_impl(executor_type ex, config cfg)
    : executor_(std::move(ex)),
      cfg_(std::move(cfg)),
      stream_(executor_),
      parser_(cfg_.limits),
      writer_wake_(executor_),
      health_timer_(executor_),
      backoff_timer_(executor_),
      policy_(cfg_.reconnect_min_delay, cfg_.reconnect_max_delay),
      failover_(cfg_) {}

connection_impl::~connection_impl() = default;

// ---------------------------------------------------------------------------
// Operations
// ---------------------------------------------------------------------------

void connection_impl::ensure_running() {
  if (running_ || stopped_) return;
  running_ = true;
  asio::co_spawn(executor_, run(), asio::detached);
}

void connection_impl::async_connect(connect_handler h) {
  if (stopped_) {
    complete_handler(std::move(h), executor_, error_code(error::client_stopped));
    return;
  }
  if (connected_) {
    complete_handler(std::move(h), executor_, error_code{});
    return;
  }
  auto slot = asio::get_associated_cancellation_slot(h);
  auto id = next_waiter_id_++;
  connect_waiters_.emplace_back(id, std::move(h));
  if (slot.is_connected()) {
    // Cancelling the wait takes this waiter out; the connect loop carries on.
    slot.assign([weak = weak_from_this(), id](asio::cancellation_type) {
      auto self = weak.lock();
      if (!self) return;
      auto& ws = self->connect_waiters_;
      for (auto it = ws.begin(); it != ws.end(); ++it) {
        if (it->first != id) continue;
        auto h2 = it->second.take();
        ws.erase(it);
        // Inside the slot's handler: complete through post, never inline.
        post_handler(std::move(h2), self->executor_, error_code(asio::error::operation_aborted));
        return;
      }
    });
  }
  ensure_running();
}

void connection_impl::async_exec(const request& req, exec_options opts, exec_handler h) {
  enqueue(req.payload(), req.commands(), req.expected_replies(), opts, std::move(h));
}

void connection_impl::async_exec_bytes(std::string payload, std::size_t commands,
                                       std::size_t expected, exec_options opts, exec_handler h) {
  enqueue(payload, commands, expected, opts, std::move(h));
}

void connection_impl::enqueue(std::string_view payload, std::size_t commands, std::size_t expected,
                              exec_options opts, exec_handler h) {
  // While the server refuses our setup (wrong password...), waiting would
  // mean waiting until someone fixes the config or the ACL: fail at once.
  const error_code refused = refusal();
  if (stopped_ || (!connected_ && !opts.wait_for_connection) || refused) {
    if (h)
      complete_handler(std::move(h), executor_,
                       stopped_  ? error_code(error::client_stopped)
                       : refused ? refused
                                 : error_code(error::not_connected),
                       response{});
    return;
  }
  // config::request_timeout bounds every request that sets no timeout of
  // its own, the library's typed operations included.
  if (opts.timeout.count() <= 0) opts.timeout = cfg_.request_timeout;
  ++stats_.requests;
  stats_.commands += commands;
  // An empty handler (internal fire-and-forget request) has no slot.
  auto slot = h ? asio::get_associated_cancellation_slot(h) : asio::cancellation_slot{};
  std::shared_ptr<void> guard;
  std::shared_ptr<asio::steady_timer> timer;
  if (opts.timeout.count() > 0) {
    timer = std::make_shared<asio::steady_timer>(executor_, opts.timeout);
    guard = timer;
  }
  // Keeping the bytes lets a request refused with READONLY, LOADING or
  // MASTERDOWN (not executed) be sent again. The subscriber's commands are
  // answered by pushes, never by those.
  const bool retain = !subscriber_mode && cfg_.unavailable_retries > 0;
  auto seq = queue_.push(payload, expected, std::move(h), opts.wait_for_connection,
                         std::move(guard), retain);
  if (timer) {
    timer->async_wait([weak = weak_from_this(), seq](error_code ec) {
      if (ec) return;  // the request completed first and the timer was destroyed
      if (auto self = weak.lock()) self->cancel_request(seq, error::request_timeout);
    });
  }
  if (slot.is_connected()) {
    // The slot's handler lives until the request completes (complete_handler
    // clears it first), and every request completes before this object is
    // destroyed, so the raw pointer cannot dangle.
    slot.assign([self = this, seq](asio::cancellation_type) {
      self->cancel_request(seq, asio::error::operation_aborted);
    });
  }
  ensure_running();
  wake_writer();
}

void connection_impl::wake_writer() {
  if (connected_ && writer_idle_) {
    writer_idle_ = false;
    writer_wake_.cancel();
  }
}

void connection_impl::cancel_request(std::uint64_t seq, error_code ec) {
  std::vector<completion> out;
  queue_.cancel(seq, ec, out);
  // We may be inside a cancellation slot's handler: never complete inline.
  for (auto& c : out) post_handler(c.handler.take(), executor_, c.ec, std::move(c.replies));
}

void connection_impl::complete(std::vector<completion>& done) {
  for (auto& c : done) {
    if (c.retained && send_again(c)) continue;
    complete_handler(c.handler.take(), executor_, c.ec, std::move(c.replies));
  }
  done.clear();
}

bool connection_impl::send_again(completion& c) {
  const auto why = failover::classify(c.replies);
  if (why == unavailable::none || c.retained->retries >= failover_.max_retries() || stopped_)
    return false;
  if (why == unavailable::readonly) {
    // The server was demoted: stop writing, let the written requests
    // answer, then reconnect (reader() ends with not_primary) and look for
    // the primary among the configured addresses.
    draining_ = true;
  } else {
    const auto until = clock_type::now() + failover_.retry_delay(c.retained->retries);
    if (until > hold_until_) hold_until_ = until;
  }
  queue_.push_again(std::move(*c.retained), c.handler.take());
  // An idle writer must see the hold (or the drain) rather than sleep on.
  if (writer_idle_) {
    writer_idle_ = false;
    writer_wake_.cancel();
  }
  return true;
}

void connection_impl::finish_connect_waiters(error_code ec) {
  auto waiters = std::move(connect_waiters_);
  connect_waiters_.clear();
  for (auto& w : waiters) complete_handler(w.second.take(), executor_, ec);
}

void connection_impl::emit(connection_event::kind_t kind, error_code ec, bool setup_refused,
                           const std::string& server_message) {
  connection_event ev{};
  ev.kind = kind;
  ev.error = ec;
  ev.protocol = protocol_;
  ev.setup_refused = setup_refused;
  ev.server_message = server_message;
  // A listener may add listeners; iterate over a snapshot of the count.
  for (std::size_t i = 0, n = listeners_.size(); i < n; ++i) {
    try {
      listeners_[i](ev);
    } catch (...) {
      // A listener's exception must not kill the connection loop.
    }
  }
}

void connection_impl::stop() {
  if (stopped_) return;
  stopped_ = true;
  stream_.close();
  writer_wake_.cancel();
  health_timer_.cancel();
  backoff_timer_.cancel();
  std::vector<completion> out;
  queue_.fail_all(error::client_stopped, out);
  complete(out);
  finish_connect_waiters(error::client_stopped);
}

// ---------------------------------------------------------------------------
// Run loop
// ---------------------------------------------------------------------------

asio::awaitable<void> connection_impl::run() {
  auto self = shared_from_this();  // keep alive while the loop runs
  while (!stopped_) {
    error_code ec = co_await connect_once();
    if (stopped_) break;
    if (!ec) {
      draining_ = false;
      hold_until_ = {};
      failover_.on_connected();
      connected_ = true;
      policy_.on_connected();
      ++stats_.connects;
      if (ever_connected_) ++stats_.reconnects;
      ever_connected_ = true;
      last_read_ = last_progress_ = clock_type::now();
      finish_connect_waiters({});
      emit(connection_event::connected, {});
      auto result = co_await (reader() || writer() || health());
      std::visit([&](error_code e) { ec = e; }, result);
      connected_ = false;
      writer_idle_ = false;
      stream_.close();
      if (!stopped_) {
        // A reply the parser rejected belongs to the oldest written request.
        queue_.on_disconnect(done_, resp3::is_parse_error(ec) ? ec : error_code{});
        for (const auto& c : done_) stats_.unknown_outcomes += c.ec == error::unknown_outcome;
        complete(done_);
      }
      emit(connection_event::disconnected, ec);
      if (ec == error::not_primary) failover_.on_not_primary();
      else failover_.on_lost();
      if (stopped_ || !cfg_.reconnect) break;
      // Demoted: the primary is elsewhere already, no reason to wait long.
      backoff_timer_.expires_after(ec == error::not_primary ? cfg_.reconnect_min_delay
                                                            : policy_.on_lost());
    } else {
      stream_.close();
      if (!failover_.on_attempt_failed()) {
        // Another configured address is left in this round (a replica
        // answered, or one server is down): try it at once. Waiters and
        // requests hear of a failure only when every address failed.
        emit(connection_event::connect_failed, ec, attempt_refused_, attempt_message_);
        continue;
      }
      const bool refused = attempt_refused_;
      // From here on, new requests see the refusal (refusal()).
      const auto delay = policy_.on_failed(ec, refused);
      // Listeners first, completions last: a completion may resume the
      // caller inline, and the caller may then destroy what listeners use.
      emit(connection_event::connect_failed, ec, refused, attempt_message_);
      // Decision (docs/decisions.md, "Connection"): a refused setup fails
      // every queued request, those that asked to wait for a connection
      // included, because the refusal will not go away by itself; a
      // transient failure only fails those that asked not to wait.
      if (refused) queue_.fail_all(ec, done_);
      else queue_.fail_non_waiting(done_);
      complete(done_);
      finish_connect_waiters(ec);
      if (stopped_ || !cfg_.reconnect) break;
      backoff_timer_.expires_after(delay);
    }
    co_await backoff_timer_.async_wait(use_nothrow);
  }
  running_ = false;
  if (!stopped_) {
    // No reconnect: nothing will ever send what is still queued.
    queue_.fail_all(error::not_connected, done_);
    complete(done_);
  }
}

asio::awaitable<error_code> connection_impl::connect_once() {
  attempt_refused_ = false;  // only a refused handshake sets it
  attempt_message_.clear();
  // With several addresses, each attempt goes to the one failover_ names.
  const config attempt = failover_.attempt_config(cfg_);
  error_code ec = co_await set_up(attempt);
  if (detail::stream::needs_confirming(ec)) {
    // A refusal fails every queued request and stops a job runner, but a
    // reset or silence during the setup is also what a proxy or load
    // balancer restarting, or a server dropping its clients, does to one
    // connection. A TLS port (or a TLS server refusing this client) answers
    // a new connection the same way: ask it once more, at once.
    ++stats_.setup_retries;
    ec = co_await set_up(attempt);
  }
  if (detail::stream::is_refusal(ec)) {
    attempt_refused_ = true;
    attempt_message_ = stream_.failure_detail();
  }
  co_return ec;
}

asio::awaitable<error_code> connection_impl::set_up(const config& attempt) {
  asio::steady_timer deadline(executor_, cfg_.connect_timeout);
  reset_read_buffer();
  parser_.reset();
  const auto bytes_before = stats_.bytes_read;
  auto r = co_await (stream_.connect(attempt) || deadline.async_wait(use_nothrow));
  error_code ec = r.index() == 1 ? error_code(error::connect_timeout) : std::get<0>(r);
  if (!ec) {
    auto r2 = co_await (handshake() || deadline.async_wait(use_nothrow));
    ec = r2.index() == 1 ? error_code(error::connect_timeout) : std::get<0>(r2);
  }
  // The transport names its own failures (TLS: a rejected certificate, a
  // plain port, a refused client certificate) and says why; like a refused
  // AUTH they will not go away by retrying soon.
  co_return stream_.setup_error(ec, stats_.bytes_read != bytes_before);
}

asio::awaitable<error_code> connection_impl::write_all(const std::string& bytes) {
  auto [ec, n] = co_await stream_.write(asio::buffer(bytes));
  stats_.bytes_written += n;
  ++stats_.writes;
  co_return ec;
}

asio::awaitable<error_code> connection_impl::handshake() {
  // The protocol decisions (what to send, what each reply means) live in
  // detail::handshake; this only moves its batches and replies.
  detail::handshake hs(cfg_, failover_.checks_role());
  protocol_ = hs.protocol();
  bool name_reported = false;
  request batch;
  resp3::value reply;
  while (hs.next_batch(batch)) {
    // Replies to on_setup's commands (appended to the last batch) are not
    // awaited here: they flow through the reader like any reply, so the hook
    // must only add commands that expect none (SUBSCRIBE family).
    if (hs.final_batch() && on_setup) on_setup(batch);
    if (batch.empty()) continue;
    if (auto ec = co_await write_all(batch.payload())) co_return ec;
    while (hs.replies_due() > 0) {
      if (auto ec = co_await read_reply(reply)) co_return ec;
      hs.on_reply(reply);
      // Set before the next read: RESP2 pub/sub arrays are told apart from
      // replies by the protocol (is_push).
      protocol_ = hs.protocol();
    }
    if (hs.name_refused() && !name_reported) {
      // Not fatal: the name only labels the connection in CLIENT LIST. An
      // ACL user without +client gets here on every RESP2 (re)connect.
      name_reported = true;
      ++stats_.client_name_refusals;
      emit(connection_event::client_name_refused, hs.name_error(), false, hs.server_message());
    }
  }
  if (hs.error()) {
    attempt_refused_ = hs.refused();
    attempt_message_ = hs.server_message();
  }
  co_return hs.error();
}

void connection_impl::reset_read_buffer() {
  rbeg_ = rend_ = 0;
  if (rbuf_.size() < read_chunk) rbuf_.resize(read_chunk);
}

asio::awaitable<error_code> connection_impl::read_reply(resp3::value& out) {
  for (;;) {
    bool got = false;
    if (auto ec = parse_buffered(false, &out, &got)) co_return ec;
    if (got) co_return error_code{};
    if (auto ec = co_await read_more()) co_return ec;
  }
}

asio::awaitable<error_code> connection_impl::read_more() {
  if (rbeg_ == rend_ && rbuf_.size() > 4 * read_chunk) {
    // A large reply is gone: give its memory back.
    rbuf_.resize(read_chunk);
    rbuf_.shrink_to_fit();
    rbeg_ = rend_ = 0;
  }
  // Make room: compact when the free tail is small, grow when a single
  // reply needs more than the buffer holds.
  if (rbuf_.size() - rend_ < read_chunk / 4) {
    if (rbeg_ > 0) {
      std::memmove(rbuf_.data(), rbuf_.data() + rbeg_, rend_ - rbeg_);
      rend_ -= rbeg_;
      rbeg_ = 0;
    }
    if (rbuf_.size() - rend_ < read_chunk / 4) rbuf_.resize(rbuf_.size() * 2);
  }
  auto [ec, n] =
      co_await stream_.read_some(asio::buffer(rbuf_.data() + rend_, rbuf_.size() - rend_));
  if (ec) co_return ec;
  rend_ += n;
  stats_.bytes_read += n;
  last_read_ = last_progress_ = clock_type::now();
  co_return error_code{};
}

bool connection_impl::is_push(const resp3::value& v) const {
  if (v.type == resp3::type::push) return true;
  // RESP2 has no push type: on the subscriber connection, pub/sub events
  // arrive as arrays whose first element names the event. (RESP2 PING in
  // subscribe mode answers ["pong", ""], which stays a reply.)
  return subscriber_mode && protocol_ == 2 && v.type == resp3::type::array && !v.elements.empty() &&
         v.elements.front().is_string() && is_pubsub_kind(v.elements.front().str);
}

error_code connection_impl::parse_buffered(bool dispatch, resp3::value* out, bool* got) {
  error_code ec;
  while (rbeg_ < rend_) {
    // parser_limits::max_reply_memory bounds the replies the connection
    // holds, not each reply alone: those kept for the oldest request, which
    // waits for more, count against the reply being parsed.
    parser_.set_held_memory(queue_.held_memory());
    std::size_t n = parser_.consume(std::string_view(rbuf_.data() + rbeg_, rend_ - rbeg_), ec);
    rbeg_ += n;
    if (ec) return ec;
    if (!parser_.ready()) break;
    const std::size_t memory = parser_.ready_memory();
    resp3::value v = parser_.take();
    if (is_push(v)) {
      ++stats_.pushes;
      if (on_push) on_push(std::move(v));
      continue;
    }
    if (!dispatch) {
      *out = std::move(v);
      *got = true;
      return {};
    }
    ++stats_.replies;
    if (subscriber_mode && v.is_error() && on_unmatched_error) {
      // Requests that expect nothing (SUBSCRIBE) may still sit in front.
      // Their completions run first: the subscriber learns from them what
      // was written, which tells it whose refusal this is.
      queue_.on_batch_written(done_);
      complete(done_);
      if (queue_.in_flight() == 0) {
        on_unmatched_error(std::move(v));
        continue;
      }
    }
    if (!queue_.on_reply(std::move(v), done_, memory)) return error::unexpected_reply;
    if (!done_.empty()) {
      // A finished request gets its replies before the next reply is
      // parsed: replies the connection no longer counts must not pile up
      // here while a large read buffer is parsed.
      complete(done_);
      if (stopped_) return error::client_stopped;
    }
  }
  if (rbeg_ == rend_) rbeg_ = rend_ = 0;
  return {};
}

asio::awaitable<error_code> connection_impl::reader() {
  for (;;) {
    error_code ec = parse_buffered(true, nullptr, nullptr);
    if (!done_.empty()) {
      last_progress_ = clock_type::now();
      complete(done_);
    }
    if (ec) co_return ec;
    if (draining_ && queue_.in_flight() == 0) co_return error::not_primary;
    if (stopped_) co_return error::client_stopped;
    if (auto rec = co_await read_more()) co_return rec;
  }
}

asio::awaitable<error_code> connection_impl::writer() {
  for (;;) {
    if (draining_ || clock_type::now() < hold_until_) {
      // Hold the queued requests: the reader ends the connection once a
      // draining one is quiet; a hold ends at hold_until_. enqueue() must
      // not cut the wait short (writer_idle_ stays false).
      writer_wake_.expires_at(draining_ ? clock_type::time_point::max() : hold_until_);
      co_await writer_wake_.async_wait(use_nothrow);
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none) co_return asio::error::operation_aborted;
      if (stopped_) co_return error::client_stopped;
      continue;
    }
    if (!queue_.has_unwritten()) {
      writer_idle_ = true;
      writer_wake_.expires_at(clock_type::time_point::max());
      co_await writer_wake_.async_wait(use_nothrow);
      writer_idle_ = false;
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none) co_return asio::error::operation_aborted;
      if (stopped_) co_return error::client_stopped;
      continue;
    }
    // Nothing was awaited until now: the silence clock starts with this write.
    if (queue_.in_flight() == 0) last_progress_ = clock_type::now();
    const std::string& batch = queue_.take_batch();
    if (auto ec = co_await write_all(batch)) co_return ec;
    queue_.on_batch_written(done_);
    if (!done_.empty()) complete(done_);
  }
}

asio::awaitable<error_code> connection_impl::health() {
  const auto interval = cfg_.health_check_interval;
  if (interval.count() <= 0) {
    health_timer_.expires_at(clock_type::time_point::max());
    co_await health_timer_.async_wait(use_nothrow);
    co_return asio::error::operation_aborted;
  }
  const auto timeout =
      cfg_.health_check_timeout.count() > 0 ? cfg_.health_check_timeout : 3 * interval;
  // Tick often enough to notice the deadline with ~25% precision.
  const auto tick = std::max(std::chrono::milliseconds(5), std::min(interval, timeout / 4));
  for (;;) {
    health_timer_.expires_after(tick);
    auto [ec] = co_await health_timer_.async_wait(use_nothrow);
    if (ec || stopped_) co_return asio::error::operation_aborted;
    auto now = clock_type::now();
    if (queue_.in_flight() > 0 && now - last_progress_ >= timeout)
      co_return error::health_check_timeout;
    if (now - last_read_ >= interval && queue_.in_flight() == 0 && !queue_.has_unwritten()) {
      request ping;
      ping.push("PING");
      // No handler: the reply only proves the server is alive.
      queue_.push(ping.payload(), 1, exec_handler{}, false);
      wake_writer();
    }
  }
}

}  // namespace thoonk::detail
