// The values feeds and sorted feeds hand back and forth: an item id that
// cannot be mistaken for an item, and an item with its id.
#pragma once

#include <string>
#include <thoonk/export.hpp>
#include <utility>

namespace thoonk {

/// The id of a feed item, where it is passed next to the item itself
/// (feed::async_publish, sorted_feed::async_edit, sorted_feed::async_publish_before/after).
///
/// Ids and items are both strings; a distinct type makes
/// `publish(item, id)` (arguments swapped) a compile error instead of a
/// silent mix-up: `f.publish(thoonk::item_id("a"), "body", token)`. There is
/// deliberately no implicit conversion from or to std::string.
class THOONK_API item_id {
 public:
  /// An id chosen by the caller (publish with this id: a new item or an edit).
  explicit item_id(std::string value) noexcept : value_(std::move(value)) {}

  const std::string& str() const& noexcept { return value_; }  ///< the id
  std::string str() && noexcept { return std::move(value_); }  ///< the id, moved out

  friend bool operator==(const item_id&, const item_id&) = default;

 private:
  std::string value_;
};

/// One item of a feed or sorted feed: its id and its bytes.
struct THOONK_API feed_item {
  std::string id;    ///< the item id
  std::string item;  ///< the item's payload
  friend bool operator==(const feed_item&, const feed_item&) = default;
};

}  // namespace thoonk
