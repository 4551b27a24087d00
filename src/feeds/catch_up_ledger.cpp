#include "feeds/catch_up_ledger.hpp"

#include <functional>

namespace thoonk::detail {

std::size_t catch_up_ledger::fingerprint(std::string_view item) {
  return std::hash<std::string_view>{}(item);
}

const catch_up_ledger::held* catch_up_ledger::find(std::string_view id) const {
  // Heterogeneous lookup needs C++20 transparent hashing, which libstdc++ 12
  // lacks for unordered_map: copy the id (ids are short).
  std::string key(id);
  if (auto it = log_.find(key); it != log_.end()) return &it->second;
  if (auto it = before_split_.find(key); it != before_split_.end()) return &it->second;
  return nullptr;
}

void catch_up_ledger::put(std::string_view id, held h) { log_[std::string(id)] = h; }

void catch_up_ledger::anchor_at(sync_point sp) {
  anchor_ = std::move(sp);
  log_.clear();
  before_split_.clear();
  split_ = false;
  since_anchor_ = 0;
}

void catch_up_ledger::delivered_publish(std::string_view id, std::string_view item) {
  put(id, held{true, fingerprint(item)});
  ++since_anchor_;
}

void catch_up_ledger::delivered_retract(std::string_view id) {
  put(id, held{false, 0});
  ++since_anchor_;
}

void catch_up_ledger::split() {
  // A second split before a commit cannot happen (one re-anchor at a time);
  // merge defensively so nothing delivered is forgotten.
  for (auto& [id, h] : log_) before_split_[id] = h;
  log_.clear();
  split_ = true;
}

void catch_up_ledger::commit(sync_point sp) {
  anchor_ = std::move(sp);
  before_split_.clear();
  window_shown_.clear();
  split_ = false;
  since_anchor_ = log_.size();
}

void catch_up_ledger::unsplit() {
  // Entries delivered after the split are newer: they win.
  for (auto& [id, h] : log_) before_split_[id] = h;
  log_ = std::move(before_split_);
  before_split_.clear();
  split_ = false;
}

bool catch_up_ledger::take_retraction(std::string_view id, std::uint64_t seq) {
  // Logged at the anchor's counter value before the sync read: the
  // application learnt of it before the anchor (a re-publish would have
  // moved the counter on, and a later retraction moves the log entry).
  if (seq == anchor_.seq && anchor_.retracted_at_seq.contains(std::string(id))) return false;
  if (const held* h = find(id); h && !h->present) return false;
  put(id, held{false, 0});
  replayed_.erase(std::string(id));
  return true;
}

bool catch_up_ledger::take_change(std::string_view id, std::string_view item) {
  const std::size_t fp = fingerprint(item);
  if (const held* h = find(id); h && h->present && h->fingerprint == fp) return false;
  put(id, held{true, fp});
  replayed_[std::string(id)] = held{true, fp};
  return true;
}

bool catch_up_ledger::take_window_item(std::string_view id, std::string_view score,
                                       std::string_view item) {
  if (anchor_.window_from && score == *anchor_.window_from &&
      anchor_.window_excluded.contains(std::string(id)))
    return false;
  if (!take_change(id, item)) return false;
  window_shown_[std::string(id)] = held{true, fingerprint(item)};
  return true;
}

bool catch_up_ledger::late_duplicate(std::string_view id, const std::string_view* item) {
  if (window_shown_.empty()) return false;
  auto it = window_shown_.find(std::string(id));
  if (it == window_shown_.end()) return false;
  const bool same = item && it->second.fingerprint == fingerprint(*item);
  window_shown_.erase(it);
  return same;
}

bool catch_up_ledger::take_buffered(std::string_view id, const std::string_view* item) {
  auto it = replayed_.find(std::string(id));
  if (it == replayed_.end()) return true;
  const bool same = item && it->second.fingerprint == fingerprint(*item);
  replayed_.erase(it);  // a later identical change is a change again
  return !same;
}

}  // namespace thoonk::detail
