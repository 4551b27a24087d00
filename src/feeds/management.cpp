// Feed management (docs/contract.md: Create Feed, Delete Feed, Set/Get Config
// Value): the client.hpp functions, each one atomic script or one
// pipelined read.
#include <thoonk/client.hpp>

#include "detail/keys.hpp"
#include "detail/spawn.hpp"
#include "feeds/common.hpp"
#include "scripts/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// The scripts (src/lua/management/*.lua) check, before their first write,
// that the user may PUBLISH their notification (check_publish,
// src/lua/includes/acl.lua): a refused PUBLISH after the writes would leave them
// applied under an error.
//   create.lua      Create Feed: SADD feeds (abort if present), the config
//                   hash, PUBLISH newfeed.
//   delete.lua      Delete Feed: SREM feeds (fail if absent), delete every
//                   key, PUBLISH delfeed.
//   set_config.lua  Set Config Value: HSET feed.config, PUBLISH conffeed
//                   (fail if no feed).
//
// In cluster mode the `feeds` set and the feed's keys live in different
// hash slots, so no script may touch both. Each operation is two steps
// that keep one rule: a feed whose config has a type is listed in `feeds`.
// Create lists the name first (SADD, idempotent), then runs
// cluster_create.lua on the feed's slot; delete runs cluster_delete.lua
// first, then unlists (SREM). Between the steps, or after a crash there,
// the name is listed without a type: the state a partial delete leaves on
// one server too, which every operation reports as feed_not_found and
// which the next create repairs. Existence checks read the config's type.
// docs/cluster.md, "Feed management".

bool clustered(const detail::client_core* c) { return c->get_config().cluster; }

// SADD / SREM of `name` in the feeds set (cluster mode's second step).
asio::awaitable<std::tuple<detail::op_status, std::int64_t>> feeds_set_op(detail::client_core* c,
                                                                          std::string_view command,
                                                                          std::string_view name) {
  request req;
  req.push(command, detail::feeds_key, name);
  auto [ec, resp] = co_await detail::exec_co(*c, req, detail::feeds_key);
  if (ec) co_return std::tuple{detail::op_status(ec), std::int64_t{0}};
  if (auto st = detail::reply_status(resp[0])) co_return std::tuple{std::move(st), std::int64_t{0}};
  co_return std::tuple{detail::op_status{}, resp[0].integer};
}

// Config fields the library interprets must hold what its scripts expect
// (detail::validate_config_field: type and range, by field name); `type` is
// set only at creation; every value is bounded by max_item_size.
error_code validate_field(const config& cfg, std::string_view field, std::string_view value) {
  if (auto r = detail::validate_config_field(field, value)) return r.ec;
  return detail::validate_item(cfg, value);
}

// Create (`create_or_open` false) or create-or-open: one script
// (src/lua/management/create.lua). Completes with whether it created.
asio::awaitable<detail::op_result<bool>> create_op(detail::client_core* c, std::string name,
                                                   feed_type type, feed_config cfg, bool or_open) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec, false};
  for (const auto& [f, v] : cfg)
    if (auto ec = validate_field(c->get_config(), f, v)) co_return std::tuple{ec, false};
  detail::feed_names n(c->get_config(), name);
  const bool cl = clustered(c);
  bool listed_before = false;
  if (cl) {
    auto [lst, added] = co_await feeds_set_op(c, "SADD", name);
    if (lst) co_return std::tuple{std::move(lst), false};
    listed_before = added == 0;
  }
  auto keys = cl ? detail::feed_admin_keys(n, true) : detail::admin_keys(n, true);
  std::vector<std::string> args;
  args.push_back(name);
  args.emplace_back(to_string(type));
  args.push_back(c->instance_id());
  args.emplace_back(detail::newfeed_channel);
  args.emplace_back(or_open ? "create_or_open" : "create");
  // cluster_create.lua: whether the name was listed (a listed name without
  // a type that holds keys was made by a plain client: adopted, not wiped).
  if (cl) args.emplace_back(listed_before ? "1" : "0");
  for (auto& [f, v] : cfg) {
    args.push_back(std::move(f));
    args.push_back(std::move(v));
  }
  const auto& s =
      cl ? detail::scripts::management_cluster_create() : detail::scripts::management_create();
  auto [st, v] = co_await detail::run_script(*c, s, std::move(keys), std::move(args));
  co_return std::tuple{std::move(st), v.integer == 1};
}

// create_feed's completion has no `created`: it fails when the feed exists.
asio::awaitable<detail::op_result<>> create_only_op(detail::client_core* c, std::string name,
                                                    feed_type type, feed_config cfg) {
  auto [st, created] = co_await create_op(c, std::move(name), type, std::move(cfg), false);
  co_return std::tuple{std::move(st)};
}

asio::awaitable<detail::op_result<>> delete_op(detail::client_core* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec};
  detail::feed_names n(c->get_config(), name);
  const bool cl = clustered(c);
  auto keys = cl ? detail::feed_admin_keys(n, true) : detail::admin_keys(n, true);
  std::vector<std::string> args;
  args.push_back(name);
  args.push_back(c->instance_id());
  args.emplace_back(detail::delfeed_channel);
  const auto& s =
      cl ? detail::scripts::management_cluster_delete() : detail::scripts::management_delete();
  auto [st, v] = co_await detail::run_script(*c, s, std::move(keys), std::move(args));
  if (!cl || st) co_return std::tuple{std::move(st)};
  const bool had_type = v.integer == 1;
  auto [lst, removed] = co_await feeds_set_op(c, "SREM", name);
  if (lst) co_return std::tuple{std::move(lst)};
  if (!had_type && removed == 0) co_return std::tuple{detail::op_status(error::feed_not_found)};
  co_return std::tuple{detail::op_status{}};
}

asio::awaitable<detail::op_result<bool>> exists_op(detail::client_core* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec, false};
  request req;
  req.push("SISMEMBER", detail::feeds_key, name);
  auto [ec, resp] = co_await detail::exec_co(*c, req, detail::feeds_key);
  if (ec) co_return std::tuple{ec, false};
  if (auto st = detail::reply_status(resp[0])) co_return std::tuple{std::move(st), false};
  co_return std::tuple{error_code{}, resp[0].integer == 1};
}

asio::awaitable<detail::op_result<std::vector<std::string>>> list_op(detail::client_core* c) {
  request req;
  req.push("SMEMBERS", detail::feeds_key);
  auto [ec, resp] = co_await detail::exec_co(*c, req, detail::feeds_key);
  std::vector<std::string> out;
  if (ec) co_return std::tuple{ec, std::move(out)};
  if (auto st = detail::reply_status(resp[0])) co_return std::tuple{std::move(st), std::move(out)};
  for (auto& v : resp[0].elements) out.push_back(std::move(v.str));
  std::sort(out.begin(), out.end());
  co_return std::tuple{error_code{}, std::move(out)};
}

asio::awaitable<detail::op_result<>> set_config_op(detail::client_core* c, std::string name,
                                                   std::string field, std::string value) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec};
  if (auto ec = validate_field(c->get_config(), field, value)) co_return std::tuple{ec};
  detail::feed_names n(c->get_config(), name);
  const bool cl = clustered(c);
  auto keys = cl ? detail::feed_admin_keys(n, false) : detail::admin_keys(n, false);
  std::vector<std::string> args;
  args.push_back(name);
  args.push_back(std::move(field));
  args.push_back(std::move(value));
  args.push_back(c->instance_id());
  args.emplace_back(detail::conffeed_channel);
  const auto& s = cl ? detail::scripts::management_cluster_set_config()
                     : detail::scripts::management_set_config();
  auto [st, v] = co_await detail::run_script(*c, s, std::move(keys), std::move(args));
  co_return std::tuple{std::move(st)};
}

asio::awaitable<detail::op_result<std::optional<std::string>>> get_config_op(detail::client_core* c,
                                                                             std::string name,
                                                                             std::string field) {
  if (auto ec = detail::validate_name(c->get_config(), name))
    co_return std::tuple{ec, std::optional<std::string>{}};
  detail::feed_names n(c->get_config(), name);
  request req;
  // One server: listed in feeds. Cluster mode: the config has a type (the
  // feeds set is in another slot; docs/cluster.md).
  if (clustered(c)) req.push("HEXISTS", n.key("config"), "type");
  else req.push("SISMEMBER", detail::feeds_key, name);
  req.push("HGET", n.key("config"), field);
  auto [ec, resp] = co_await detail::exec_co(*c, req, n.key("config"));
  detail::op_status st(ec);
  if (!st) st = detail::reply_status(resp[0]);
  if (!st) st = detail::reply_status(resp[1]);
  if (!st && resp[0].integer != 1) st = error::feed_not_found;
  if (st) co_return std::tuple{std::move(st), std::optional<std::string>{}};
  co_return std::tuple{error_code{}, detail::as_opt_string(resp[1])};
}

asio::awaitable<detail::op_result<boost::json::value>> get_config_json_op(detail::client_core* c,
                                                                          std::string name,
                                                                          std::string field) {
  auto [st, text] = co_await get_config_op(c, std::move(name), std::move(field));
  if (st || !text) co_return std::tuple{std::move(st), boost::json::value{}};
  error_code pec;
  auto v = boost::json::parse(*text, pec);
  if (pec) co_return std::tuple{error_code{}, boost::json::value(boost::json::string(*text))};
  co_return std::tuple{error_code{}, std::move(v)};
}

}  // namespace

namespace detail {
asio::awaitable<op_result<bool>> create_or_open_feed(client_core& c, std::string name,
                                                     feed_type type, feed_config cfg) {
  return create_op(&c, std::move(name), type, std::move(cfg), true);
}
}  // namespace detail

void client::start_create_feed(std::string name, feed_type type, feed_config cfg, handler<> h) {
  detail::spawn_op(client_core_,
                   create_only_op(client_core_.get(), std::move(name), type, std::move(cfg)),
                   std::move(h));
}

void client::start_create_or_open_feed(std::string name, feed_type type, feed_config cfg,
                                       handler<bool> h) {
  detail::spawn_op(client_core_,
                   create_op(client_core_.get(), std::move(name), type, std::move(cfg), true),
                   std::move(h));
}

void client::start_delete_feed(std::string name, handler<> h) {
  detail::spawn_op(client_core_, delete_op(client_core_.get(), std::move(name)), std::move(h));
}

void client::start_feed_exists(std::string name, handler<bool> h) {
  detail::spawn_op(client_core_, exists_op(client_core_.get(), std::move(name)), std::move(h));
}

void client::start_list_feeds(handler<std::vector<std::string>> h) {
  detail::spawn_op(client_core_, list_op(client_core_.get()), std::move(h));
}

void client::start_set_config(std::string name, std::string field, std::string value, handler<> h) {
  detail::spawn_op(
      client_core_,
      set_config_op(client_core_.get(), std::move(name), std::move(field), std::move(value)),
      std::move(h));
}

void client::start_get_config(std::string name, std::string field,
                              handler<std::optional<std::string>> h) {
  detail::spawn_op(client_core_,
                   get_config_op(client_core_.get(), std::move(name), std::move(field)),
                   std::move(h));
}

void client::start_set_config_json(std::string name, std::string field, boost::json::value value,
                                   handler<> h) {
  detail::spawn_op(client_core_,
                   set_config_op(client_core_.get(), std::move(name), std::move(field),
                                 boost::json::serialize(value)),
                   std::move(h));
}

void client::start_get_config_json(std::string name, std::string field,
                                   handler<boost::json::value> h) {
  detail::spawn_op(client_core_,
                   get_config_json_op(client_core_.get(), std::move(name), std::move(field)),
                   std::move(h));
}

std::string config_field_problem(std::string_view field, std::string_view value) {
  return detail::validate_config_field(field, value).reason;
}

}  // namespace thoonk
