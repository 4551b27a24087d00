// Sorted feed (docs/contract.md "Sorted Feed"): a list of auto-increment ids.
// What sorted feeds share with feeds is in feed_base.cpp; here: insert,
// edit and move.
#include <thoonk/sorted_feed.hpp>

#include "detail/keys.hpp"
#include "detail/spawn.hpp"
#include "feeds/common.hpp"
#include "scripts/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// The scripts (src/lua/sorted_feeds/*.lua) check the feed's type, then that
// the user may PUBLISH their notifications (check_publish,
// src/lua/includes/acl.lua), before any write: a refused PUBLISH after the writes
// would leave them applied under an error.
//   insert.lua   Append / Prepend / Publish Before / Publish After: a new id
//                from feed.idincr placed in the list, then feed.publish
//                `id\0item` and feed.position `id\0pos`.
//   edit.lua     replace an existing item; feed.publish `id\0item` (the
//                contract's channel for sorted-feed edits). Fails, changing
//                nothing, when absent.
//   move.lua     to the beginning, the end, before or after another id;
//                feed.position `id\0pos`. Every check before any write.

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

asio::awaitable<detail::op_result<std::string>> insert_op(detail::client_core& c, std::string name,
                                                          feed_position pos, std::string item) {
  const auto& cfg = c.get_config();
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
  auto [sec, v] = co_await detail::run_script(c, detail::scripts::sorted_feeds_insert(),
                                              std::move(keys), std::move(args));
  if (sec) co_return std::tuple{std::move(sec), std::string{}};
  co_return std::tuple{detail::op_status{}, std::move(v.str)};
}

asio::awaitable<detail::op_result<>> edit_op(detail::client_core& c, std::string name,
                                             std::string id, std::string item) {
  const auto& cfg = c.get_config();
  error_code ec = detail::validate_name_and_id(cfg, name, id);
  if (!ec) ec = detail::validate_item(cfg, item);
  if (ec) co_return std::tuple{ec};
  detail::feed_names n(cfg, name);
  auto keys = detail::data_keys(n);
  std::vector<std::string> args;
  args.push_back(std::move(id));
  args.push_back(std::move(item));
  args.push_back(n.channel("publish"));
  auto [sec, v] = co_await detail::run_script(c, detail::scripts::sorted_feeds_edit(),
                                              std::move(keys), std::move(args));
  co_return std::tuple{std::move(sec)};
}

asio::awaitable<detail::op_result<>> move_op(detail::client_core& c, std::string name,
                                             std::string id, feed_position pos) {
  const auto& cfg = c.get_config();
  error_code ec = detail::validate_name_and_id(cfg, name, id);
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
  auto [sec, v] = co_await detail::run_script(c, detail::scripts::sorted_feeds_move(),
                                              std::move(keys), std::move(args));
  co_return std::tuple{std::move(sec)};
}

}  // namespace

void sorted_feed::start_insert(feed_position pos, std::string item, handler<std::string> h) const {
  detail::spawn_op(client_core_, insert_op(*client_core_, name_, std::move(pos), std::move(item)),
                   std::move(h));
}

void sorted_feed::start_edit(std::string id, std::string item, handler<> h) const {
  detail::spawn_op(client_core_, edit_op(*client_core_, name_, std::move(id), std::move(item)),
                   std::move(h));
}

void sorted_feed::start_move(std::string id, feed_position pos, handler<> h) const {
  detail::spawn_op(client_core_, move_op(*client_core_, name_, std::move(id), std::move(pos)),
                   std::move(h));
}

}  // namespace thoonk
