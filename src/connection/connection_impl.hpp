// The I/O layer of a connection: transport (stream.hpp), handshake, reader,
// writer, health check and reconnect loop. The bookkeeping lives in request_queue and the
// protocol in resp3::parser; this file only moves bytes and runs coroutines.
#pragma once

#include "connection/backoff.hpp"
#include "connection/failover.hpp"
#include "connection/request_queue.hpp"
#include "connection/stream.hpp"
#include "detail/executor_util.hpp"

#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/resp3/parser.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace thoonk::detail {

using connect_handler = boost::asio::any_completion_handler<void(boost::system::error_code)>;

class connection_impl : public std::enable_shared_from_this<connection_impl> {
 public:
  using executor_type = boost::asio::any_io_executor;

  connection_impl(executor_type ex, config cfg);
  ~connection_impl();

  const executor_type& executor() const noexcept { return executor_; }
  const config& cfg() const noexcept { return cfg_; }

  // ---- operations (call on the executor, or through the public class) -------
  void async_connect(connect_handler h);
  void async_exec(const request& req, exec_options opts, exec_handler h);
  /// Same as async_exec for a request already serialized (off-thread path).
  void async_exec_bytes(std::string payload, std::size_t commands, std::size_t expected,
                        exec_options opts, exec_handler h);
  void stop();

  bool connected() const noexcept { return connected_; }
  /// The transport under this connection (what it runs over, whether open).
  const stream& transport() const noexcept { return stream_; }
  int protocol() const noexcept { return connected_ ? protocol_ : 0; }
  const connection_stats& stats() const noexcept { return stats_; }
  /// While no connection is up because the last setup was refused (wrong
  /// password, SELECT refused, NOPERM): the error new requests fail with.
  /// Empty otherwise (requests wait for the connection). See
  /// reconnect_policy.
  boost::system::error_code refusal() const noexcept {
    return connected_ || !running_ ? boost::system::error_code{} : policy_.refusal();
  }
  void add_listener(std::function<void(const connection_event&)> l) {
    listeners_.push_back(std::move(l));
  }

  // ---- hooks for the subscriber --------------------------------------------
  /// Out-of-band messages (RESP3 pushes; in subscriber mode also RESP2
  /// pub/sub arrays). Runs inline in the reader.
  std::function<void(resp3::value&&)> on_push;
  /// Commands appended to the handshake on every (re)connect, written before
  /// any queued request (the subscriber restores its subscriptions here).
  std::function<void(request&)> on_setup;
  /// Subscriber mode: an error reply that no request waits for. SUBSCRIBE
  /// is confirmed by a push but refused by an ordinary error reply (for
  /// example -NOPERM under ACLs); such a reply is the subscriber's, not a
  /// protocol desync.
  std::function<void(resp3::value&&)> on_unmatched_error;
  /// RESP2 pub/sub arrays ("message", "subscribe", ...) are pushes.
  bool subscriber_mode = false;

 private:
  template <class T>
  using awaitable = boost::asio::awaitable<T>;
  using error_code = boost::system::error_code;

  void enqueue(std::string_view payload, std::size_t commands, std::size_t expected,
               exec_options opts, exec_handler h);
  void cancel_request(std::uint64_t seq, error_code ec);
  void complete(std::vector<completion>& done);
  // A reply said its request was not executed (READONLY, LOADING,
  // MASTERDOWN): queues it again and returns true, within the retry budget.
  bool send_again(completion& c);
  void finish_connect_waiters(error_code ec);
  void emit(connection_event::kind_t kind, error_code ec, bool setup_refused = false,
            const std::string& server_message = {});
  void ensure_running();
  void wake_writer();

  awaitable<void> run();
  awaitable<error_code> connect_once();
  // One connect + handshake, bounded by connect_timeout; the error as the
  // transport names it (stream::setup_error).
  awaitable<error_code> set_up(const config& attempt);
  awaitable<error_code> handshake();
  awaitable<error_code> write_all(const std::string& bytes);
  awaitable<error_code> read_reply(resp3::value& out);
  /// Reads more bytes into the buffer (compacting or growing it first).
  awaitable<error_code> read_more();
  awaitable<error_code> reader();
  awaitable<error_code> writer();
  awaitable<error_code> health();

  // Parses complete replies already in the read buffer. `dispatch` true:
  // replies go to requests and pushes to on_push; false: stop at the first
  // value and return it through `out` (handshake).
  error_code parse_buffered(bool dispatch, resp3::value* out, bool* got);
  bool is_push(const resp3::value& v) const;
  void reset_read_buffer();

  executor_type executor_;
  config cfg_;
  stream stream_;  // the transport (stream.hpp): TCP or Unix today, TLS next
  resp3::parser parser_;
  std::vector<char> rbuf_;
  std::size_t rbeg_ = 0, rend_ = 0;

  request_queue queue_;
  std::vector<completion> done_;  // scratch, reused to avoid allocations
  std::vector<std::pair<std::uint64_t, handler_box<void(boost::system::error_code)>>>
      connect_waiters_;
  std::uint64_t next_waiter_id_ = 1;
  std::vector<std::function<void(const connection_event&)>> listeners_;

  boost::asio::steady_timer writer_wake_;
  boost::asio::steady_timer health_timer_;
  boost::asio::steady_timer backoff_timer_;
  reconnect_policy policy_;
  failover failover_;  // which address; which replies mean "send again"

  bool running_ = false;
  bool stopped_ = false;
  bool connected_ = false;
  bool writer_idle_ = false;
  // A READONLY reply: this server is a replica now. Nothing more is written;
  // once every written request has its reply, the connection is replaced
  // (error::not_primary) and the requests sent again reach the primary.
  bool draining_ = false;
  // LOADING / MASTERDOWN: the writer sends nothing before this time.
  std::chrono::steady_clock::time_point hold_until_{};
  bool ever_connected_ = false;
  // Set by handshake(): the last attempt's setup was refused (not transient),
  // and the server's text for it.
  bool attempt_refused_ = false;
  std::string attempt_message_;
  int protocol_ = 0;
  std::chrono::steady_clock::time_point last_read_{};
  std::chrono::steady_clock::time_point last_progress_{};
  connection_stats stats_;
};

}  // namespace thoonk::detail
