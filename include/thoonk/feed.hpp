// Feed: items ordered by publish time, with max_length trimming and live
// publish / edit / retract notifications (contract 002 "Feed"; docs/feeds.md).
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/feed_events.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thoonk {

/// One item of a feed: its id and its bytes.
struct feed_item {
  std::string id;
  std::string item;
  friend bool operator==(const feed_item&, const feed_item&) = default;
};

/// What a feed publish did.
struct publish_result {
  std::string id;                     ///< the given or generated id
  bool edited = false;                ///< the id existed: this was an edit (`feed.edit`)
  std::vector<std::string> evicted;   ///< ids removed by max_length (each announced on `feed.retract`)
};

/// A handle of one feed of type `feed` on a client.
///
/// Keys (contract 002): `feed.ids:[f]` (zset id → publish time in ms, oldest
/// first), `feed.items:[f]` (hash id → item), `feed.publishes:[f]`
/// (counter), `feed.config:[f]` (`type`=feed, `max_length`). Every
/// operation that changes data is one Lua script that also PUBLISHes its
/// notification in the same atomic step.
///
/// **Common to every operation.** The feed name and ids are validated before
/// any I/O (error::invalid_name, error::invalid_id, error::item_too_large
/// beyond config::max_item_size). Every operation checks the feed's
/// `type` on the server: error::feed_not_found when the feed does not exist
/// (or was deleted), error::wrong_feed_type when it is another kind.
/// Transport errors keep their codes (error::unknown_outcome: the script was
/// sent and may have run; error::client_stopped, ...); other server error
/// replies give error::server_error (error::script_error for a Lua error).
/// **Cancellation** (terminal/partial/total, via the completion token's
/// slot): completes with operation_aborted; a request not yet written is
/// never sent, one already written may still take effect.
/// **Lifetime**: arguments are taken by value; the client must outlive the
/// operation, the feed object need not. A feed is a cheap handle (client
/// pointer + name): copy it freely.
class feed {
 public:
  /// An empty handle; only assign to it.
  feed() = default;
  /// A handle without any check (no I/O): operations report
  /// feed_not_found / wrong_feed_type. Prefer open().
  feed(client& c, std::string name) : client_(&c), name_(std::move(name)) {}

  const std::string& name() const noexcept { return name_; }
  client& get_client() const noexcept { return *client_; }

  /// Opens an existing feed: checks that it exists and has type `feed`.
  /// Completion `void(error_code, feed)`. Errors: error::invalid_name,
  /// error::feed_not_found, error::wrong_feed_type, transport errors.
  template <class CompletionToken>
  static auto open(client& c, std::string name, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, feed)>(
        token, [cp = &c, n = std::move(name)](auto h) mutable {
          start_open(cp, std::move(n), std::move(h));
        });
  }

  /// Publishes `item` under a generated id (a random UUID).
  /// Completion `void(error_code, publish_result)`. A new id at
  /// `max_length` first evicts the oldest items, each announced on
  /// `feed.retract` (at most 1000 per publish, so lowering max_length trims
  /// gradually); then `feed.publish` gets `id\0item`.
  template <class CompletionToken>
  auto publish(std::string item, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, publish_result)>(
        token, [cp = client_, n = name_, it = std::move(item)](auto h) mutable {
          start_publish(cp, std::move(n), std::nullopt, std::move(it), std::move(h));
        });
  }

  /// Publishes `item` under `id`. An id that exists is an edit
  /// (docs/design.md §5): the item is replaced and moves to the newest position,
  /// nothing is evicted, and `feed.edit` gets `id\0item`. Otherwise as
  /// publish(item). Completion `void(error_code, publish_result)`.
  template <class CompletionToken>
  auto publish(std::string id, std::string item, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, publish_result)>(
        token, [cp = client_, n = name_, i = std::move(id), it = std::move(item)](auto h) mutable {
          start_publish(cp, std::move(n), std::move(i), std::move(it), std::move(h));
        });
  }

  /// Removes `id` and PUBLISHes `feed.retract` `id`. Completion
  /// `void(error_code, bool)`: true when removed, false (and nothing
  /// published) when the id was not in the feed.
  template <class CompletionToken>
  auto retract(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, bool)>(
        token, [cp = client_, n = name_, i = std::move(id)](auto h) mutable {
          start_retract(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// All ids, oldest first (ZRANGE 0 -1). Completion
  /// `void(error_code, std::vector<std::string>)`.
  template <class CompletionToken>
  auto get_ids(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<std::string>)>(
        token, [cp = client_, n = name_](auto h) mutable {
          start_get_ids(cp, std::move(n), std::move(h));
        });
  }

  /// One item. Completion `void(error_code, std::optional<std::string>)`:
  /// nullopt when the id is not in the feed.
  template <class CompletionToken>
  auto get_item(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::optional<std::string>)>(
        token, [cp = client_, n = name_, i = std::move(id)](auto h) mutable {
          start_get_item(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// Several items, in the order of `ids` (nullopt for missing ids).
  /// Completion `void(error_code, std::vector<std::optional<std::string>>)`.
  template <class CompletionToken>
  auto get_items(std::vector<std::string> ids, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code,
                                 std::vector<std::optional<std::string>>)>(
        token, [cp = client_, n = name_, i = std::move(ids)](auto h) mutable {
          start_get_items(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// Every item, oldest first, read in one atomic step (a consistent
  /// snapshot; O(n) on the server, like the contract's HGETALL).
  /// Completion `void(error_code, std::vector<feed_item>)`.
  template <class CompletionToken>
  auto get_all(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<feed_item>)>(
        token, [cp = client_, n = name_](auto h) mutable {
          start_get_all(cp, std::move(n), std::move(h));
        });
  }

  /// Whether `id` is in the feed. Completion `void(error_code, bool)`.
  template <class CompletionToken>
  auto has_id(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, bool)>(
        token, [cp = client_, n = name_, i = std::move(id)](auto h) mutable {
          start_has_id(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// Number of items. Completion `void(error_code, std::uint64_t)`.
  template <class CompletionToken>
  auto length(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::uint64_t)>(
        token, [cp = client_, n = name_](auto h) mutable {
          start_length(cp, std::move(n), std::move(h));
        });
  }

  /// Subscribes `cb` to this feed's publish, edit and retract events.
  ///
  /// Completion `void(error_code, feed_subscription)`. Completes once the
  /// server confirmed the subscriptions (with catch_up: once the sync point
  /// is established, see docs/feeds.md), so every event published after
  /// completion reaches `cb`, exactly once, in publish order, inline on the
  /// client's executor. Several subscriptions of one client to one feed
  /// share one server subscription. Errors: as open(), plus
  /// error::client_stopped; operation_aborted when cancelled (then nothing
  /// stays registered). A callback that throws is counted in
  /// feed_subscription::stats() and does not stop delivery.
  template <class CompletionToken>
  auto subscribe(feed_callback cb, feed_subscribe_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, feed_subscription)>(
        token, [cp = client_, n = name_, cb = std::move(cb), o = std::move(opts)](auto h) mutable {
          start_subscribe(cp, std::move(n), std::move(cb), std::move(o), std::move(h));
        });
  }
  /// As above with default options (no catch-up).
  template <class CompletionToken>
  auto subscribe(feed_callback cb, CompletionToken&& token) {
    return subscribe(std::move(cb), feed_subscribe_options{},
                     std::forward<CompletionToken>(token));
  }

 private:
  template <class... Ts>
  using handler = boost::asio::any_completion_handler<void(boost::system::error_code, Ts...)>;

  static void start_open(client* c, std::string name, handler<feed> h);
  static void start_publish(client* c, std::string name, std::optional<std::string> id,
                            std::string item, handler<publish_result> h);
  static void start_retract(client* c, std::string name, std::string id, handler<bool> h);
  static void start_get_ids(client* c, std::string name, handler<std::vector<std::string>> h);
  static void start_get_item(client* c, std::string name, std::string id,
                             handler<std::optional<std::string>> h);
  static void start_get_items(client* c, std::string name, std::vector<std::string> ids,
                              handler<std::vector<std::optional<std::string>>> h);
  static void start_get_all(client* c, std::string name, handler<std::vector<feed_item>> h);
  static void start_has_id(client* c, std::string name, std::string id, handler<bool> h);
  static void start_length(client* c, std::string name, handler<std::uint64_t> h);
  static void start_subscribe(client* c, std::string name, feed_callback cb,
                              feed_subscribe_options opts, handler<feed_subscription> h);

  client* client_ = nullptr;
  std::string name_;
};

}  // namespace thoonk
