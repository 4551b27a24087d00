// Sorted feed: a manually ordered list of items with auto-increment ids and
// publish / retract / position notifications (contract "Sorted Feed";
// docs/feeds.md).
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/detail/feed_base.hpp>
#include <thoonk/export.hpp>
#include <thoonk/feed_events.hpp>
#include <thoonk/feed_item.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <utility>

namespace thoonk {

/// The settings of a sorted feed: none. The contract gives sorted feeds no
/// config field that the library reads; in particular **sorted feeds ignore
/// `max_length`**: nothing is ever evicted from a sorted feed (a
/// `max_length` field written with client::async_set_config is stored and has no
/// effect). The type exists so that create_or_open and read_settings look
/// the same for every kind of feed; application fields stay readable with
/// client::async_get_config.
struct THOONK_API sorted_feed_settings {
  /// No fields: empty.
  feed_config to_fields() const { return {}; }
  /// A sorted feed has no settings: none to read.
  static sorted_feed_settings from_fields(const feed_config&) { return {}; }
  /// Always empty: there is nothing to refuse.
  std::string problem() const { return {}; }
  friend bool operator==(const sorted_feed_settings&, const sorted_feed_settings&) = default;
};
template <>
inline constexpr bool is_operation_argument_v<sorted_feed_settings> = true;

/// A handle of one feed of type `sorted_feed` on a client.
///
/// Keys (docs/contract.md): `feed.ids:[f]` (list of ids, in order),
/// `feed.items:[f]` (hash id → item), `feed.idincr:[f]` (id counter: ids
/// are "1", "2", ...), `feed.publishes:[f]` (counter). Inserting operations
/// PUBLISH `feed.publish` `id\0item` then `feed.position` `id\0pos`; edit
/// PUBLISHes `feed.publish` only (as the contract says); the moves PUBLISH
/// `feed.position`; retract `feed.retract` `id`. Each operation is one
/// atomic Lua script, notification included, that checks everything it can
/// refuse before its first write: a refused operation changes nothing.
///
/// Operations naming an id that is not in the feed (edit, the moves, the
/// relative id of publish_before/after and of move_before/after) fail with
/// error::id_not_found. Sorted feeds have no `max_length` (see
/// sorted_feed_settings). Get a handle with async_open() or async_create_or_open().
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
class THOONK_API sorted_feed : public detail::feed_base<sorted_feed, sorted_feed_settings> {
 public:
  using settings = sorted_feed_settings;  ///< the creation settings of this kind of feed
  static constexpr feed_type kind = feed_type::sorted_feed;  ///< the stored `type` of a sorted feed

  /// An empty handle; only assign to it.
  sorted_feed() = default;
  /// A handle without any check (no I/O). Prefer async_open() or async_create_or_open().
  sorted_feed(client& c, std::string name) : feed_base(c, std::move(name), kind) {}

  /// Appends `item` at the end (RPUSH; position `:end`). Completion
  /// `void(error_code, std::string id)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_append(std::string item, CompletionToken&& token = {}) const {
    return async_insert(feed_position::at_end(), std::move(item),
                        std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_append.
  template <class CompletionToken>
  [[deprecated("use async_append")]] auto append(std::string item, CompletionToken&& token) const {
    return async_append(std::move(item), std::forward<CompletionToken>(token));
  }

  /// Inserts `item` at the beginning (LPUSH; position `begin:`). Completion
  /// `void(error_code, std::string id)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_prepend(std::string item, CompletionToken&& token = {}) const {
    return async_insert(feed_position::at_begin(), std::move(item),
                        std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_prepend.
  template <class CompletionToken>
  [[deprecated("use async_prepend")]] auto prepend(std::string item,
                                                   CompletionToken&& token) const {
    return async_prepend(std::move(item), std::forward<CompletionToken>(token));
  }

  /// Inserts `item` before the item `before` (position `:<before>`).
  /// Completion `void(error_code, std::string id)`; error::id_not_found when
  /// `before` is not in the feed.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_publish_before(item_id before, std::string item, CompletionToken&& token = {}) const {
    return async_insert(feed_position::before_id(std::move(before).str()), std::move(item),
                        std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_publish_before.
  template <class CompletionToken>
  [[deprecated("use async_publish_before")]] auto publish_before(item_id before, std::string item,
                                                                 CompletionToken&& token) const {
    return async_publish_before(std::move(before), std::move(item),
                                std::forward<CompletionToken>(token));
  }

  /// Inserts `item` after the item `after` (position `<after>:`).
  /// Completion `void(error_code, std::string id)`; error::id_not_found when
  /// `after` is not in the feed.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_publish_after(item_id after, std::string item, CompletionToken&& token = {}) const {
    return async_insert(feed_position::after_id(std::move(after).str()), std::move(item),
                        std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_publish_after.
  template <class CompletionToken>
  [[deprecated("use async_publish_after")]] auto publish_after(item_id after, std::string item,
                                                               CompletionToken&& token) const {
    return async_publish_after(std::move(after), std::move(item),
                               std::forward<CompletionToken>(token));
  }

  /// Inserts `item` at `pos`: the four functions above in one, for a
  /// position that is data (for instance one read from another feed's
  /// `feed.position` event). Completion `void(error_code, std::string id)`.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_insert(feed_position pos, std::string item, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code, std::string)>(
        std::forward<CompletionToken>(token), &sorted_feed::start_insert, *this, std::move(pos),
        std::move(item));
  }
  /// Deprecated: async_insert.
  template <class CompletionToken>
  [[deprecated("use async_insert")]] auto insert(feed_position pos, std::string item,
                                                 CompletionToken&& token) const {
    return async_insert(std::move(pos), std::move(item), std::forward<CompletionToken>(token));
  }

  /// Replaces the item of `id` (its position is unchanged) and PUBLISHes
  /// `feed.publish` `id\0item`. Completion `void(error_code)`;
  /// error::id_not_found when `id` is not in the feed.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_edit(item_id id, std::string item, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &sorted_feed::start_edit, *this,
                                                             std::move(id).str(), std::move(item));
  }
  /// Deprecated: async_edit.
  template <class CompletionToken>
  [[deprecated("use async_edit")]] auto edit(item_id id, std::string item,
                                             CompletionToken&& token) const {
    return async_edit(std::move(id), std::move(item), std::forward<CompletionToken>(token));
  }

  /// Moves `id` to the beginning; `feed.position` gets `id\0begin:`.
  /// Completion `void(error_code)`; error::id_not_found when `id` is not in
  /// the feed.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_move_to_begin(std::string id, CompletionToken&& token = {}) const {
    return async_move(std::move(id), feed_position::at_begin(),
                      std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_move_to_begin.
  template <class CompletionToken>
  [[deprecated("use async_move_to_begin")]] auto move_to_begin(std::string id,
                                                               CompletionToken&& token) const {
    return async_move_to_begin(std::move(id), std::forward<CompletionToken>(token));
  }

  /// Moves `id` to the end; `feed.position` gets `id\0:end`. Completion and
  /// errors as async_move_to_begin().
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_move_to_end(std::string id, CompletionToken&& token = {}) const {
    return async_move(std::move(id), feed_position::at_end(), std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_move_to_end.
  template <class CompletionToken>
  [[deprecated("use async_move_to_end")]] auto move_to_end(std::string id,
                                                           CompletionToken&& token) const {
    return async_move_to_end(std::move(id), std::forward<CompletionToken>(token));
  }

  /// Moves `id` just before `other`; `feed.position` gets `id\0:<other>`.
  /// Completion `void(error_code)`; error::id_not_found when `id` or
  /// `other` is not in the feed; error::invalid_argument, before any I/O,
  /// when `other` is `id` itself.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_move_before(std::string id, std::string other, CompletionToken&& token = {}) const {
    return async_move(std::move(id), feed_position::before_id(std::move(other)),
                      std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_move_before.
  template <class CompletionToken>
  [[deprecated("use async_move_before")]] auto move_before(std::string id, std::string other,
                                                           CompletionToken&& token) const {
    return async_move_before(std::move(id), std::move(other), std::forward<CompletionToken>(token));
  }

  /// Moves `id` just after `other`; `feed.position` gets `id\0<other>:`.
  /// Completion and errors as async_move_before().
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_move_after(std::string id, std::string other, CompletionToken&& token = {}) const {
    return async_move(std::move(id), feed_position::after_id(std::move(other)),
                      std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_move_after.
  template <class CompletionToken>
  [[deprecated("use async_move_after")]] auto move_after(std::string id, std::string other,
                                                         CompletionToken&& token) const {
    return async_move_after(std::move(id), std::move(other), std::forward<CompletionToken>(token));
  }

  /// Moves `id` to `pos`: the four moves above in one, for a position that
  /// is data (for instance mirroring another sorted feed's position
  /// events). Completion and errors as those.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_move(std::string id, feed_position pos, CompletionToken&& token = {}) const {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &sorted_feed::start_move, *this,
                                                             std::move(id), std::move(pos));
  }
  /// Deprecated: async_move.
  template <class CompletionToken>
  [[deprecated("use async_move")]] auto move(std::string id, feed_position pos,
                                             CompletionToken&& token) const {
    return async_move(std::move(id), std::move(pos), std::forward<CompletionToken>(token));
  }

 private:
  void start_insert(feed_position pos, std::string item, handler<std::string> h) const;
  void start_edit(std::string id, std::string item, handler<> h) const;
  void start_move(std::string id, feed_position pos, handler<> h) const;
};

}  // namespace thoonk
