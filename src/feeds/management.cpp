// Feed management (contract 002: Create Feed, Delete Feed, Set/Get Config
// Value): the client.hpp functions, each one atomic script or one
// pipelined read.
#include <thoonk/client.hpp>

#include "detail/keys.hpp"
#include "detail/script_exec.hpp"
#include "detail/spawn.hpp"
#include "feeds/common.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/string.hpp>

#include <algorithm>

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Every script checks, before its first write, that the user may PUBLISH
// its notification (check_publish, src/feeds/common.hpp): a refused
// PUBLISH after the writes would leave them applied under an error.

// Create Feed: SADD feeds (abort if present), the config hash, PUBLISH newfeed.
const script create_script{std::string(detail::lua_check_publish) + R"lua(
-- KEYS[1] feeds   KEYS[2] feed.config:[f]   KEYS[3..] every other key of the feed
-- ARGV[1] name  ARGV[2] type  ARGV[3] instance uuid  ARGV[4] newfeed channel
-- ARGV[5..] config field, value, field, value, ...
local perm = check_publish(ARGV[4])
if perm then return perm end
if redis.call('SADD', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('FEEDEXISTS the feed already exists')
end
-- Leftovers of a feed that another client deleted only partly.
for i = 2, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('HSET', KEYS[2], 'type', ARGV[2])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
redis.call('PUBLISH', ARGV[4], ARGV[1] .. '\0' .. ARGV[3])
return 1
)lua"};

// Delete Feed: SREM feeds (fail if absent), delete every key, PUBLISH delfeed.
const script delete_script{std::string(detail::lua_check_publish) + R"lua(
-- KEYS[1] feeds   KEYS[2..] every key of the feed (keys.hpp all_keys)
-- ARGV[1] name  ARGV[2] instance uuid  ARGV[3] delfeed channel
local perm = check_publish(ARGV[3])
if perm then return perm end
if redis.call('SREM', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('FEEDNOTFOUND no such feed')
end
for i = 2, #KEYS do redis.call('UNLINK', KEYS[i]) end
redis.call('PUBLISH', ARGV[3], ARGV[1] .. '\0' .. ARGV[2])
return 1
)lua"};

// Set Config Value: HSET feed.config, PUBLISH conffeed (fail if no feed).
const script set_config_script{std::string(detail::lua_check_publish) + R"lua(
-- KEYS[1] feeds   KEYS[2] feed.config:[f]
-- ARGV[1] name  ARGV[2] field  ARGV[3] value  ARGV[4] instance uuid  ARGV[5] conffeed channel
local perm = check_publish(ARGV[5])
if perm then return perm end
if redis.call('SISMEMBER', KEYS[1], ARGV[1]) == 0 then
  return redis.error_reply('FEEDNOTFOUND no such feed')
end
redis.call('HSET', KEYS[2], ARGV[2], ARGV[3])
redis.call('PUBLISH', ARGV[5], ARGV[1] .. '\0' .. ARGV[4])
return 1
)lua"};

// Config fields the library interprets must hold what its scripts expect
// (detail::validate_config_field: type and range, by field name); `type` is
// set only at creation; every value is bounded by max_item_size.
error_code validate_field(const config& cfg, std::string_view field, std::string_view value) {
  if (auto r = detail::validate_config_field(field, value)) return r.ec;
  return detail::validate_item(cfg, value);
}

asio::awaitable<std::tuple<error_code>> create_op(client* c, std::string name, feed_type type,
                                                  feed_config cfg) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec};
  for (const auto& [f, v] : cfg)
    if (auto ec = validate_field(c->get_config(), f, v)) co_return std::tuple{ec};
  detail::feed_names n(c->get_config(), name);
  std::vector<std::string> keys;
  keys.emplace_back(detail::feeds_key);
  for (auto& k : detail::all_keys(n)) keys.push_back(std::move(k));  // config first
  std::vector<std::string> args;
  args.push_back(name);
  args.emplace_back(to_string(type));
  args.push_back(c->instance_id());
  args.emplace_back(detail::newfeed_channel);
  for (auto& [f, v] : cfg) {
    args.push_back(std::move(f));
    args.push_back(std::move(v));
  }
  auto [ec, v] = co_await detail::run_script(*c, create_script, keys, args);
  co_return std::tuple{ec};
}

asio::awaitable<std::tuple<error_code>> delete_op(client* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec};
  detail::feed_names n(c->get_config(), name);
  std::vector<std::string> keys;
  keys.emplace_back(detail::feeds_key);
  for (auto& k : detail::all_keys(n)) keys.push_back(std::move(k));
  std::vector<std::string> args;
  args.push_back(name);
  args.push_back(c->instance_id());
  args.emplace_back(detail::delfeed_channel);
  auto [ec, v] = co_await detail::run_script(*c, delete_script, keys, args);
  co_return std::tuple{ec};
}

asio::awaitable<std::tuple<error_code, bool>> exists_op(client* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec, false};
  request req;
  req.push("SISMEMBER", detail::feeds_key, name);
  auto [ec, resp] = co_await detail::exec_co(c->conn(), req);
  if (ec) co_return std::tuple{ec, false};
  if (auto e = detail::reply_error(resp[0])) co_return std::tuple{e, false};
  co_return std::tuple{error_code{}, resp[0].integer == 1};
}

asio::awaitable<std::tuple<error_code, std::vector<std::string>>> list_op(client* c) {
  request req;
  req.push("SMEMBERS", detail::feeds_key);
  auto [ec, resp] = co_await detail::exec_co(c->conn(), req);
  std::vector<std::string> out;
  if (ec) co_return std::tuple{ec, std::move(out)};
  if (auto e = detail::reply_error(resp[0])) co_return std::tuple{e, std::move(out)};
  for (auto& v : resp[0].elements) out.push_back(std::move(v.str));
  std::sort(out.begin(), out.end());
  co_return std::tuple{error_code{}, std::move(out)};
}

asio::awaitable<std::tuple<error_code>> set_config_op(client* c, std::string name,
                                                      std::string field, std::string value) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec};
  if (auto ec = validate_field(c->get_config(), field, value)) co_return std::tuple{ec};
  detail::feed_names n(c->get_config(), name);
  std::vector<std::string> keys;
  keys.emplace_back(detail::feeds_key);
  keys.push_back(n.key("config"));
  std::vector<std::string> args;
  args.push_back(name);
  args.push_back(std::move(field));
  args.push_back(std::move(value));
  args.push_back(c->instance_id());
  args.emplace_back(detail::conffeed_channel);
  auto [ec, v] = co_await detail::run_script(*c, set_config_script, keys, args);
  co_return std::tuple{ec};
}

asio::awaitable<std::tuple<error_code, std::optional<std::string>>> get_config_op(
    client* c, std::string name, std::string field) {
  if (auto ec = detail::validate_name(c->get_config(), name))
    co_return std::tuple{ec, std::optional<std::string>{}};
  detail::feed_names n(c->get_config(), name);
  request req;
  req.push("SISMEMBER", detail::feeds_key, name);
  req.push("HGET", n.key("config"), field);
  auto [ec, resp] = co_await detail::exec_co(c->conn(), req);
  if (!ec) ec = detail::reply_error(resp[0]);
  if (!ec) ec = detail::reply_error(resp[1]);
  if (!ec && resp[0].integer != 1) ec = error::feed_not_found;
  if (ec) co_return std::tuple{ec, std::optional<std::string>{}};
  co_return std::tuple{error_code{}, detail::as_opt_string(resp[1])};
}

asio::awaitable<std::tuple<error_code, boost::json::value>> get_config_json_op(
    client* c, std::string name, std::string field) {
  auto [ec, text] = co_await get_config_op(c, std::move(name), std::move(field));
  if (ec || !text) co_return std::tuple{ec, boost::json::value{}};
  error_code pec;
  auto v = boost::json::parse(*text, pec);
  if (pec) co_return std::tuple{error_code{}, boost::json::value(boost::json::string(*text))};
  co_return std::tuple{error_code{}, std::move(v)};
}

}  // namespace

void client::start_create_feed(std::string name, feed_type type, feed_config cfg, handler<> h) {
  detail::spawn_op(get_executor(), create_op(this, std::move(name), type, std::move(cfg)),
                   std::move(h));
}

void client::start_delete_feed(std::string name, handler<> h) {
  detail::spawn_op(get_executor(), delete_op(this, std::move(name)), std::move(h));
}

void client::start_feed_exists(std::string name, handler<bool> h) {
  detail::spawn_op(get_executor(), exists_op(this, std::move(name)), std::move(h));
}

void client::start_list_feeds(handler<std::vector<std::string>> h) {
  detail::spawn_op(get_executor(), list_op(this), std::move(h));
}

void client::start_set_config(std::string name, std::string field, std::string value,
                              handler<> h) {
  detail::spawn_op(get_executor(),
                   set_config_op(this, std::move(name), std::move(field), std::move(value)),
                   std::move(h));
}

void client::start_get_config(std::string name, std::string field,
                              handler<std::optional<std::string>> h) {
  detail::spawn_op(get_executor(), get_config_op(this, std::move(name), std::move(field)),
                   std::move(h));
}

void client::start_set_config_json(std::string name, std::string field, boost::json::value value,
                                   handler<> h) {
  detail::spawn_op(
      get_executor(),
      set_config_op(this, std::move(name), std::move(field), boost::json::serialize(value)),
      std::move(h));
}

void client::start_get_config_json(std::string name, std::string field,
                                   handler<boost::json::value> h) {
  detail::spawn_op(get_executor(), get_config_json_op(this, std::move(name), std::move(field)),
                   std::move(h));
}

std::string config_field_problem(std::string_view field, std::string_view value) {
  return detail::validate_config_field(field, value).reason;
}

}  // namespace thoonk
