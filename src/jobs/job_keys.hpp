// Key and channel names of one queue / job queue, in the order the scripts
// of src/lua expect them (layouts/queue.lua, layouts/job.lua). Built once per queue object from
// detail::feed_names (the one place key names are made).
#pragma once

#include "detail/keys.hpp"

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
  enum index : std::size_t {
    config,
    ids,
    items,
    publishes,
    finishes,
    published,
    claimed,
    cancelled,
    stalled,
    attempts,
    sleepers,
    idincr,
    unaccounted,
    scheduled,
    scheduled_items,
    jobmeta,
    held,
    workers,
    worker_info,
    worker_jobs,
    takers,
    handed,
    count
  };

  explicit job_keys(const feed_names& n)
      : names(n),
        keys{n.key("config"),      n.key("ids"),         n.key("items"),
             n.key("publishes"),   n.key("finishes"),    n.key("published"),
             n.key("claimed"),     n.key("cancelled"),   n.key("stalled"),
             n.key("attempts"),    n.key("sleepers"),    n.key("idincr"),
             n.key("unaccounted"), n.key("scheduled"),   n.key("scheduled_items"),
             n.key("jobmeta"),     n.key("held"),        n.key("workers"),
             n.key("worker_info"), n.key("worker_jobs"), n.key("takers"),
             n.key("handed")},
        lock_key(n.key("maintenance")),
        wake_channel(n.channel("wake")),
        finish_channel(n.job_finish_channel()),
        event_channel("job.event:" + keys[config].substr(12)),
        abort_channel("job.abort:" + keys[config].substr(12)) {}

  const std::string& operator[](index i) const { return keys[i]; }

  feed_names names;
  /// The job layout, src/lua/layouts/job.lua (see `index`).
  std::vector<std::string> keys;
  /// `feed.maintenance:[f]`: the maintenance lock (SET NX PX).
  std::string lock_key;
  std::string wake_channel;
  /// `job.finish:name` (docs/contract.md).
  std::string finish_channel;
  /// `job.event:name`: typed job events (layouts/job_engine.lua derives the
  /// same name from the config key).
  std::string event_channel;
  /// `job.abort:name`: the id of every job abort() ended (jobs/abort.lua
  /// derives the same name from the config key).
  std::string abort_channel;
};

/// `job.take:[f]:worker`, from the queue's config key: the channel on which
/// puts hand jobs to that runner (layouts/job_engine.lua take_channel
/// builds the same name).
inline std::string take_channel(const std::string& config_key, const std::string& worker) {
  return "job.take:" + config_key.substr(12) + ":" + worker;
}

}  // namespace thoonk::detail::jobs
