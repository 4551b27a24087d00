// A second connection in pub/sub mode that fans messages out to callbacks.
#pragma once

#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/export.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace thoonk {

namespace detail {
class subscriber_impl;
struct impl_access;
}  // namespace detail

/// One pub/sub message. The views are valid only during the callback.
struct THOONK_API message {
  std::string_view channel;  ///< the channel the message came on (valid during the callback only)
  std::string_view payload;  ///< the message (valid during the callback only)
  std::string_view pattern;  ///< the matching pattern for psubscribe callbacks, else empty
};

/// What happened to the subscriber connection.
struct THOONK_API subscriber_event {
  /// What happened.
  enum kind_t {
    /// Connected and every registered channel and pattern is subscribed on
    /// the server (sent after the first connect and after each reconnect).
    /// Messages published from now on are delivered; those published while
    /// disconnected were missed (feeds replay them from their data).
    connected,
    /// The connection was lost; messages are missed until `connected`.
    disconnected,
  } kind;                           ///< which event this is
  boost::system::error_code error;  ///< why it was lost (disconnected only)
};

/// RAII handle of a callback registration. Destroying it (or reset())
/// removes the callback; when the last callback of a channel or pattern
/// goes, the subscriber sends UNSUBSCRIBE/PUNSUBSCRIBE. Movable, not
/// copyable. Outliving the subscriber is safe (it then does nothing).
/// Destroy or reset it on the subscriber's executor.
class THOONK_API subscription {
 public:
  subscription() = default;
  subscription(subscription&& o) noexcept;  ///< moves the subscription; `o` becomes empty
  /// Unsubscribes this one, then takes over `o`'s.
  subscription& operator=(subscription&& o) noexcept;
  subscription(const subscription&) = delete;
  subscription& operator=(const subscription&) = delete;
  ~subscription();

  /// Unsubscribes now: no callback after it returns. Call it on the
  /// subscriber's executor.
  void reset();
  /// True until reset(), or until the subscriber is gone.
  bool active() const noexcept { return !owner_.expired() && id_ != 0; }

 private:
  friend class detail::subscriber_impl;
  friend class subscriber;
  enum class kind : std::uint8_t { channel, pattern, listener, shard };
  subscription(std::weak_ptr<detail::subscriber_impl> owner, kind k, std::string name,
               std::uint64_t id)
      : owner_(std::move(owner)), kind_(k), name_(std::move(name)), id_(id) {}

  std::weak_ptr<detail::subscriber_impl> owner_;
  kind kind_ = kind::channel;
  std::string name_;
  std::uint64_t id_ = 0;
};

/// Counters of the subscriber connection; monotonic over its life.
struct THOONK_API subscriber_stats {
  std::uint64_t messages = 0;         ///< message/pmessage pushes received
  std::uint64_t deliveries = 0;       ///< callback invocations
  std::uint64_t callback_errors = 0;  ///< callbacks that threw
  /// Connections open for shard channels (ssubscribe): one per node that
  /// serves a subscribed shard channel.
  std::uint64_t shard_connections = 0;
  connection_stats connection;  ///< the subscriber's own connection
};

/// Subscribes to channels and patterns on its own connection and invokes the
/// registered callbacks for every message.
///
/// **Delivery**: callbacks run inline on the subscriber's executor, in the
/// order messages arrive; several callbacks on one channel run in
/// registration order. A callback that throws is counted and reported to the
/// error handler; the others still run and the subscriber keeps going.
///
/// **Slow consumers**: messages are never queued inside the library. While a
/// callback runs, the subscriber does not read the socket, so a slow
/// consumer pushes back on TCP and then on the server, whose
/// `client-output-buffer-limit pubsub` disconnects it. That disconnect is
/// reported (subscriber_event::disconnected), the subscriber reconnects and
/// restores every subscription, and feeds that asked for catch-up replay
/// what was missed. Memory in this process stays bounded by the read buffer.
///
/// **Threading and lifetime**: as thoonk::connection.
class THOONK_API subscriber {
 public:
  /// The executor everything of the subscriber runs on.
  using executor_type = boost::asio::any_io_executor;
  /// Channel, on the executor.
  using callback = std::function<void(const message&)>;  ///< receives each message of a subscribed

  /// Makes the subscriber without I/O: async_connect() connects.
  subscriber(executor_type ex, config cfg);
  ~subscriber();
  subscriber(const subscriber&) = delete;
  subscriber& operator=(const subscriber&) = delete;

  executor_type get_executor() const noexcept;  ///< the executor given at construction

  /// As connection::async_connect. Completion signature `void(error_code)`.
  /// Cancellation: completes with operation_aborted; nothing stays registered.
  /// Thread safety: start it on the subscriber's executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_connect(CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token),
        [impl = impl_](auto h) { start_connect(impl, std::move(h)); });
  }
  /// Deprecated: async_connect.
  template <class CompletionToken>
  [[deprecated("use async_connect")]] auto connect(CompletionToken&& token) {
    return async_connect(std::forward<CompletionToken>(token));
  }

  /// Registers `cb` for messages on `channel`.
  ///
  /// Completion signature `void(error_code, subscription)`. Completes once
  /// the server has confirmed the subscription (at once when the channel
  /// was already subscribed), so every message published after completion
  /// is delivered. Connects first if needed. Errors: error::client_stopped;
  /// error::subscribe_refused (ACL channel permissions); the setup's own
  /// error (auth_failed, handshake_failed, no_permission) when the
  /// connection's setup was refused, instead of waiting for a reconnect that
  /// would be refused too; operation_aborted on cancellation. On any error
  /// nothing stays registered.
  /// Thread safety: start it on the subscriber's executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_subscribe(std::string channel, callback cb, CompletionToken&& token = {}) {
    return initiate_subscribe(false, std::move(channel), std::move(cb),
                              std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_subscribe.
  template <class CompletionToken>
  [[deprecated("use async_subscribe")]] auto subscribe(std::string channel, callback cb,
                                                       CompletionToken&& token) {
    return async_subscribe(std::move(channel), std::move(cb), std::forward<CompletionToken>(token));
  }

  /// As async_subscribe() for a glob-style pattern (PSUBSCRIBE).
  /// Completion `void(error_code, subscription)`; errors as async_subscribe().
  /// Cancellation: completes with operation_aborted; nothing stays registered.
  /// Thread safety: start it on the subscriber's executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_psubscribe(std::string pattern, callback cb, CompletionToken&& token = {}) {
    return initiate_subscribe(true, std::move(pattern), std::move(cb),
                              std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_psubscribe.
  template <class CompletionToken>
  [[deprecated("use async_psubscribe")]] auto psubscribe(std::string pattern, callback cb,
                                                         CompletionToken&& token) {
    return async_psubscribe(std::move(pattern), std::move(cb),
                            std::forward<CompletionToken>(token));
  }

  /// As async_subscribe() for a shard channel (SSUBSCRIBE, Redis 7.0; messages
  /// sent with SPUBLISH). It goes over a connection of its own to the node
  /// that serves the channel's hash slot: in cluster mode the primary the
  /// client's slot map names (a subscriber of a client::sub()), else this
  /// subscriber's own server, following its MOVED replies; one connection
  /// per node that serves a subscribed shard channel. When the slot moves
  /// (the server unsubscribes the channel, a MOVED) or its node fails over,
  /// the subscriber subscribes again where the slot lives now; messages
  /// published meanwhile are missed, and the gap is reported as on the
  /// subscriber's own connection: `disconnected` when a subscribed shard
  /// channel is lost, `connected` when every one is subscribed again (feeds
  /// catch up then). docs/cluster.md, "Notifications".
  /// Completion `void(error_code, subscription)`; errors as async_subscribe().
  /// Cancellation: completes with operation_aborted; nothing stays registered.
  /// Thread safety: start it on the subscriber's executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_ssubscribe(std::string channel, callback cb, CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, subscription)>(
        std::forward<CompletionToken>(token),
        [impl = impl_, n = std::move(channel), cb = std::move(cb)](auto h) mutable {
          start_subscribe(impl, subscription::kind::shard, std::move(n), std::move(cb),
                          std::move(h));
        });
  }
  /// Deprecated: async_ssubscribe.
  template <class CompletionToken>
  [[deprecated("use async_ssubscribe")]] auto ssubscribe(std::string channel, callback cb,
                                                         CompletionToken&& token) {
    return async_ssubscribe(std::move(channel), std::move(cb),
                            std::forward<CompletionToken>(token));
  }

  /// Registers a listener for connected/disconnected events; the handle
  /// removes it. Call on the subscriber's executor.
  subscription on_event(std::function<void(const subscriber_event&)> listener);

  /// Called with the exception of a callback that threw (default: ignore).
  /// Call on the subscriber's executor.
  void on_callback_error(std::function<void(std::exception_ptr)> handler);

  /// Closes the connection, stops reconnecting, fails pending subscribes.
  void stop();

  bool is_connected() const noexcept;  ///< true while the subscriber connection is up
  /// A snapshot of the counters; call on the subscriber's executor.
  subscriber_stats stats() const noexcept;

 private:
  friend struct detail::impl_access;
  using connect_handler = detail::op_handler<void(boost::system::error_code)>;
  using subscribe_handler = detail::op_handler<void(boost::system::error_code, subscription)>;
  static void start_connect(std::shared_ptr<detail::subscriber_impl> impl, connect_handler h);
  static void start_subscribe(std::shared_ptr<detail::subscriber_impl> impl, subscription::kind k,
                              std::string name, callback cb, subscribe_handler h);
  template <class CompletionToken>
  auto initiate_subscribe(bool pattern, std::string name, callback cb, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, subscription)>(
        std::forward<CompletionToken>(token),
        [impl = impl_, pattern, n = std::move(name), cb = std::move(cb)](auto h) mutable {
          start_subscribe(impl, pattern ? subscription::kind::pattern : subscription::kind::channel,
                          std::move(n), std::move(cb), std::move(h));
        });
  }

  std::shared_ptr<detail::subscriber_impl> impl_;
};

}  // namespace thoonk
