// Typed notifications of feeds and sorted feeds, and of feed management,
// with optional catch-up after subscriber reconnects (docs/feeds.md).
#pragma once

#include <thoonk/detail/async.hpp>
#include <thoonk/export.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace thoonk {

class client;

/// A position in a sorted feed, as carried by `feed.position` payloads and
/// taken by sorted_feed::async_move(). Contract syntax: `:end`, `begin:`,
/// `:<id>` (before id) and `<id>:` (after id).
struct THOONK_API feed_position {
  /// The kind of position: the end, the beginning, before or after an id.
  enum where_t : std::uint8_t { end, begin, before, after };
  where_t where = end;      ///< the kind of position
  std::string relative_id;  ///< before / after only

  /// The end of the sorted feed.
  static feed_position at_end() { return {end, {}}; }
  /// The beginning of the sorted feed.
  static feed_position at_begin() { return {begin, {}}; }
  /// Just before the item `id`.
  static feed_position before_id(std::string id) { return {before, std::move(id)}; }
  /// Just after the item `id`.
  static feed_position after_id(std::string id) { return {after, std::move(id)}; }

  /// The contract's text form (`:end`, `begin:`, `:<id>`, `<id>:`).
  std::string to_string() const;
  /// Parses the contract's text form; nullopt when it is none of the four.
  static std::optional<feed_position> parse(std::string_view s);

  friend bool operator==(const feed_position&, const feed_position&) = default;
};
template <>
inline constexpr bool is_operation_argument_v<feed_position> = true;

/// One notification of a feed or sorted feed.
///
/// The views are valid only during the callback: copy what you keep.
struct THOONK_API feed_event {
  /// What happened to the item.
  enum kind_t : std::uint8_t {
    publish,   ///< `feed.publish`: a new item (sorted feeds: also an edit, see docs)
    edit,      ///< `feed.edit`: an existing id was republished (feeds only)
    retract,   ///< `feed.retract`: the id was removed (retract or max_length eviction)
    position,  ///< `feed.position`: a sorted-feed item was placed or moved
  };
  kind_t kind = publish;  ///< which event this is
  std::string_view feed;  ///< the feed's name
  std::string_view id;    ///< the item id
  std::string_view item;  ///< publish / edit: the item (arbitrary bytes)
  feed_position where;    ///< position: where the item now is
  /// true when delivered by a catch-up replay rather than live (see
  /// feed_subscribe_options::catch_up).
  bool replayed = false;
};

/// One feed-management notification (`newfeed`, `delfeed`, `conffeed`).
struct THOONK_API feed_admin_event {
  /// A feed was created, deleted, or its configuration changed.
  enum kind_t : std::uint8_t { created, deleted, config_changed };
  kind_t kind = created;      ///< which event this is
  std::string_view feed;      ///< the feed's name
  std::string_view instance;  ///< instance_id() of the client that made the change
};

/// What a catch-up did, reported once per catch-up, after its replayed
/// events and before live events resume.
struct THOONK_API catch_up_info {
  std::uint64_t from = 0;         ///< the subscription's cursor before the replay
  std::uint64_t to = 0;           ///< the feed's publish counter at the sync point
  std::uint64_t items = 0;        ///< items replayed (publish events with replayed = true)
  std::uint64_t retractions = 0;  ///< retractions replayed
  /// false when more retractions happened during the gap than the feed's
  /// retraction log keeps (config `retraction_log`, default 1000): some
  /// retracted ids were not reported. Re-read async_get_ids() to reconcile.
  bool retractions_complete = true;
  /// true when the feed's publish counter went backwards (the feed was
  /// deleted and re-created, or the server lost its data): the replay then
  /// restarted from the feed's beginning.
  bool counter_reset = false;
  /// Set when the catch-up could not run: error::feed_not_found (the feed
  /// was deleted) or error::wrong_feed_type. Transport errors are retried
  /// and not reported.
  boost::system::error_code error;
};

/// Options of feed::async_subscribe() and sorted_feed::async_subscribe().
struct THOONK_API feed_subscribe_options {
  /// Replay, after every subscriber reconnect, everything the subscription
  /// missed while disconnected, from the feed's own data, in order, before
  /// live events resume. See docs/feeds.md "Catch-up" for exactly what is
  /// delivered for edits and retractions during the gap.
  bool catch_up = false;
  /// With catch_up: start from this cursor (a value of
  /// feed_subscription::cursor() saved earlier) instead of "now": everything
  /// published after it is replayed first. Retractions at exactly that
  /// cursor may be reported a second time.
  std::optional<std::uint64_t> resume_from;
  /// With catch_up: called after each catch-up (see catch_up_info).
  std::function<void(const catch_up_info&)> on_catch_up;
};
template <>
inline constexpr bool is_operation_argument_v<feed_subscribe_options> = true;

using feed_callback = std::function<void(const feed_event&)>;
using feed_admin_callback = std::function<void(const feed_admin_event&)>;

/// Counters of one subscription.
struct THOONK_API feed_subscription_stats {
  std::uint64_t delivered = 0;        ///< callback invocations (live and replayed)
  std::uint64_t replayed = 0;         ///< of which from catch-up
  std::uint64_t catch_ups = 0;        ///< completed catch-ups
  std::uint64_t callback_errors = 0;  ///< callbacks that threw (the exception is swallowed)
  std::uint64_t malformed = 0;        ///< payloads that did not parse (skipped)
};

namespace detail {
class feed_sub_state;
}

/// RAII handle of a feed (or feed-management) subscription. Destroying it,
/// or reset(), removes its callbacks; when no other subscription of this
/// client uses the channels, the subscriber unsubscribes them. Movable, not
/// copyable; may outlive the client (it then does nothing). Destroy or reset
/// it on the client's executor; it may be reset from inside its own callback.
class THOONK_API feed_subscription {
 public:
  feed_subscription() = default;
  /// Made by the library (async_subscribe); applications get handles, never make them.
  explicit feed_subscription(std::shared_ptr<detail::feed_sub_state> s) noexcept
      : state_(std::move(s)) {}
  /// Moves the subscription; `o` becomes empty.
  feed_subscription(feed_subscription&& o) noexcept = default;
  /// Ends this subscription, then takes over `o`'s.
  feed_subscription& operator=(feed_subscription&& o) noexcept;
  feed_subscription(const feed_subscription&) = delete;
  feed_subscription& operator=(const feed_subscription&) = delete;
  ~feed_subscription();

  /// Ends the subscription now: no callback after it returns. Call it on the
  /// client's executor.
  void reset();
  bool active() const noexcept;  ///< true until reset(), or until the client is gone
  /// Catch-up subscriptions: the feed's publish counter value up to which
  /// every publish/edit has been delivered (`feed.publishes`). Save it to
  /// resume later with feed_subscribe_options::resume_from. 0 otherwise.
  std::uint64_t cursor() const noexcept;
  /// A snapshot of the counters; call on the client's executor.
  feed_subscription_stats stats() const noexcept;

 private:
  std::shared_ptr<detail::feed_sub_state> state_;
};

namespace detail {
using feed_subscribe_handler =
    detail::op_handler<void(boost::system::error_code, feed_subscription)>;
THOONK_API void start_subscribe_feed_admin(client* c, feed_admin_callback cb,
                                           feed_subscribe_handler h);
}  // namespace detail

/// Subscribes to feed management events of every feed: `newfeed`,
/// `delfeed` and `conffeed` (payload `name\0instance-uuid`).
///
/// Completion signature `void(error_code, feed_subscription)`; completes
/// once the server confirmed the three subscriptions, so every event
/// published after completion is delivered, to `cb`, inline on the client's
/// executor, exactly once per event (no catch-up for these events).
/// Errors: error::subscribe_refused (the server's text through
/// capture_diagnostics), error::client_stopped; operation_aborted when
/// cancelled (nothing stays registered). The operation and the subscription
/// may outlive `c` (thoonk::client, "Lifetime").
template <completion_token CompletionToken = default_token_t>
auto async_subscribe_feed_admin(client& c, feed_admin_callback cb, CompletionToken&& token = {}) {
  return detail::initiate<void(boost::system::error_code, feed_subscription)>(
      std::forward<CompletionToken>(token), &detail::start_subscribe_feed_admin, &c, std::move(cb));
}
/// Deprecated: async_subscribe_feed_admin.
template <class CompletionToken>
[[deprecated("use async_subscribe_feed_admin")]] auto subscribe_feed_admin(
    client& c, feed_admin_callback cb, CompletionToken&& token) {
  return async_subscribe_feed_admin(c, std::move(cb), std::forward<CompletionToken>(token));
}

}  // namespace thoonk
