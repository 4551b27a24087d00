// The one place where key and channel names are built (docs/design.md §4), and
// where names, ids and items are validated before any I/O.
#pragma once

#include <thoonk/config.hpp>

#include <boost/system/error_code.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace thoonk::detail {

/// The set of all feed names.
inline constexpr std::string_view feeds_key = "feeds";
/// Management channels; payload `name\0instance-uuid`.
inline constexpr std::string_view newfeed_channel = "newfeed";
inline constexpr std::string_view delfeed_channel = "delfeed";
inline constexpr std::string_view conffeed_channel = "conffeed";

/// Names of one feed's keys and channels.
///
/// Keys are `feed.<what>:[f]`, where [f] is the feed name, or `{name}` when
/// config::cluster_hash_tags is set (so all of a feed's keys share a slot).
/// Channels use the bare name, as the contract does: `feed.<what>:name`,
/// plus `job.finish:name`; in cluster mode (config::cluster) they carry
/// [f] as the keys do (`feed.publish:{orders}`), because the scripts send
/// them with SPUBLISH, which inside a script must stay in the script's
/// slot (docs/cluster.md, "Notifications").
class feed_names {
 public:
  feed_names(const config& cfg, std::string_view name);

  const std::string& name() const noexcept { return name_; }
  /// `feed.<what>:[f]`, e.g. key("ids") → "feed.ids:orders".
  std::string key(std::string_view what) const;
  /// `feed.<what>:name`, e.g. channel("publish") → "feed.publish:orders"
  /// ("feed.publish:{orders}" in cluster mode).
  std::string channel(std::string_view what) const;
  /// `job.finish:name` (`job.finish:{name}` in cluster mode).
  std::string job_finish_channel() const { return "job.finish:" + in_channel_; }
  /// The name as it appears in keys: `name` or `{name}`.
  const std::string& in_key() const noexcept { return in_key_; }
  /// Whether the channels are sharded ones (cluster mode): subscribe to
  /// them with SSUBSCRIBE (detail::subscribe_notifications).
  bool sharded() const noexcept { return sharded_; }
  /// The durable result list: `feed.jobfinished:[f]\0<id>` (docs/contract.md).
  std::string job_result_key(std::string_view id) const;

 private:
  std::string name_;
  std::string in_key_;      // the name as it appears inside keys
  std::string in_channel_;  // the name as it appears inside channels
  bool sharded_ = false;
};

/// error::invalid_name unless 1..max_name_length bytes, no NUL, and no
/// braces unless config::allow_hash_tag_names.
boost::system::error_code validate_name(const config& cfg, std::string_view name);
/// error::invalid_id unless 1..max_id_length bytes and no NUL.
boost::system::error_code validate_id(const config& cfg, std::string_view id);
/// error::item_too_large beyond config::max_item_size.
boost::system::error_code validate_item(const config& cfg, std::string_view item);

// ---- every key a feed may own ---------------------------------------------------

/// Every per-feed key name a feed of any type may own, for delete_feed and
/// for create_feed (which clears leftovers of a half-deleted feed). Contract
/// keys first, then the library's extensions, the job-queue keys included:
/// anything a feed can own must be in this list.
std::vector<std::string> all_keys(const feed_names& names);

/// The private pub/sub channel one client instance uses to mark the point of
/// a catch-up read of feed `names` in its subscriber's message stream:
/// `thoonk.sync:<instance-uuid>` (see docs/feeds.md, "Catch-up"). In
/// cluster mode the marker must travel the feed's shard channel stream, so
/// it carries the feed's hash tag: `thoonk.sync:<instance-uuid>:{name}`.
std::string catchup_channel(std::string_view instance_id, const feed_names& names);

}  // namespace thoonk::detail
