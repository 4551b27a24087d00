#include "connection/cluster.hpp"

#include <thoonk/error.hpp>

#include "detail/parse_int.hpp"

#include <span>

namespace thoonk {

std::uint16_t hash_slot(std::string_view key) noexcept {
  if (auto open = key.find('{'); open != std::string_view::npos) {
    auto close = key.find('}', open + 1);
    if (close != std::string_view::npos && close > open + 1)
      key = key.substr(open + 1, close - open - 1);
  }
  return static_cast<std::uint16_t>(detail::crc16(key) & (cluster_hash_slots - 1));
}

}  // namespace thoonk

namespace thoonk::detail {

using boost::system::error_code;

std::uint16_t crc16(std::string_view data) noexcept {
  std::uint16_t crc = 0;
  for (unsigned char byte : data) {
    crc = static_cast<std::uint16_t>(crc ^ (static_cast<std::uint16_t>(byte) << 8));
    for (int i = 0; i < 8; ++i)
      crc = (crc & 0x8000) ? static_cast<std::uint16_t>((crc << 1) ^ 0x1021)
                           : static_cast<std::uint16_t>(crc << 1);
  }
  return crc;
}

std::string to_string(const cluster_node& n) { return n.host + ":" + std::to_string(n.port); }

config node_config(config base, const cluster_node& node) {
  base.host = node.host;
  base.port = node.port;
  base.endpoints.clear();
  base.unix_socket.clear();
  base.cluster = false;
  return base;
}

// ---- slot_map -------------------------------------------------------------------

slot_map::slot_map() { owner_.fill(none); }

std::size_t slot_map::index_of(const cluster_node& node) {
  for (std::size_t i = 0; i < nodes_.size(); ++i)
    if (nodes_[i] == node) return i;
  nodes_.push_back(node);
  return nodes_.size() - 1;
}

void slot_map::assign(std::uint16_t slot, const cluster_node& node) {
  if (slot >= cluster_slots) return;
  owner_[slot] = static_cast<std::uint16_t>(index_of(node));
}

void slot_map::assign_range(std::uint16_t first, std::uint16_t last, const cluster_node& node) {
  if (first > last || last >= cluster_slots) return;
  auto i = static_cast<std::uint16_t>(index_of(node));
  for (std::size_t s = first; s <= last; ++s) owner_[s] = i;
}

const cluster_node* slot_map::primary_for(std::uint16_t slot) const noexcept {
  if (slot >= cluster_slots || owner_[slot] == none) return nullptr;
  return &nodes_[owner_[slot]];
}

std::size_t slot_map::covered() const noexcept {
  std::size_t n = 0;
  for (auto o : owner_) n += o != none;
  return n;
}

bool slot_map::covers_all() const noexcept { return covered() == cluster_slots; }

bool slot_map::same_routes(const slot_map& other) const noexcept {
  for (std::size_t s = 0; s < cluster_slots; ++s) {
    const bool mine = owner_[s] != none, theirs = other.owner_[s] != none;
    if (mine != theirs) return false;
    if (mine && !(nodes_[owner_[s]] == other.nodes_[other.owner_[s]])) return false;
  }
  return true;
}

namespace {

// A field of a CLUSTER SHARDS entry: RESP3 maps and RESP2 flat arrays both
// hold key, value, key, value ...
const resp3::value* field(const resp3::value& entry, std::string_view name) {
  if (entry.type != resp3::type::map && entry.type != resp3::type::array) return nullptr;
  for (std::size_t i = 0; i + 1 < entry.elements.size(); i += 2)
    if (entry.elements[i].is_string() && entry.elements[i].str == name)
      return &entry.elements[i + 1];
  return nullptr;
}

std::optional<std::int64_t> as_int(const resp3::value* v) {
  if (!v) return std::nullopt;
  if (v->type == resp3::type::number) return v->integer;
  if (v->is_string()) return parse_int<std::int64_t>(v->str);
  return std::nullopt;
}

std::string as_str(const resp3::value* v) { return v && v->is_string() ? v->str : std::string{}; }

bool valid_port(std::optional<std::int64_t> p) { return p && *p > 0 && *p <= 65535; }

bool valid_range(std::optional<std::int64_t> a, std::optional<std::int64_t> b) {
  return a && b && *a >= 0 && *a <= *b && *b < static_cast<std::int64_t>(cluster_slots);
}

std::string host_or_seed(std::string host, const cluster_node& seed) {
  if (host.empty() || host == "?") return seed.host;
  return host;
}

// Assigns the slot ranges [a, b] of `r`, taken two at a time from its
// elements. False when a range is no valid one.
bool assign_ranges(slot_map& m, std::span<const resp3::value> r, const cluster_node& node) {
  for (std::size_t i = 0; i + 1 < r.size(); i += 2) {
    auto a = as_int(&r[i]), b = as_int(&r[i + 1]);
    if (!valid_range(a, b)) return false;
    m.assign_range(static_cast<std::uint16_t>(*a), static_cast<std::uint16_t>(*b), node);
  }
  return true;
}

// The map of a reply that is an array of entries (shards, slot ranges):
// `read_entry(entry, m)` assigns the entry's slots in `m` and returns false
// when the entry is malformed. A reply of another type or with a malformed
// entry gives ec = unexpected_type and an empty map.
template <class ReadEntry>
slot_map read_entries(const resp3::value& reply, error_code& ec, ReadEntry read_entry) {
  slot_map m;
  ec = {};
  if (reply.type != resp3::type::array) {
    ec = error::unexpected_type;
    return m;
  }
  for (const auto& entry : reply.elements) {
    if (!read_entry(entry, m)) {
      ec = error::unexpected_type;
      return slot_map{};
    }
  }
  return m;
}

}  // namespace

slot_map slot_map::from_shards(const resp3::value& reply, const cluster_node& seed,
                               error_code& ec) {
  return read_entries(reply, ec, [&](const resp3::value& shard, slot_map& m) {
    const auto* slots = field(shard, "slots");
    const auto* nodes = field(shard, "nodes");
    if (!slots || !nodes || slots->type != resp3::type::array || nodes->type != resp3::type::array)
      return false;
    for (const auto& node : nodes->elements) {
      if (as_str(field(node, "role")) != "master") continue;
      auto port = as_int(field(node, "port"));
      if (!valid_port(port)) port = as_int(field(node, "tls-port"));
      if (!valid_port(port)) continue;
      auto host = as_str(field(node, "endpoint"));
      if (host.empty() || host == "?") host = as_str(field(node, "ip"));
      cluster_node primary{host_or_seed(std::move(host), seed), static_cast<std::uint16_t>(*port)};
      return assign_ranges(m, slots->elements, primary);
    }
    return true;  // no primary: skipped
  });
}

slot_map slot_map::from_slots(const resp3::value& reply, const cluster_node& seed, error_code& ec) {
  return read_entries(reply, ec, [&](const resp3::value& range, slot_map& m) {
    if (range.type != resp3::type::array || range.elements.size() < 3) return false;
    const auto& e = range.elements;
    const auto& primary = e[2];
    if (primary.type != resp3::type::array || primary.elements.size() < 2) return false;
    auto port = as_int(&primary.elements[1]);
    if (!valid_port(port)) return false;
    cluster_node node{host_or_seed(as_str(&primary.elements[0]), seed),
                      static_cast<std::uint16_t>(*port)};
    return assign_ranges(m, std::span(e).first(2), node);
  });
}

// ---- slot_order -------------------------------------------------------------------

void slot_order::on_send(ticket& t) noexcept {
  if (t.draining || t.sent) return;
  t.sent = true;
  t.epoch = epoch_;
  ++inflight_;
}

void slot_order::on_answer(ticket& t) noexcept {
  if (!t.sent) return;
  t.sent = false;
  if (t.draining) return;
  if (t.epoch == epoch_) {
    --inflight_;
  } else {
    t.draining = true;  // counted among the draining by the route change
  }
}

void slot_order::hold(ticket& t) noexcept {
  if (t.draining) return;
  if (t.sent) on_answer(t);
  if (t.draining) return;
  t.draining = true;
  ++draining_;
}

bool slot_order::release(ticket& t) noexcept {
  if (t.sent) on_answer(t);
  if (!t.draining) return false;
  t.draining = false;
  --draining_;
  return draining_ == 0;
}

void slot_order::on_route_change() noexcept {
  ++epoch_;
  draining_ += inflight_;
  inflight_ = 0;
}

// ---- redirects ------------------------------------------------------------------

redirect parse_redirect(const resp3::value& reply) {
  redirect r;
  if (!reply.is_error()) return r;
  std::string_view s = reply.str;
  auto word = s.substr(0, s.find(' '));
  if (word == "TRYAGAIN") {
    r.kind = redirect::tryagain;
    return r;
  }
  if (word == "CLUSTERDOWN") {
    r.kind = redirect::clusterdown;
    return r;
  }
  if (word != "MOVED" && word != "ASK") return r;
  // MOVED <slot> <host>:<port>; the host may be an IPv6 address (the last
  // ':' separates the port) or empty (an endpoint the server does not know).
  auto rest = s.substr(word.size());
  if (rest.empty() || rest.front() != ' ') return r;
  rest.remove_prefix(1);
  auto sp = rest.find(' ');
  if (sp == std::string_view::npos) return r;
  auto slot_text = rest.substr(0, sp);
  auto addr = rest.substr(sp + 1);
  addr = addr.substr(0, addr.find_first_of(" \r\n"));
  const auto slot = parse_int<unsigned>(slot_text);
  if (!slot || *slot >= cluster_slots) return r;
  auto colon = addr.rfind(':');
  if (colon == std::string_view::npos) return r;
  auto port_text = addr.substr(colon + 1);
  const auto port = parse_int<unsigned>(port_text);
  if (!port || *port == 0 || *port > 65535) return r;
  r.kind = word == "MOVED" ? redirect::moved : redirect::ask;
  r.slot = static_cast<std::uint16_t>(*slot);
  r.target.host = std::string(addr.substr(0, colon));
  r.target.port = static_cast<std::uint16_t>(*port);
  return r;
}

namespace {

// Reads `<prefix><digits>\r\n` at the front of `p`.
bool read_header(std::string_view& p, char prefix, std::size_t& n) {
  if (p.empty() || p.front() != prefix) return false;
  auto end = p.find("\r\n");
  if (end == std::string_view::npos) return false;
  const auto v = parse_int<std::size_t>(p.substr(1, end - 1));
  if (!v) return false;
  n = *v;
  p.remove_prefix(end + 2);
  return true;
}

}  // namespace

request asking_request(const request& req) {
  request out;
  std::string_view p = req.payload();
  std::vector<std::string_view> args;
  while (!p.empty()) {
    std::size_t argc = 0;
    if (!read_header(p, '*', argc) || argc == 0) break;  // never: the library serialized it
    args.clear();
    for (std::size_t i = 0; i < argc; ++i) {
      std::size_t len = 0;
      if (!read_header(p, '$', len) || p.size() < len + 2) return out;
      args.push_back(p.substr(0, len));
      p.remove_prefix(len + 2);
    }
    out.push("ASKING");
    out.begin_command(argc, args.front());
    for (auto a : args) out.append_arg(a);
  }
  return out;
}

void drop_asking_replies(response& replies) {
  std::size_t w = 0;
  for (std::size_t r = 1; r < replies.size(); r += 2) replies[w++] = std::move(replies[r]);
  replies.resize(w);
}

redirect_policy::redirect_policy(unsigned max_redirects, unsigned max_retries,
                                 std::chrono::milliseconds min_delay,
                                 std::chrono::milliseconds max_delay) noexcept
    : max_redirects_(max_redirects),
      max_retries_(max_retries),
      min_delay_(min_delay),
      max_delay_(max_delay) {}

redirect_policy::redirect_policy(const config& cfg) noexcept
    : redirect_policy(cfg.cluster_max_redirects, cfg.unavailable_retries, cfg.reconnect_min_delay,
                      cfg.reconnect_max_delay) {}

redirect_action redirect_policy::decide(const response& replies, const cluster_node& answered_by) {
  redirect_action a;
  for (const auto& v : replies) {
    auto r = parse_redirect(v);
    if (r.kind == redirect::none) continue;
    if (r.kind == redirect::tryagain || r.kind == redirect::clusterdown) {
      if (retries_ >= max_retries_) {
        a.kind = redirect_action::give_up;
        return a;
      }
      auto d = min_delay_;
      for (unsigned i = 0; i < retries_ && d < max_delay_; ++i) d *= 2;
      a.delay = d < max_delay_ ? d : max_delay_;
      ++retries_;
      a.kind = redirect_action::retry_later;
      a.cause = r.kind;
      return a;
    }
    if (redirects_ >= max_redirects_) {
      a.kind = redirect_action::give_up;
      return a;
    }
    ++redirects_;
    a.kind = r.kind == redirect::moved ? redirect_action::resend : redirect_action::ask;
    a.cause = r.kind;
    a.slot = r.slot;
    a.target = std::move(r.target);
    if (a.target.host.empty()) a.target.host = answered_by.host;
    return a;
  }
  return a;
}

// ---- waits -----------------------------------------------------------------------

std::chrono::milliseconds request_deadline::left(clock::time_point now) const noexcept {
  using std::chrono::milliseconds;
  if (!bounded()) return milliseconds(0);
  if (now >= at_) return milliseconds(1);
  // Rounded up: a request never gets less time than the deadline leaves.
  auto ms = std::chrono::ceil<milliseconds>(at_ - now);
  return ms.count() > 0 ? ms : milliseconds(1);
}

bool route_wait::satisfied(const slot_map* m, std::uint64_t version) const noexcept {
  if (any_change_) return version != version_;
  if (!m) return false;
  const auto* p = m->primary_for(slot_);
  return p && (!failed_ || !(*p == *failed_));
}

std::chrono::milliseconds map_poll_interval(const config& cfg) noexcept {
  using std::chrono::milliseconds;
  return std::clamp(cfg.reconnect_min_delay, milliseconds(10), milliseconds(100));
}

}  // namespace thoonk::detail
