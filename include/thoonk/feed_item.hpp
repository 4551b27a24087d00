// The values feeds and sorted feeds hand back and forth: an item id that
// cannot be mistaken for an item, and an item with its id.
#pragma once

#include <string>
#include <utility>

namespace thoonk {

/// The id of a feed item, where it is passed next to the item itself
/// (feed::async_publish, sorted_feed::async_edit, sorted_feed::async_publish_before/after).
///
/// Ids and items are both strings; a distinct type makes
/// `publish(item, id)` (arguments swapped) a compile error instead of a
/// silent mix-up: `f.publish(thoonk::item_id("a"), "body", token)`. There is
/// deliberately no implicit conversion from or to std::string.
class item_id {
 public:
  explicit item_id(std::string value) noexcept : value_(std::move(value)) {}

  const std::string& str() const& noexcept { return value_; }
  std::string str() && noexcept { return std::move(value_); }

  friend bool operator==(const item_id&, const item_id&) = default;

 private:
  std::string value_;
};

/// One item of a feed or sorted feed: its id and its bytes.
struct feed_item {
  std::string id;
  std::string item;
  friend bool operator==(const feed_item&, const feed_item&) = default;
};

}  // namespace thoonk
