// What thoonk::feed and thoonk::sorted_feed have in common: the handle
// (client and name), getting a handle (open, create_or_open), the reads,
// retract, subscribe and read_settings. Written once; the out-of-line start
// functions (src/feeds/feed_base.cpp) choose the commands by feed kind where
// the two differ (a zset of ids for feeds, a list for sorted feeds).
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/export.hpp>
#include <thoonk/feed_events.hpp>
#include <thoonk/feed_item.hpp>

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thoonk::detail {

/// The part of a feed handle that does not depend on its kind.
///
/// **Common to every operation** of feed and sorted_feed: the feed name and
/// ids are validated before any I/O (error::invalid_name, error::invalid_id,
/// error::item_too_large beyond config::max_item_size). Every operation
/// checks the feed's `type` on the server: error::feed_not_found when the
/// feed does not exist (or was deleted), error::wrong_feed_type when it is
/// another kind. Transport errors keep their codes (error::unknown_outcome:
/// the request was sent and may have run; error::client_stopped, ...); an
/// ACL refusal gives error::no_permission or one of its kin
/// (no_script_permission, no_channel_permission, no_key_permission); other
/// server error replies give error::server_error (error::script_error for a
/// Lua error). Wrap the token in thoonk::capture_diagnostics to read the
/// server's text for these.
///
/// **Cancellation** (terminal/partial/total, via the completion token's
/// slot): completes with operation_aborted; a request not yet written is
/// never sent, one already written may still take effect.
///
/// **Lifetime**: arguments are taken by value. A handle is cheap (a shared
/// pointer to the client's connections and the name): copy it freely; it
/// and its operations may outlive the client (thoonk::client, "Lifetime"). **Threading**: as the
/// client's operations (start them on the client's executor); handlers run on the token's
/// associated executor, else the client's.
class THOONK_API feed_core {
 public:
  const std::string& name() const noexcept { return name_; }

  /// Removes `id` and PUBLISHes `feed.retract` `id`. Completion
  /// `void(error_code, bool)`: true when removed, false (and nothing
  /// published) when the id was not in the feed.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_retract(std::string id, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, bool)>(
        std::forward<CompletionToken>(token), &feed_core::start_retract, *this, std::move(id));
  }
  /// Deprecated: async_retract.
  template <class CompletionToken>
  [[deprecated("use async_retract")]] auto retract(std::string id, CompletionToken&& token) const {
    return async_retract(std::move(id), std::forward<CompletionToken>(token));
  }

  /// All ids in the feed's order: oldest first for a feed (its zset), list
  /// order for a sorted feed. Completion
  /// `void(error_code, std::vector<std::string>)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_get_ids(CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, std::vector<std::string>)>(
        std::forward<CompletionToken>(token), &feed_core::start_get_ids, *this);
  }
  /// Deprecated: async_get_ids.
  template <class CompletionToken>
  [[deprecated("use async_get_ids")]] auto get_ids(CompletionToken&& token) const {
    return async_get_ids(std::forward<CompletionToken>(token));
  }

  /// One item. Completion `void(error_code, std::optional<std::string>)`:
  /// nullopt when the id is not in the feed.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_get_item(std::string id, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, std::optional<std::string>)>(
        std::forward<CompletionToken>(token), &feed_core::start_get_item, *this, std::move(id));
  }
  /// Deprecated: async_get_item.
  template <class CompletionToken>
  [[deprecated("use async_get_item")]] auto get_item(std::string id,
                                                     CompletionToken&& token) const {
    return async_get_item(std::move(id), std::forward<CompletionToken>(token));
  }

  /// Several items, in the order of `ids` (nullopt for missing ids), in one
  /// round trip. Completion
  /// `void(error_code, std::vector<std::optional<std::string>>)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_get_items(std::vector<std::string> ids, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code,
                                 std::vector<std::optional<std::string>>)>(
        std::forward<CompletionToken>(token), &feed_core::start_get_items, *this, std::move(ids));
  }
  /// Deprecated: async_get_items.
  template <class CompletionToken>
  [[deprecated("use async_get_items")]] auto get_items(std::vector<std::string> ids,
                                                       CompletionToken&& token) const {
    return async_get_items(std::move(ids), std::forward<CompletionToken>(token));
  }

  /// Every item in the feed's order, read in one atomic step (a consistent
  /// snapshot; O(n) on the server, like the contract's HGETALL).
  /// Completion `void(error_code, std::vector<feed_item>)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_get_all(CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, std::vector<feed_item>)>(
        std::forward<CompletionToken>(token), &feed_core::start_get_all, *this);
  }
  /// Deprecated: async_get_all.
  template <class CompletionToken>
  [[deprecated("use async_get_all")]] auto get_all(CompletionToken&& token) const {
    return async_get_all(std::forward<CompletionToken>(token));
  }

  /// Whether `id` is in the feed. Completion `void(error_code, bool)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_has_id(std::string id, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, bool)>(
        std::forward<CompletionToken>(token), &feed_core::start_has_id, *this, std::move(id));
  }
  /// Deprecated: async_has_id.
  template <class CompletionToken>
  [[deprecated("use async_has_id")]] auto has_id(std::string id, CompletionToken&& token) const {
    return async_has_id(std::move(id), std::forward<CompletionToken>(token));
  }

  /// Number of items. Completion `void(error_code, std::uint64_t)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_length(CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, std::uint64_t)>(
        std::forward<CompletionToken>(token), &feed_core::start_length, *this);
  }
  /// Deprecated: async_length.
  template <class CompletionToken>
  [[deprecated("use async_length")]] auto length(CompletionToken&& token) const {
    return async_length(std::forward<CompletionToken>(token));
  }

  /// Subscribes `cb` to this feed's events: publish, edit and retract for a
  /// feed; publish, retract and position for a sorted feed (whose edit is a
  /// `feed.publish` message without a following `feed.position`: it arrives
  /// as a publish event, as the contract says).
  ///
  /// Completion `void(error_code, feed_subscription)`. Completes once the
  /// server confirmed the subscriptions (with catch_up: once the sync point
  /// is established, see docs/feeds.md), so every event published after
  /// completion reaches `cb`, exactly once, in publish order, inline on the
  /// client's executor. Several subscriptions of one client to one feed
  /// share one server subscription. Errors: as every operation, plus
  /// error::subscribe_refused when the server refuses a channel (its text
  /// through capture_diagnostics) and error::client_stopped; operation_aborted
  /// when cancelled (then nothing stays registered). A callback that throws
  /// is counted in feed_subscription::stats() and does not stop delivery.
  template <completion_token CompletionToken = default_token_t>
  auto async_subscribe(feed_callback cb, feed_subscribe_options opts,
                       CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, feed_subscription)>(
        std::forward<CompletionToken>(token), &feed_core::start_subscribe, *this, std::move(cb),
        std::move(opts));
  }
  /// Deprecated: async_subscribe.
  template <class CompletionToken>
  [[deprecated("use async_subscribe")]] auto subscribe(feed_callback cb,
                                                       feed_subscribe_options opts,
                                                       CompletionToken&& token) const {
    return async_subscribe(std::move(cb), std::move(opts), std::forward<CompletionToken>(token));
  }
  /// As above with default options (no catch-up).
  /// Completion, errors, cancellation and thread safety: as the overload above.
  template <completion_token CompletionToken = default_token_t>
  auto async_subscribe(feed_callback cb, CompletionToken&& token = {}) const {
    return async_subscribe(std::move(cb), feed_subscribe_options{},
                           std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_subscribe.
  template <class CompletionToken>
  [[deprecated("use async_subscribe")]] auto subscribe(feed_callback cb,
                                                       CompletionToken&& token) const {
    return async_subscribe(std::move(cb), std::forward<CompletionToken>(token));
  }

 protected:
  template <class... Ts>
  using handler = detail::op_handler<void(boost::system::error_code, Ts...)>;

  feed_core() = default;
  feed_core(client& c, std::string name, feed_type kind)
      : client_core_(client_access::core(c)), name_(std::move(name)), kind_(kind) {}

  friend struct detail::client_access;
  std::shared_ptr<client_core> client_core_;
  std::string name_;
  feed_type kind_ = feed_type::feed;

 private:
  void start_retract(std::string id, handler<bool> h) const;
  void start_get_ids(handler<std::vector<std::string>> h) const;
  void start_get_item(std::string id, handler<std::optional<std::string>> h) const;
  void start_get_items(std::vector<std::string> ids,
                       handler<std::vector<std::optional<std::string>>> h) const;
  void start_get_all(handler<std::vector<feed_item>> h) const;
  void start_has_id(std::string id, handler<bool> h) const;
  void start_length(handler<std::uint64_t> h) const;
  void start_subscribe(feed_callback cb, feed_subscribe_options opts,
                       handler<feed_subscription> h) const;
};

/// Getting a handle and reading the settings back, typed by the handle
/// (`Derived`: feed or sorted_feed) and its `Settings`
/// (Derived::settings). Instantiated for those two only
/// (src/feeds/feed_base.cpp), which the shared library exports: the
/// attribute is on the template, as an explicit instantiation cannot add it.
template <class Derived, class Settings>
class THOONK_API feed_base : public feed_core {
 public:
  /// Opens an existing feed: checks that it exists with this handle's type.
  /// Completion `void(error_code, Derived)`. Errors: error::invalid_name,
  /// error::feed_not_found, error::wrong_feed_type, as every operation.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  static auto async_open(client& c, std::string name, CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, Derived)>(
        std::forward<CompletionToken>(token), &feed_base::start_open, &c, std::move(name));
  }
  /// Deprecated: async_open.
  template <class CompletionToken>
  [[deprecated("use async_open")]] static auto open(client& c, std::string name,
                                                    CompletionToken&& token) {
    return async_open(c, std::move(name), std::forward<CompletionToken>(token));
  }

  /// Opens the feed, creating it first with `s` when it does not exist, in
  /// one atomic step (client::async_create_or_open_feed; a creation is announced
  /// on `newfeed`). A feed that exists keeps its config: `s` applies to a
  /// creation only (change settings with client::async_set_config).
  /// Completion `void(error_code, Derived)`. Errors: error::invalid_argument,
  /// before any I/O, for settings the library cannot use
  /// (Settings::problem() says which); error::wrong_feed_type, with nothing
  /// changed, when the name is a feed of another type; as every operation.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  static auto async_create_or_open(client& c, std::string name, Settings s,
                                   CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, Derived)>(
        std::forward<CompletionToken>(token), &feed_base::start_create_or_open, &c, std::move(name),
        std::move(s));
  }
  /// Deprecated: async_create_or_open.
  template <class CompletionToken>
  [[deprecated("use async_create_or_open")]] static auto create_or_open(client& c, std::string name,
                                                                        Settings s,
                                                                        CompletionToken&& token) {
    return async_create_or_open(c, std::move(name), std::move(s),
                                std::forward<CompletionToken>(token));
  }
  /// As above with default settings.
  /// Completion, errors, cancellation and thread safety: as the overload above.
  template <completion_token CompletionToken = default_token_t>
  static auto async_create_or_open(client& c, std::string name, CompletionToken&& token = {}) {
    return async_create_or_open(c, std::move(name), Settings{},
                                std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_create_or_open.
  template <class CompletionToken>
  [[deprecated("use async_create_or_open")]] static auto create_or_open(client& c, std::string name,
                                                                        CompletionToken&& token) {
    return async_create_or_open(c, std::move(name), std::forward<CompletionToken>(token));
  }

  /// Reads the feed's settings from its config (after the type check).
  /// Completion `void(error_code, Settings)`; a field that is unset, or
  /// holds a value the library's scripts cannot use (written with plain
  /// commands), reads as nullopt: the scripts then use the default.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_read_settings(CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, Settings)>(
        std::forward<CompletionToken>(token), &feed_base::start_read_settings, *this);
  }
  /// Deprecated: async_read_settings.
  template <class CompletionToken>
  [[deprecated("use async_read_settings")]] auto read_settings(CompletionToken&& token) const {
    return async_read_settings(std::forward<CompletionToken>(token));
  }

 protected:
  feed_base() = default;
  feed_base(client& c, std::string name, feed_type kind) : feed_core(c, std::move(name), kind) {}

 private:
  static void start_open(client* c, std::string name, handler<Derived> h);
  static void start_create_or_open(client* c, std::string name, Settings s, handler<Derived> h);
  void start_read_settings(handler<Settings> h) const;
};

}  // namespace thoonk::detail
