// Key and channel names of one queue / job queue, in the order the scripts
// of src/lua expect them (layouts/queue.lua, layouts/job.keys). Built once per queue object from
// detail::feed_names (the one place key names are made).
#pragma once

#include "detail/keys.hpp"
#include "thoonk_lua_layouts.hpp"

#include <iterator>
#include <string>
#include <vector>

namespace thoonk::detail::jobs {

struct queue_keys {
  explicit queue_keys(const feed_names& n)
      : names(n),
        keys{n.key("config"),    n.key("ids"),    n.key("items"),
             n.key("publishes"), n.key("idincr"), n.key("sleepers")},
        wake_channel(n.channel("wake")) {}

  feed_names names;
  /// config, ids, items, publishes, idincr, sleepers.
  std::vector<std::string> keys;
  /// `feed.wake:name`: put scripts PUBLISH here when a getter sleeps.
  std::string wake_channel;
};

struct job_keys {
  /// The keys of the job layout, in KEYS order: src/lua/layouts/job.keys,
  /// the one list the scripts' K_... names are made from too.
  // clang-format off
  enum index : std::size_t {
#define THOONK_JOB_KEY_INDEX(key) key,
    THOONK_LAYOUT_JOB_KEYS(THOONK_JOB_KEY_INDEX)
#undef THOONK_JOB_KEY_INDEX
    count
  };
  // clang-format on
  static_assert(count == std::size(layouts::job_keys));

  explicit job_keys(const feed_names& n)
      : names(n),
        keys(layout_keys(n)),
        lock_key(n.key("maintenance")),
        wake_channel(n.channel("wake")),
        finish_channel(n.job_finish_channel()),
        event_channel("job.event:" + keys[config].substr(12)),
        abort_channel("job.abort:" + keys[config].substr(12)) {}

  const std::string& operator[](index i) const { return keys[i]; }

  static std::vector<std::string> layout_keys(const feed_names& n) {
    std::vector<std::string> k;
    k.reserve(count);
    for (auto key : layouts::job_keys) k.push_back(n.key(key));
    return k;
  }

  feed_names names;
  /// The job layout, src/lua/layouts/job.keys (see `index`).
  std::vector<std::string> keys;
  /// `feed.maintenance:[f]`: the maintenance lock (SET NX PX).
  std::string lock_key;
  std::string wake_channel;
  /// `job.finish:name` (docs/contract.md).
  std::string finish_channel;
  /// `job.event:name`: typed job events (includes/job_queue.lua derives the
  /// same name from the config key).
  std::string event_channel;
  /// `job.abort:name`: the id of every job abort() ended (jobs/abort.lua
  /// derives the same name from the config key).
  std::string abort_channel;
};

/// `job.take:[f]:worker`, from the queue's config key: the channel on which
/// puts hand jobs to that runner (includes/hand_off.lua take_channel
/// builds the same name).
inline std::string take_channel(const std::string& config_key, const std::string& worker) {
  return "job.take:" + config_key.substr(12) + ":" + worker;
}

}  // namespace thoonk::detail::jobs
