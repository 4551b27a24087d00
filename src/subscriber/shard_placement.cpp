#include "subscriber/shard_placement.hpp"

#include <algorithm>

namespace thoonk::detail {

cluster_node shard_placement::target_for(const entry& e, const lookup& map) const {
  if (auto t = map ? map(e.slot) : std::nullopt) return *t;
  return e.node;
}

cluster_node shard_placement::add(const std::string& channel, const lookup& map) {
  entry e;
  e.slot = hash_slot(channel);
  e.node = default_;
  e.node = target_for(e, map);
  e.st = state::pending;
  auto node = e.node;
  channels_[channel] = std::move(e);
  return node;
}

std::optional<cluster_node> shard_placement::remove(const std::string& channel) {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return std::nullopt;
  std::optional<cluster_node> out;
  if (it->second.st != state::unplaced) out = it->second.node;
  channels_.erase(it);
  return out;
}

bool shard_placement::on_confirmed(const std::string& channel, const cluster_node& node) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || !(it->second.node == node)) return false;
  it->second.st = state::subscribed;
  it->second.lost = false;
  it->second.node_down = false;
  return true;
}

std::optional<cluster_node> shard_placement::on_moved(const std::string& channel,
                                                      const cluster_node& node,
                                                      const cluster_node& target) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || !(it->second.node == node) || it->second.st == state::subscribed)
    return std::nullopt;
  it->second.node = target;
  it->second.st = state::pending;
  it->second.node_down = false;
  return target;
}

void shard_placement::on_retry(const std::string& channel, const cluster_node& node) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || !(it->second.node == node) || it->second.st == state::subscribed)
    return;
  it->second.st = state::unplaced;
}

bool shard_placement::on_server_unsubscribed(const std::string& channel, const cluster_node& node) {
  auto it = channels_.find(channel);
  if (it == channels_.end() || !(it->second.node == node) || it->second.st != state::subscribed)
    return false;
  it->second.st = state::unplaced;
  it->second.lost = true;
  return true;
}

bool shard_placement::on_node_lost(const cluster_node& node) {
  bool any = false;
  for (auto& [name, e] : channels_) {
    if (!(e.node == node)) continue;
    if (e.st == state::subscribed) {
      e.lost = true;
      any = true;
    }
    e.st = state::pending;
    e.node_down = true;
  }
  return any;
}

std::vector<std::string> shard_placement::on_node_setup(const cluster_node& node) {
  std::vector<std::string> out;
  for (auto& [name, e] : channels_) {
    if (!(e.node == node)) continue;
    e.st = state::pending;
    e.node_down = false;
    out.push_back(name);
  }
  return out;
}

std::vector<shard_placement::send> shard_placement::plan(const lookup& map) {
  std::vector<send> out;
  for (auto& [name, e] : channels_) {
    const cluster_node to = target_for(e, map);
    if (!(to == e.node)) {
      send s{name, to, std::nullopt};
      if (e.st == state::subscribed) {
        s.unsubscribe_from = e.node;
        e.lost = true;
      }
      e.node = to;
      e.st = state::pending;
      e.node_down = false;
      out.push_back(std::move(s));
    } else if (e.st == state::unplaced) {
      e.st = state::pending;
      out.push_back(send{name, to, std::nullopt});
    }
  }
  return out;
}

bool shard_placement::any_lost() const noexcept {
  return std::any_of(channels_.begin(), channels_.end(),
                     [](const auto& c) { return c.second.lost; });
}

bool shard_placement::needs_work() const noexcept {
  return std::any_of(channels_.begin(), channels_.end(), [](const auto& c) {
    return c.second.lost || c.second.node_down || c.second.st == state::unplaced;
  });
}

std::vector<cluster_node> shard_placement::nodes() const {
  std::vector<cluster_node> out;
  for (const auto& [name, e] : channels_)
    if (std::find(out.begin(), out.end(), e.node) == out.end()) out.push_back(e.node);
  return out;
}

std::optional<cluster_node> shard_placement::node_of(const std::string& channel) const {
  auto it = channels_.find(channel);
  if (it == channels_.end()) return std::nullopt;
  return it->second.node;
}

}  // namespace thoonk::detail
