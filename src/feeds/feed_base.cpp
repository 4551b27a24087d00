// The operations feeds and sorted feeds share (include/thoonk/detail/feed_base.hpp):
// each is written once and picks its commands by feed kind where the two
// store their ids differently (feeds: a zset scored by publish time; sorted
// feeds: a list). Every coroutine returns the op_status of its request or
// script, so the server's text reaches the caller's diagnostics.
#include <thoonk/detail/feed_base.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/sorted_feed.hpp>

#include "detail/keys.hpp"
#include "detail/spawn.hpp"
#include "detail/use_nothrow.hpp"
#include "feeds/common.hpp"
#include "feeds/subscription.hpp"
#include "scripts/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;
using opt_string = std::optional<std::string>;

namespace {

bool is_feed(feed_type kind) { return kind == feed_type::feed; }

// One type-checked read in one round trip: the type check, then `req`'s
// command on the feed's keys; yields that command's reply.
asio::awaitable<std::tuple<op_status, resp3::value>> checked_read(detail::client_core& c,
                                                                  const feed_names& n,
                                                                  feed_type kind, request req) {
  auto [st, resp] = co_await exec_checked(c, n, req, kind);
  if (st) co_return std::tuple{std::move(st), resp3::value{}};
  co_return std::tuple{op_status{}, std::move(resp[1])};
}

// A request that starts with the type check (push_type_check).
request type_checked(const feed_names& n) {
  request req;
  push_type_check(req, n);
  return req;
}

asio::awaitable<op_result<bool>> retract_op(detail::client_core& c, std::string name,
                                            feed_type kind, std::string id) {
  const auto& cfg = c.get_config();
  if (auto ec = validate_name_and_id(cfg, name, id)) co_return std::tuple{ec, false};
  feed_names n(cfg, name);
  std::vector<std::string> args;
  args.push_back(std::move(id));
  args.push_back(n.channel("retract"));
  const auto& s = is_feed(kind) ? scripts::feeds_retract() : scripts::sorted_feeds_retract();
  auto [st, v] = co_await run_script(c, s, data_keys(n), std::move(args));
  bool removed = !st && v.integer == 1;
  co_return std::tuple{std::move(st), removed};
}

asio::awaitable<op_result<std::vector<std::string>>> get_ids_op(detail::client_core& c,
                                                                std::string name, feed_type kind) {
  std::vector<std::string> out;
  if (auto ec = validate_name(c.get_config(), name)) co_return std::tuple{ec, std::move(out)};
  feed_names n(c.get_config(), name);
  auto req = type_checked(n);
  req.push(is_feed(kind) ? "ZRANGE" : "LRANGE", n.key("ids"), 0, -1);
  auto [st, v] = co_await checked_read(c, n, kind, std::move(req));
  for (auto& e : v.elements) out.push_back(std::move(e.str));
  co_return std::tuple{std::move(st), std::move(out)};
}

asio::awaitable<op_result<opt_string>> get_item_op(detail::client_core& c, std::string name,
                                                   feed_type kind, std::string id) {
  const auto& cfg = c.get_config();
  if (auto ec = validate_name_and_id(cfg, name, id)) co_return std::tuple{ec, opt_string{}};
  feed_names n(cfg, name);
  auto req = type_checked(n);
  req.push("HGET", n.key("items"), id);
  auto [st, v] = co_await checked_read(c, n, kind, std::move(req));
  co_return std::tuple{std::move(st), as_opt_string(v)};
}

asio::awaitable<op_result<std::vector<opt_string>>> get_items_op(detail::client_core& c,
                                                                 std::string name, feed_type kind,
                                                                 std::vector<std::string> ids) {
  const auto& cfg = c.get_config();
  std::vector<opt_string> out;
  error_code ec = validate_name(cfg, name);
  if (!ec) ec = validate_ids(cfg, ids);
  if (ec) co_return std::tuple{ec, std::move(out)};
  feed_names n(cfg, name);
  auto req = type_checked(n);
  if (ids.empty()) {
    // Still one round trip: an empty list of a missing feed is an error.
    auto [st, resp] = co_await exec_checked(c, n, req, kind);
    co_return std::tuple{std::move(st), std::move(out)};
  }
  std::string items_key = n.key("items");
  std::string_view head[] = {items_key};
  req.push_range("HMGET", head, ids);
  auto [st, v] = co_await checked_read(c, n, kind, std::move(req));
  if (st) co_return std::tuple{std::move(st), std::move(out)};
  if (v.elements.size() != ids.size())
    co_return std::tuple{op_status(error::unexpected_type), std::move(out)};
  for (auto& e : v.elements) out.push_back(as_opt_string(e));
  co_return std::tuple{op_status{}, std::move(out)};
}

// Get All in one atomic step (src/lua/feeds/get_all.lua), paired up.
asio::awaitable<op_result<std::vector<feed_item>>> get_all_op(detail::client_core& c,
                                                              std::string name, feed_type kind) {
  std::vector<feed_item> out;
  if (auto ec = validate_name(c.get_config(), name)) co_return std::tuple{ec, std::move(out)};
  feed_names n(c.get_config(), name);
  std::vector<std::string> args;
  args.emplace_back(to_string(kind));
  auto [st, v] = co_await run_script(c, scripts::feeds_get_all(), data_keys(n), std::move(args));
  if (st) co_return std::tuple{std::move(st), std::move(out)};
  if (v.elements.size() % 2 != 0)
    co_return std::tuple{op_status(error::unexpected_type), std::move(out)};
  out.reserve(v.elements.size() / 2);
  for (std::size_t i = 0; i + 1 < v.elements.size(); i += 2)
    out.push_back(feed_item{std::move(v.elements[i].str), std::move(v.elements[i + 1].str)});
  co_return std::tuple{op_status{}, std::move(out)};
}

asio::awaitable<op_result<bool>> has_id_op(detail::client_core& c, std::string name, feed_type kind,
                                           std::string id) {
  const auto& cfg = c.get_config();
  if (auto ec = validate_name_and_id(cfg, name, id)) co_return std::tuple{ec, false};
  feed_names n(cfg, name);
  auto req = type_checked(n);
  // Each kind asks the structure that orders it: the zset for a feed, the
  // items hash for a sorted feed (LPOS on the list would be O(n)).
  if (is_feed(kind)) req.push("ZSCORE", n.key("ids"), id);
  else req.push("HEXISTS", n.key("items"), id);
  auto [st, v] = co_await checked_read(c, n, kind, std::move(req));
  bool present = !st && (is_feed(kind) ? !v.is_null() : v.integer == 1);
  co_return std::tuple{std::move(st), present};
}

asio::awaitable<op_result<std::uint64_t>> length_op(detail::client_core& c, std::string name,
                                                    feed_type kind) {
  if (auto ec = validate_name(c.get_config(), name)) co_return std::tuple{ec, std::uint64_t{0}};
  feed_names n(c.get_config(), name);
  auto req = type_checked(n);
  req.push(is_feed(kind) ? "ZCARD" : "LLEN", n.key("ids"));
  auto [st, v] = co_await checked_read(c, n, kind, std::move(req));
  if (st) co_return std::tuple{std::move(st), std::uint64_t{0}};
  error_code vec;
  auto len = as_u64(v, vec);
  co_return std::tuple{op_status(vec), len};
}

// Every config field of the feed, after the type check.
asio::awaitable<op_result<feed_config>> read_config_op(detail::client_core& c, std::string name,
                                                       feed_type kind) {
  feed_config out;
  if (auto ec = validate_name(c.get_config(), name)) co_return std::tuple{ec, std::move(out)};
  feed_names n(c.get_config(), name);
  auto req = type_checked(n);
  req.push("HGETALL", n.key("config"));
  auto [st, v] = co_await checked_read(c, n, kind, std::move(req));
  for (std::size_t i = 0; !st && i + 1 < v.elements.size(); i += 2)
    out.emplace_back(std::move(v.elements[i].str), std::move(v.elements[i + 1].str));
  co_return std::tuple{std::move(st), std::move(out)};
}

template <class Handle>
asio::awaitable<op_result<Handle>> open_op(detail::client_core& c, Handle h, std::string name) {
  if (auto ec = validate_name(c.get_config(), name)) co_return std::tuple{ec, Handle{}};
  feed_names n(c.get_config(), name);
  auto req = type_checked(n);
  auto [st, resp] = co_await exec_checked(c, n, req, Handle::kind);
  if (st) co_return std::tuple{std::move(st), Handle{}};
  co_return std::tuple{op_status{}, std::move(h)};
}

template <class Handle, class Settings>
asio::awaitable<op_result<Handle>> create_or_open_op(detail::client_core& c, Handle h,
                                                     std::string name, Settings s) {
  auto fields = s.to_fields();
  // Refused before any I/O; create_or_open_feed checks again, but the
  // order of the checks (name first) is this operation's.
  if (auto ec = validate_name(c.get_config(), name)) co_return std::tuple{ec, Handle{}};
  for (const auto& [f, v] : fields)
    if (auto r = validate_config_field(f, v)) co_return std::tuple{r.ec, Handle{}};
  diagnostics diag;
  auto [st, created] = co_await create_or_open_feed(c, name, Handle::kind, std::move(fields));
  if (st) co_return std::tuple{std::move(st), Handle{}};
  co_return std::tuple{op_status{}, std::move(h)};
}

template <class Settings>
asio::awaitable<op_result<Settings>> read_settings_op(detail::client_core& c, std::string name,
                                                      feed_type kind) {
  auto [st, fields] = co_await read_config_op(c, std::move(name), kind);
  if (st) co_return std::tuple{std::move(st), Settings{}};
  co_return std::tuple{op_status{}, Settings::from_fields(fields)};
}

}  // namespace

void feed_core::start_retract(std::string id, handler<bool> h) const {
  spawn_op(client_core_, retract_op(*client_core_, name_, kind_, std::move(id)), std::move(h));
}

void feed_core::start_get_ids(handler<std::vector<std::string>> h) const {
  spawn_op(client_core_, get_ids_op(*client_core_, name_, kind_), std::move(h));
}

void feed_core::start_get_item(std::string id, handler<opt_string> h) const {
  spawn_op(client_core_, get_item_op(*client_core_, name_, kind_, std::move(id)), std::move(h));
}

void feed_core::start_get_items(std::vector<std::string> ids,
                                handler<std::vector<opt_string>> h) const {
  spawn_op(client_core_, get_items_op(*client_core_, name_, kind_, std::move(ids)), std::move(h));
}

void feed_core::start_get_all(handler<std::vector<feed_item>> h) const {
  spawn_op(client_core_, get_all_op(*client_core_, name_, kind_), std::move(h));
}

void feed_core::start_has_id(std::string id, handler<bool> h) const {
  spawn_op(client_core_, has_id_op(*client_core_, name_, kind_, std::move(id)), std::move(h));
}

void feed_core::start_length(handler<std::uint64_t> h) const {
  spawn_op(client_core_, length_op(*client_core_, name_, kind_), std::move(h));
}

void feed_core::start_subscribe(feed_callback cb, feed_subscribe_options opts,
                                handler<feed_subscription> h) const {
  start_feed_subscribe(client_core_, name_, kind_, std::move(cb), std::move(opts), std::move(h));
}

template <class Derived, class Settings>
void feed_base<Derived, Settings>::start_open(client* c, std::string name, handler<Derived> h) {
  const auto& core = client_access::core(*c);
  Derived handle(*c, name);  // before the name moves: argument order is unspecified
  spawn_op(core, open_op<Derived>(*core, std::move(handle), std::move(name)), std::move(h));
}

template <class Derived, class Settings>
void feed_base<Derived, Settings>::start_create_or_open(client* c, std::string name, Settings s,
                                                        handler<Derived> h) {
  const auto& core = client_access::core(*c);
  Derived handle(*c, name);  // before the name moves: argument order is unspecified
  spawn_op(core,
           create_or_open_op<Derived>(*core, std::move(handle), std::move(name), std::move(s)),
           std::move(h));
}

template <class Derived, class Settings>
void feed_base<Derived, Settings>::start_read_settings(handler<Settings> h) const {
  spawn_op(client_core_, read_settings_op<Settings>(*client_core_, name_, kind_), std::move(h));
}

template class feed_base<feed, feed_settings>;
template class feed_base<sorted_feed, sorted_feed_settings>;

}  // namespace thoonk::detail
