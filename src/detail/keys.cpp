#include "detail/keys.hpp"

#include <thoonk/error.hpp>

namespace thoonk::detail {

feed_names::feed_names(const config& cfg, std::string_view name) : name_(name) {
  bool has_tag = name.find('{') != std::string_view::npos;
  in_key_ = (cfg.cluster_hash_tags || cfg.cluster) && !has_tag ? "{" + name_ + "}" : name_;
  // One server keeps the contract's channel names, whatever the keys.
  sharded_ = cfg.cluster;
  in_channel_ = sharded_ ? in_key_ : name_;
}

std::string feed_names::key(std::string_view what) const {
  std::string k;
  k.reserve(6 + what.size() + in_key_.size());
  k.append("feed.").append(what).append(":").append(in_key_);
  return k;
}

std::string feed_names::channel(std::string_view what) const {
  std::string c;
  c.reserve(6 + what.size() + in_channel_.size());
  c.append("feed.").append(what).append(":").append(in_channel_);
  return c;
}

std::string feed_names::job_result_key(std::string_view id) const {
  std::string k = key("jobfinished");
  k.push_back('\0');
  k.append(id);
  return k;
}

boost::system::error_code validate_name(const config& cfg, std::string_view name) {
  if (name.empty() || name.size() > cfg.max_name_length ||
      name.find('\0') != std::string_view::npos)
    return error::invalid_name;
  if (!cfg.allow_hash_tag_names && name.find_first_of("{}") != std::string_view::npos)
    return error::invalid_name;
  return {};
}

boost::system::error_code validate_id(const config& cfg, std::string_view id) {
  if (id.empty() || id.size() > cfg.max_id_length || id.find('\0') != std::string_view::npos)
    return error::invalid_id;
  return {};
}

boost::system::error_code validate_item(const config& cfg, std::string_view item) {
  if (item.size() > cfg.max_item_size) return error::item_too_large;
  return {};
}

// ---- every key a feed may own -----------------------------------------------

std::vector<std::string> all_keys(const feed_names& n) {
  return {
      // the contract's (docs/contract.md)
      n.key("config"),
      n.key("ids"),
      n.key("items"),
      n.key("publishes"),
      n.key("idincr"),
      // jobs (the contract's Job keys and those beside them, docs/design.md §4)
      n.key("finishes"),
      n.key("published"),
      n.key("claimed"),
      n.key("cancelled"),
      n.key("stalled"),
      // feed catch-up extension (docs/feeds.md)
      n.key("changes"),
      n.key("retracts"),
      n.key("retracttrim"),
      // queue/job extensions (docs/jobs.md): claim tokens, wake-up flag,
      // maintenance suspects and lock. Durable results
      // (feed.jobfinished:[f]\0<id>) expire on their own.
      n.key("attempts"),
      n.key("sleepers"),
      n.key("unaccounted"),
      n.key("maintenance"),
      // job engine (docs/jobs.md): scheduled jobs, job records, held puts
      n.key("scheduled"),
      n.key("scheduled_items"),
      n.key("jobmeta"),
      n.key("held"),
      // worker registry (docs/jobs.md "Workers")
      n.key("workers"),
      n.key("worker_info"),
      n.key("worker_jobs"),
      // hand-off (docs/jobs.md "Hand-off")
      n.key("takers"),
      n.key("handed"),
  };
}

std::string catchup_channel(std::string_view instance_id, const feed_names& names) {
  std::string c = "thoonk.sync:";
  c.append(instance_id);
  if (names.sharded()) c.append(":").append(names.in_key());
  return c;
}

}  // namespace thoonk::detail
