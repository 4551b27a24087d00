// Sorted feed (contract 002 "Sorted Feed"): a list of auto-increment ids.
#include <thoonk/sorted_feed.hpp>

#include "detail/keys.hpp"
#include "detail/script_exec.hpp"
#include "detail/spawn.hpp"
#include "feeds/common.hpp"
#include "feeds/subscription.hpp"
#include "thoonk_lua_scripts.hpp"

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// The scripts (src/lua/sorted_feeds/*.lua) check the feed's type, then that
// the user may PUBLISH their notifications (check_publish,
// src/lua/prelude.lua), before any write: a refused PUBLISH after the writes
// would leave them applied under an error.
//   insert.lua   Append / Prepend / Publish Before / Publish After: a new id
//                from feed.idincr placed in the list, then feed.publish
//                `id\0item` and feed.position `id\0pos`.
//   edit.lua     replace an existing item; feed.publish `id\0item` (the
//                contract's channel for sorted-feed edits). Fails, changing
//                nothing, when absent.
//   move.lua     to the beginning, the end, before or after another id;
//                feed.position `id\0pos`. Every check before any write.
//   retract.lua  remove the id and announce it; 0 (nothing published) if
//                absent.

const char* mode_of(const feed_position& p) {
  switch (p.where) {
    case feed_position::begin: return "begin";
    case feed_position::before: return "before";
    case feed_position::after: return "after";
    case feed_position::end: break;
  }
  return "end";
}

bool is_relative(const feed_position& p) {
  return p.where == feed_position::before || p.where == feed_position::after;
}

asio::awaitable<std::tuple<error_code, sorted_feed>> open_op(client* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name))
    co_return std::tuple{ec, sorted_feed{}};
  detail::feed_names n(c->get_config(), name);
  request req;
  detail::push_type_check(req, n);
  auto [ec, resp] = co_await detail::exec_checked(*c, req, feed_type::sorted_feed);
  if (ec) co_return std::tuple{ec, sorted_feed{}};
  co_return std::tuple{error_code{}, sorted_feed(*c, std::move(name))};
}

asio::awaitable<std::tuple<error_code, std::string>> insert_op(client* c, std::string name,
                                                               feed_position pos,
                                                               std::string item) {
  const auto& cfg = c->get_config();
  error_code ec = detail::validate_name(cfg, name);
  if (!ec && is_relative(pos)) ec = detail::validate_id(cfg, pos.relative_id);
  if (!ec) ec = detail::validate_item(cfg, item);
  if (ec) co_return std::tuple{ec, std::string{}};
  detail::feed_names n(cfg, name);
  auto keys = detail::data_keys(n);
  std::vector<std::string> args;
  args.emplace_back(mode_of(pos));
  args.push_back(is_relative(pos) ? std::move(pos.relative_id) : std::string{});
  args.push_back(std::move(item));
  args.push_back(n.channel("publish"));
  args.push_back(n.channel("position"));
  auto [sec, v] = co_await detail::run_script(
      *c, detail::scripts::sorted_feeds_insert(), std::move(keys), std::move(args));
  if (sec) co_return std::tuple{sec, std::string{}};
  co_return std::tuple{error_code{}, std::move(v.str)};
}

asio::awaitable<std::tuple<error_code>> edit_op(client* c, std::string name, std::string id,
                                                std::string item) {
  const auto& cfg = c->get_config();
  error_code ec = detail::validate_name(cfg, name);
  if (!ec) ec = detail::validate_id(cfg, id);
  if (!ec) ec = detail::validate_item(cfg, item);
  if (ec) co_return std::tuple{ec};
  detail::feed_names n(cfg, name);
  auto keys = detail::data_keys(n);
  std::vector<std::string> args;
  args.push_back(std::move(id));
  args.push_back(std::move(item));
  args.push_back(n.channel("publish"));
  auto [sec, v] = co_await detail::run_script(
      *c, detail::scripts::sorted_feeds_edit(), std::move(keys), std::move(args));
  co_return std::tuple{sec};
}

asio::awaitable<std::tuple<error_code>> move_op(client* c, std::string name, std::string id,
                                                feed_position pos) {
  const auto& cfg = c->get_config();
  error_code ec = detail::validate_name(cfg, name);
  if (!ec) ec = detail::validate_id(cfg, id);
  if (!ec && is_relative(pos)) {
    ec = detail::validate_id(cfg, pos.relative_id);
    if (!ec && pos.relative_id == id) ec = error::invalid_argument;
  }
  if (ec) co_return std::tuple{ec};
  detail::feed_names n(cfg, name);
  auto keys = detail::data_keys(n);
  std::vector<std::string> args;
  args.push_back(std::move(id));
  args.emplace_back(mode_of(pos));
  args.push_back(is_relative(pos) ? std::move(pos.relative_id) : std::string{});
  args.push_back(n.channel("position"));
  auto [sec, v] = co_await detail::run_script(
      *c, detail::scripts::sorted_feeds_move(), std::move(keys), std::move(args));
  co_return std::tuple{sec};
}

asio::awaitable<std::tuple<error_code, bool>> retract_op(client* c, std::string name,
                                                         std::string id) {
  const auto& cfg = c->get_config();
  error_code ec = detail::validate_name(cfg, name);
  if (!ec) ec = detail::validate_id(cfg, id);
  if (ec) co_return std::tuple{ec, false};
  detail::feed_names n(cfg, name);
  auto keys = detail::data_keys(n);
  std::vector<std::string> args;
  args.push_back(std::move(id));
  args.push_back(n.channel("retract"));
  auto [sec, v] = co_await detail::run_script(
      *c, detail::scripts::sorted_feeds_retract(), std::move(keys), std::move(args));
  co_return std::tuple{sec, !sec && v.integer == 1};
}

asio::awaitable<std::tuple<error_code, std::vector<std::string>>> get_ids_op(client* c,
                                                                            std::string name) {
  std::vector<std::string> out;
  if (auto ec = detail::validate_name(c->get_config(), name)) co_return std::tuple{ec, out};
  detail::feed_names n(c->get_config(), name);
  request req;
  detail::push_type_check(req, n);
  req.push("LRANGE", n.key("ids"), 0, -1);
  auto [ec, resp] = co_await detail::exec_checked(*c, req, feed_type::sorted_feed);
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
  req.push("HEXISTS", n.key("items"), id);
  auto [rec, resp] = co_await detail::exec_checked(*c, req, feed_type::sorted_feed);
  if (rec) co_return std::tuple{rec, false};
  co_return std::tuple{error_code{}, resp[1].integer == 1};
}

asio::awaitable<std::tuple<error_code, std::uint64_t>> length_op(client* c, std::string name) {
  if (auto ec = detail::validate_name(c->get_config(), name))
    co_return std::tuple{ec, std::uint64_t{0}};
  detail::feed_names n(c->get_config(), name);
  request req;
  detail::push_type_check(req, n);
  req.push("LLEN", n.key("ids"));
  auto [ec, resp] = co_await detail::exec_checked(*c, req, feed_type::sorted_feed);
  if (ec) co_return std::tuple{ec, std::uint64_t{0}};
  auto len = detail::as_u64(resp[1], ec);
  co_return std::tuple{ec, len};
}

asio::awaitable<std::tuple<error_code, std::vector<feed_item>>> get_all_op(client* c,
                                                                          std::string name) {
  co_return co_await detail::get_all(*c, name, feed_type::sorted_feed);
}

}  // namespace

void sorted_feed::start_open(client* c, std::string name, handler<sorted_feed> h) {
  detail::spawn_op(c->get_executor(), open_op(c, std::move(name)), std::move(h));
}

void sorted_feed::start_insert(client* c, std::string name, feed_position pos, std::string item,
                               handler<std::string> h) {
  detail::spawn_op(c->get_executor(),
                   insert_op(c, std::move(name), std::move(pos), std::move(item)), std::move(h));
}

void sorted_feed::start_edit(client* c, std::string name, std::string id, std::string item,
                             handler<> h) {
  detail::spawn_op(c->get_executor(), edit_op(c, std::move(name), std::move(id), std::move(item)),
                   std::move(h));
}

void sorted_feed::start_move(client* c, std::string name, std::string id, feed_position pos,
                             handler<> h) {
  detail::spawn_op(c->get_executor(), move_op(c, std::move(name), std::move(id), std::move(pos)),
                   std::move(h));
}

void sorted_feed::start_retract(client* c, std::string name, std::string id, handler<bool> h) {
  detail::spawn_op(c->get_executor(), retract_op(c, std::move(name), std::move(id)), std::move(h));
}

void sorted_feed::start_get_ids(client* c, std::string name, handler<std::vector<std::string>> h) {
  detail::spawn_op(c->get_executor(), get_ids_op(c, std::move(name)), std::move(h));
}

void sorted_feed::start_get_item(client* c, std::string name, std::string id,
                                 handler<std::optional<std::string>> h) {
  detail::spawn_op(c->get_executor(),
                   detail::get_item(*c, std::move(name), feed_type::sorted_feed, std::move(id)),
                   std::move(h));
}

void sorted_feed::start_get_items(client* c, std::string name, std::vector<std::string> ids,
                                  handler<std::vector<std::optional<std::string>>> h) {
  detail::spawn_op(c->get_executor(),
                   detail::get_items(*c, std::move(name), feed_type::sorted_feed, std::move(ids)),
                   std::move(h));
}

void sorted_feed::start_get_all(client* c, std::string name, handler<std::vector<feed_item>> h) {
  detail::spawn_op(c->get_executor(), get_all_op(c, std::move(name)), std::move(h));
}

void sorted_feed::start_has_id(client* c, std::string name, std::string id, handler<bool> h) {
  detail::spawn_op(c->get_executor(), has_id_op(c, std::move(name), std::move(id)), std::move(h));
}

void sorted_feed::start_length(client* c, std::string name, handler<std::uint64_t> h) {
  detail::spawn_op(c->get_executor(), length_op(c, std::move(name)), std::move(h));
}

void sorted_feed::start_subscribe(client* c, std::string name, feed_callback cb,
                                  feed_subscribe_options opts, handler<feed_subscription> h) {
  detail::start_feed_subscribe(*c, std::move(name), feed_type::sorted_feed, std::move(cb),
                               std::move(opts), std::move(h));
}

}  // namespace thoonk
