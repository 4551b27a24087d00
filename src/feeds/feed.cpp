// Feed (contract 002 "Feed"): items in a zset scored by publish time (ms).
#include <thoonk/feed.hpp>

#include "detail/keys.hpp"
#include "detail/script_exec.hpp"
#include "detail/spawn.hpp"
#include "detail/uuid.hpp"
#include "feeds/bench_access.hpp"
#include "feeds/common.hpp"
#include "feeds/subscription.hpp"
#include "thoonk_lua_scripts.hpp"

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Publish: a new id evicts the oldest items beyond max_length (each
// retracted and announced) and is announced on feed.publish; an existing id
// is an edit: replaced, moved to the newest position, nothing evicted,
// announced on feed.edit.
//
// Order. The contract scores an item by its publish time in milliseconds,
// and a zset orders equal scores by member bytes, so items published within
// one millisecond would be ordered (and evicted) by id. The score is
// therefore the publish time made strictly greater than the feed's newest
// score: max(now, newest + 1/1024). Its integer part stays the publish
// millisecond for other clients (unless more than 1024 items are published
// into one feed within one millisecond, when it runs ahead by a fraction of
// a millisecond per 1024), and the feed's order is the order in which the
// publishes ran, whatever the ids and however the publishers' clocks differ.
// 1/1024 steps are exact in a double up to 2^43 ms (the year 2248), and the
// score is formatted with 17 significant digits so Redis parses the same
// double back. (src/lua/feeds/publish.lua)

// Retract (src/lua/feeds/retract.lua): remove the id and announce it; 0
// (nothing published) if absent.

using opt_string = std::optional<std::string>;

asio::awaitable<std::tuple<error_code, feed>> open_op(client* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec, feed{}};
  detail::feed_names n(c->get_config(), name);
  request req;
  detail::push_type_check(req, n);
  auto [ec, resp] = co_await detail::exec_checked(*c, req, feed_type::feed);
  if (ec) co_return std::tuple{ec, feed{}};
  co_return std::tuple{error_code{}, feed(*c, std::move(name))};
}

asio::awaitable<std::tuple<error_code, publish_result>> publish_op(client* c, std::string name,
                                                                   opt_string id,
                                                                   std::string item) {
  const auto& cfg = c->get_config();
  publish_result out;
  error_code ec = detail::validate_name(cfg, name);
  if (!ec && id) ec = detail::validate_id(cfg, *id);
  if (!ec) ec = detail::validate_item(cfg, item);
  if (ec) co_return std::tuple{ec, std::move(out)};
  out.id = id ? std::move(*id) : detail::make_uuid();
  detail::feed_names n(cfg, name);
  std::vector<std::string> args;
  args.push_back(out.id);
  args.push_back(std::move(item));
  args.push_back(detail::now_ms());
  args.push_back(n.channel("publish"));
  args.push_back(n.channel("edit"));
  args.push_back(n.channel("retract"));
  auto [sec, v] = co_await detail::run_script(*c, detail::scripts::feeds_publish(),
                                              detail::data_keys(n), std::move(args));
  if (sec) co_return std::tuple{sec, std::move(out)};
  if (v.elements.size() != 2) co_return std::tuple{error_code(error::unexpected_type), std::move(out)};
  out.edited = v.elements[0].integer == 1;
  for (auto& e : v.elements[1].elements) out.evicted.push_back(std::move(e.str));
  co_return std::tuple{error_code{}, std::move(out)};
}

asio::awaitable<std::tuple<error_code, bool>> retract_op(client* c, std::string name,
                                                         std::string id) {
  const auto& cfg = c->get_config();
  error_code ec = detail::validate_name(cfg, name);
  if (!ec) ec = detail::validate_id(cfg, id);
  if (ec) co_return std::tuple{ec, false};
  detail::feed_names n(cfg, name);
  std::vector<std::string> args;
  args.push_back(std::move(id));
  args.push_back(n.channel("retract"));
  auto [sec, v] = co_await detail::run_script(*c, detail::scripts::feeds_retract(),
                                              detail::data_keys(n), std::move(args));
  co_return std::tuple{sec, !sec && v.integer == 1};
}

asio::awaitable<std::tuple<error_code, std::vector<std::string>>> get_ids_op(client* c,
                                                                            std::string name) {
  std::vector<std::string> out;
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec, out};
  detail::feed_names n(c->get_config(), name);
  request req;
  detail::push_type_check(req, n);
  req.push("ZRANGE", n.key("ids"), 0, -1);
  auto [ec, resp] = co_await detail::exec_checked(*c, req, feed_type::feed);
  if (ec) co_return std::tuple{ec, out};
  for (auto& e : resp[1].elements) out.push_back(std::move(e.str));
  co_return std::tuple{error_code{}, std::move(out)};
}

asio::awaitable<std::tuple<error_code, bool>> has_id_op(client* c, std::string name,
                                                        std::string id) {
  const auto& cfg = c->get_config();
  error_code ec = detail::validate_name(cfg, name);
  if (!ec) ec = detail::validate_id(cfg, id);
  if (ec) co_return std::tuple{ec, false};
  detail::feed_names n(cfg, name);
  request req;
  detail::push_type_check(req, n);
  req.push("ZSCORE", n.key("ids"), id);
  auto [rec, resp] = co_await detail::exec_checked(*c, req, feed_type::feed);
  if (rec) co_return std::tuple{rec, false};
  co_return std::tuple{error_code{}, !resp[1].is_null()};
}

asio::awaitable<std::tuple<error_code, std::uint64_t>> length_op(client* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name))
    co_return std::tuple{ec, std::uint64_t{0}};
  detail::feed_names n(c->get_config(), name);
  request req;
  detail::push_type_check(req, n);
  req.push("ZCARD", n.key("ids"));
  auto [ec, resp] = co_await detail::exec_checked(*c, req, feed_type::feed);
  if (ec) co_return std::tuple{ec, std::uint64_t{0}};
  auto len = detail::as_u64(resp[1], ec);
  co_return std::tuple{ec, len};
}

asio::awaitable<std::tuple<error_code, std::vector<feed_item>>> get_all_op(client* c,
                                                                          std::string name) {
  co_return co_await detail::get_all(*c, name, feed_type::feed);
}

}  // namespace

namespace detail {
std::vector<std::string> feed_script_keys(std::string_view name) {
  return data_keys(feed_names(config{}, name));
}
}  // namespace detail

void feed::start_open(client* c, std::string name, handler<feed> h) {
  detail::spawn_op(c->get_executor(), open_op(c, std::move(name)), std::move(h));
}

void feed::start_publish(client* c, std::string name, std::optional<std::string> id,
                         std::string item, handler<publish_result> h) {
  detail::spawn_op(c->get_executor(), publish_op(c, std::move(name), std::move(id), std::move(item)),
                   std::move(h));
}

void feed::start_retract(client* c, std::string name, std::string id, handler<bool> h) {
  detail::spawn_op(c->get_executor(), retract_op(c, std::move(name), std::move(id)), std::move(h));
}

void feed::start_get_ids(client* c, std::string name, handler<std::vector<std::string>> h) {
  detail::spawn_op(c->get_executor(), get_ids_op(c, std::move(name)), std::move(h));
}

void feed::start_get_item(client* c, std::string name, std::string id,
                          handler<std::optional<std::string>> h) {
  detail::spawn_op(c->get_executor(),
                   detail::get_item(*c, std::move(name), feed_type::feed, std::move(id)),
                   std::move(h));
}

void feed::start_get_items(client* c, std::string name, std::vector<std::string> ids,
                           handler<std::vector<std::optional<std::string>>> h) {
  detail::spawn_op(c->get_executor(),
                   detail::get_items(*c, std::move(name), feed_type::feed, std::move(ids)),
                   std::move(h));
}

void feed::start_get_all(client* c, std::string name, handler<std::vector<feed_item>> h) {
  detail::spawn_op(c->get_executor(), get_all_op(c, std::move(name)), std::move(h));
}

void feed::start_has_id(client* c, std::string name, std::string id, handler<bool> h) {
  detail::spawn_op(c->get_executor(), has_id_op(c, std::move(name), std::move(id)), std::move(h));
}

void feed::start_length(client* c, std::string name, handler<std::uint64_t> h) {
  detail::spawn_op(c->get_executor(), length_op(c, std::move(name)), std::move(h));
}

void feed::start_subscribe(client* c, std::string name, feed_callback cb,
                           feed_subscribe_options opts, handler<feed_subscription> h) {
  detail::start_feed_subscribe(*c, std::move(name), feed_type::feed, std::move(cb),
                               std::move(opts), std::move(h));
}

}  // namespace thoonk
