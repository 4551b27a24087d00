// Feed: items ordered by publish time, with max_length trimming and live
// publish / edit / retract notifications (contract "Feed"; docs/feeds.md).
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/detail/feed_base.hpp>
#include <thoonk/export.hpp>
#include <thoonk/feed_events.hpp>
#include <thoonk/feed_item.hpp>

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace thoonk {

/// What a feed publish did.
struct THOONK_API publish_result {
  std::string id;       ///< the given or generated id
  bool edited = false;  ///< the id existed: this was an edit (`feed.edit`)
  /// Ids removed by max_length (each announced on `feed.retract`).
  std::vector<std::string> evicted;
};

/// The settings of a feed: typed values over the contract's string config
/// fields (`feed.config:[f]`). nullopt means "not set": on creation the
/// field is not written and the default applies; read back, the field is
/// unset (or holds a value the scripts cannot use and ignore).
struct THOONK_API feed_settings {
  /// Config `max_length`: the most items the feed keeps; a publish of a new
  /// id at the limit evicts the oldest. 0 or unset: unlimited. At most
  /// 2^53 - 1 (Lua numbers are doubles); larger is error::invalid_argument.
  std::optional<std::uint64_t> max_length;

  /// The config fields these settings write (only the ones set).
  feed_config to_fields() const;
  /// Settings from config fields (as HGETALL `feed.config:[f]` gives them;
  /// other fields are ignored).
  static feed_settings from_fields(const feed_config& fields);
  /// Why create_or_open would refuse these settings with
  /// error::invalid_argument (as thoonk::config_field_problem), or empty
  /// when they are fine. No I/O.
  std::string problem() const;

  friend bool operator==(const feed_settings&, const feed_settings&) = default;
};
template <>
inline constexpr bool is_operation_argument_v<feed_settings> = true;

/// A handle of one feed of type `feed` on a client.
///
/// Keys (docs/contract.md): `feed.ids:[f]` (zset id → publish time in ms, oldest
/// first), `feed.items:[f]` (hash id → item), `feed.publishes:[f]`
/// (counter), `feed.config:[f]` (`type`=feed, `max_length`). Every
/// operation that changes data is one Lua script that also PUBLISHes its
/// notification in the same atomic step.
///
/// Get a handle with async_open() or async_create_or_open().
///
/// **Common to every operation**: names and ids are checked before any I/O
/// (error::invalid_name, error::invalid_id, error::item_too_large); the
/// feed's type is checked on the server (error::feed_not_found,
/// error::wrong_feed_type); transport errors keep their codes
/// (error::unknown_outcome: sent, and it may have run; error::client_stopped);
/// ACL refusals give error::no_permission or its kin; other error replies
/// give error::server_error (error::script_error for a Lua error).
/// Cancellation completes with operation_aborted: a request not yet written
/// is never sent, one already written may still take effect. Start
/// operations on the client's executor; the handle and its operations may
/// outlive the client (thoonk::client, "Lifetime"). The operations shared by feed and sorted_feed
/// (async_retract, the reads, async_subscribe, async_read_settings) come
/// from a base class of the implementation (detail::feed_core), outside
/// this reference: docs/feeds.md describes each.
class THOONK_API feed : public detail::feed_base<feed, feed_settings> {
 public:
  using settings = feed_settings;  ///< the creation settings of this kind of feed
  static constexpr feed_type kind = feed_type::feed;  ///< the stored `type` of a feed

  /// An empty handle; only assign to it.
  feed() = default;
  /// A handle without any check (no I/O): operations report
  /// feed_not_found / wrong_feed_type. Prefer async_open() or async_create_or_open().
  feed(client& c, std::string name) : feed_base(c, std::move(name), kind) {}

  /// Publishes `item` under a generated id (a random UUID).
  /// Completion `void(error_code, publish_result)`. A new id at
  /// `max_length` first evicts the oldest items, each announced on
  /// `feed.retract` (at most 1000 per publish, so lowering max_length trims
  /// gradually); then `feed.publish` gets `id\0item`. Errors: as every
  /// operation; error::no_channel_permission, with nothing changed, when
  /// the user may not PUBLISH the notification.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_publish(std::string item, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, publish_result)>(
        std::forward<CompletionToken>(token), &feed::start_publish, *this,
        std::optional<std::string>(), std::move(item));
  }
  /// Deprecated: async_publish.
  template <class CompletionToken>
  [[deprecated("use async_publish")]] auto publish(std::string item,
                                                   CompletionToken&& token) const {
    return async_publish(std::move(item), std::forward<CompletionToken>(token));
  }

  /// Publishes `item` under `id`. An id that exists is an edit
  /// (docs/design.md §5): the item is replaced and moves to the newest
  /// position, nothing is evicted, and `feed.edit` gets `id\0item`.
  /// Otherwise as publish(item). Completion
  /// `void(error_code, publish_result)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_publish(item_id id, std::string item, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, publish_result)>(
        std::forward<CompletionToken>(token), &feed::start_publish, *this,
        std::optional<std::string>(std::move(id).str()), std::move(item));
  }
  /// Deprecated: async_publish.
  template <class CompletionToken>
  [[deprecated("use async_publish")]] auto publish(item_id id, std::string item,
                                                   CompletionToken&& token) const {
    return async_publish(std::move(id), std::move(item), std::forward<CompletionToken>(token));
  }

 private:
  void start_publish(std::optional<std::string> id, std::string item,
                     handler<publish_result> h) const;
};

}  // namespace thoonk
