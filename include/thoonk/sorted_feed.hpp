// Sorted feed: a manually ordered list of items with auto-increment ids and
// publish / retract / position notifications (contract 002 "Sorted Feed";
// docs/feeds.md).
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_events.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thoonk {

/// A handle of one feed of type `sorted_feed` on a client.
///
/// Keys (contract 002): `feed.ids:[f]` (list of ids, in order),
/// `feed.items:[f]` (hash id → item), `feed.idincr:[f]` (id counter: ids
/// are "1", "2", ...), `feed.publishes:[f]` (counter). Inserting operations
/// PUBLISH `feed.publish` `id\0item` then `feed.position` `id\0pos`; edit
/// PUBLISHes `feed.publish` only (as the contract says); move PUBLISHes
/// `feed.position`; retract `feed.retract` `id`. Each operation is one
/// atomic Lua script, notification included.
///
/// Operations naming an id that is not in the feed (edit, move, the
/// relative id of publish_before/after/move) fail with error::id_not_found
/// and change nothing. Validation, type checks, errors, cancellation and
/// lifetimes are as described for thoonk::feed.
class sorted_feed {
 public:
  sorted_feed() = default;
  /// A handle without any check (no I/O). Prefer open().
  sorted_feed(client& c, std::string name) : client_(&c), name_(std::move(name)) {}

  const std::string& name() const noexcept { return name_; }
  client& get_client() const noexcept { return *client_; }

  /// Opens an existing feed of type `sorted_feed`. Completion
  /// `void(error_code, sorted_feed)`. Errors: error::invalid_name,
  /// error::feed_not_found, error::wrong_feed_type, transport errors.
  template <class CompletionToken>
  static auto open(client& c, std::string name, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, sorted_feed)>(
        token, [cp = &c, n = std::move(name)](auto h) mutable {
          start_open(cp, std::move(n), std::move(h));
        });
  }

  /// Appends `item` at the end (RPUSH; position `:end`). Completion
  /// `void(error_code, std::string id)`.
  template <class CompletionToken>
  auto append(std::string item, CompletionToken&& token) {
    return insert(feed_position::at_end(), std::move(item),
                  std::forward<CompletionToken>(token));
  }

  /// Inserts `item` at the beginning (LPUSH; position `begin:`). Completion
  /// `void(error_code, std::string id)`.
  template <class CompletionToken>
  auto prepend(std::string item, CompletionToken&& token) {
    return insert(feed_position::at_begin(), std::move(item),
                  std::forward<CompletionToken>(token));
  }

  /// Inserts `item` before `before_id` (position `:<before_id>`).
  /// Completion `void(error_code, std::string id)`; error::id_not_found when
  /// `before_id` is not in the feed.
  template <class CompletionToken>
  auto publish_before(std::string before_id, std::string item, CompletionToken&& token) {
    return insert(feed_position::before_id(std::move(before_id)), std::move(item),
                  std::forward<CompletionToken>(token));
  }

  /// Inserts `item` after `after_id` (position `<after_id>:`). Completion
  /// `void(error_code, std::string id)`; error::id_not_found when
  /// `after_id` is not in the feed.
  template <class CompletionToken>
  auto publish_after(std::string after_id, std::string item, CompletionToken&& token) {
    return insert(feed_position::after_id(std::move(after_id)), std::move(item),
                  std::forward<CompletionToken>(token));
  }

  /// Inserts `item` at `pos` (the four functions above in one).
  /// Completion `void(error_code, std::string id)`.
  template <class CompletionToken>
  auto insert(feed_position pos, std::string item, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::string)>(
        token, [cp = client_, n = name_, p = std::move(pos), it = std::move(item)](auto h) mutable {
          start_insert(cp, std::move(n), std::move(p), std::move(it), std::move(h));
        });
  }

  /// Replaces the item of `id` (its position is unchanged) and PUBLISHes
  /// `feed.publish` `id\0item`. Completion `void(error_code)`;
  /// error::id_not_found when `id` is not in the feed.
  template <class CompletionToken>
  auto edit(std::string id, std::string item, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [cp = client_, n = name_, i = std::move(id), it = std::move(item)](auto h) mutable {
          start_edit(cp, std::move(n), std::move(i), std::move(it), std::move(h));
        });
  }

  /// Moves `id` to `pos` and PUBLISHes `feed.position` `id\0pos`.
  /// Completion `void(error_code)`; error::id_not_found when `id` or the
  /// relative id is not in the feed; error::invalid_argument when the
  /// relative id is `id` itself.
  template <class CompletionToken>
  auto move(std::string id, feed_position pos, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code)>(
        token, [cp = client_, n = name_, i = std::move(id), p = std::move(pos)](auto h) mutable {
          start_move(cp, std::move(n), std::move(i), std::move(p), std::move(h));
        });
  }

  /// Removes `id` and PUBLISHes `feed.retract` `id`. Completion
  /// `void(error_code, bool)`: false (nothing published) when absent.
  template <class CompletionToken>
  auto retract(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, bool)>(
        token, [cp = client_, n = name_, i = std::move(id)](auto h) mutable {
          start_retract(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// All ids in order (LRANGE 0 -1). Completion
  /// `void(error_code, std::vector<std::string>)`.
  template <class CompletionToken>
  auto get_ids(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<std::string>)>(
        token, [cp = client_, n = name_](auto h) mutable {
          start_get_ids(cp, std::move(n), std::move(h));
        });
  }

  /// One item; nullopt when absent. Completion
  /// `void(error_code, std::optional<std::string>)`.
  template <class CompletionToken>
  auto get_item(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::optional<std::string>)>(
        token, [cp = client_, n = name_, i = std::move(id)](auto h) mutable {
          start_get_item(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// Several items in the order of `ids` (nullopt for missing ids).
  /// Completion `void(error_code, std::vector<std::optional<std::string>>)`.
  template <class CompletionToken>
  auto get_items(std::vector<std::string> ids, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code,
                                 std::vector<std::optional<std::string>>)>(
        token, [cp = client_, n = name_, i = std::move(ids)](auto h) mutable {
          start_get_items(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// Every item in list order, read in one atomic step. Completion
  /// `void(error_code, std::vector<feed_item>)`.
  template <class CompletionToken>
  auto get_all(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::vector<feed_item>)>(
        token, [cp = client_, n = name_](auto h) mutable {
          start_get_all(cp, std::move(n), std::move(h));
        });
  }

  /// Whether `id` is in the feed (HEXISTS). Completion `void(error_code, bool)`.
  template <class CompletionToken>
  auto has_id(std::string id, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, bool)>(
        token, [cp = client_, n = name_, i = std::move(id)](auto h) mutable {
          start_has_id(cp, std::move(n), std::move(i), std::move(h));
        });
  }

  /// Number of items (LLEN). Completion `void(error_code, std::uint64_t)`.
  template <class CompletionToken>
  auto length(CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, std::uint64_t)>(
        token, [cp = client_, n = name_](auto h) mutable {
          start_length(cp, std::move(n), std::move(h));
        });
  }

  /// Subscribes `cb` to publish, retract and position events; as
  /// feed::subscribe(). Note the contract's edit is a `feed.publish` message
  /// without a following `feed.position`: it arrives as a publish event.
  template <class CompletionToken>
  auto subscribe(feed_callback cb, feed_subscribe_options opts, CompletionToken&& token) {
    return detail::initiate<void(boost::system::error_code, feed_subscription)>(
        token, [cp = client_, n = name_, cb = std::move(cb), o = std::move(opts)](auto h) mutable {
          start_subscribe(cp, std::move(n), std::move(cb), std::move(o), std::move(h));
        });
  }
  template <class CompletionToken>
  auto subscribe(feed_callback cb, CompletionToken&& token) {
    return subscribe(std::move(cb), feed_subscribe_options{},
                     std::forward<CompletionToken>(token));
  }

 private:
  template <class... Ts>
  using handler = boost::asio::any_completion_handler<void(boost::system::error_code, Ts...)>;

  static void start_open(client* c, std::string name, handler<sorted_feed> h);
  static void start_insert(client* c, std::string name, feed_position pos, std::string item,
                           handler<std::string> h);
  static void start_edit(client* c, std::string name, std::string id, std::string item,
                         handler<> h);
  static void start_move(client* c, std::string name, std::string id, feed_position pos,
                         handler<> h);
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
