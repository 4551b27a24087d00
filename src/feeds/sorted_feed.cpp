// Sorted feed (contract 002 "Sorted Feed"): a list of auto-increment ids.
#include <thoonk/sorted_feed.hpp>

#include "detail/keys.hpp"
#include "detail/script_exec.hpp"
#include "detail/spawn.hpp"
#include "feeds/common.hpp"
#include "feeds/subscription.hpp"

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// Every script checks the feed's type, then that the user may PUBLISH its
// notifications (check_publish, src/feeds/common.hpp), before any write: a
// refused PUBLISH after the writes would leave them applied under an error.

// Append / Prepend / Publish Before / Publish After: a new id from
// feed.idincr placed in the list, then feed.publish `id\0item` and
// feed.position `id\0pos`.
const script insert_script{std::string(detail::lua_prelude) + R"lua(
-- ARGV[1] mode: 'end' | 'begin' | 'before' | 'after'   ARGV[2] relative id
-- ARGV[3] item  ARGV[4] feed.publish channel  ARGV[5] feed.position channel
-- Returns the new id.
local err = open_feed('sorted_feed') or check_publish(ARGV[4], ARGV[5])
if err then return err end
local mode, rel, item = ARGV[1], ARGV[2], ARGV[3]
if (mode == 'before' or mode == 'after') and redis.call('HEXISTS', K_ITEMS, rel) == 0 then
  return redis.error_reply('IDNOTFOUND no item with the relative id')
end
local id = tostring(redis.call('INCR', K_IDINCR))
local pos
if mode == 'end' then
  redis.call('RPUSH', K_IDS, id)
  pos = ':end'
elseif mode == 'begin' then
  redis.call('LPUSH', K_IDS, id)
  pos = 'begin:'
else
  local where = 'AFTER'
  if mode == 'before' then where = 'BEFORE' end
  -- Nothing is written before this can fail (only the id counter moved).
  if redis.call('LINSERT', K_IDS, where, rel, id) < 0 then
    return redis.error_reply('IDNOTFOUND the relative id is not in the list')
  end
  if mode == 'before' then pos = ':' .. rel else pos = rel .. ':' end
end
redis.call('HSET', K_ITEMS, id, item)
local seq = redis.call('INCR', K_PUBLISHES)
record_change(id, seq)
redis.call('PUBLISH', ARGV[4], id .. '\0' .. item)
redis.call('PUBLISH', ARGV[5], id .. '\0' .. pos)
return id
)lua"};

// Edit: replace an existing item; feed.publish `id\0item` (the contract's
// channel for sorted-feed edits). Fails, changing nothing, when absent.
const script edit_script{std::string(detail::lua_prelude) + R"lua(
-- ARGV[1] id  ARGV[2] item  ARGV[3] feed.publish channel
local err = open_feed('sorted_feed') or check_publish(ARGV[3])
if err then return err end
if redis.call('HEXISTS', K_ITEMS, ARGV[1]) == 0 then
  return redis.error_reply('IDNOTFOUND no such item')
end
redis.call('HSET', K_ITEMS, ARGV[1], ARGV[2])
local seq = redis.call('INCR', K_PUBLISHES)
record_change(ARGV[1], seq)
redis.call('PUBLISH', ARGV[3], ARGV[1] .. '\0' .. ARGV[2])
return 1
)lua"};

// Move: to the beginning, the end, before or after another id;
// feed.position `id\0pos`. Every check happens before anything is written.
const script move_script{std::string(detail::lua_prelude) + R"lua(
-- ARGV[1] id  ARGV[2] mode: 'end' | 'begin' | 'before' | 'after'
-- ARGV[3] relative id  ARGV[4] feed.position channel
local err = open_feed('sorted_feed') or check_publish(ARGV[4])
if err then return err end
local id, mode, rel = ARGV[1], ARGV[2], ARGV[3]
if redis.call('HEXISTS', K_ITEMS, id) == 0 then
  return redis.error_reply('IDNOTFOUND no such item')
end
local pos
if mode == 'before' or mode == 'after' then
  if rel == id then
    return redis.error_reply('INVALIDARG an item cannot move relative to itself')
  end
  if redis.call('HEXISTS', K_ITEMS, rel) == 0 or not redis.call('LPOS', K_IDS, rel) then
    return redis.error_reply('IDNOTFOUND no item with the relative id')
  end
  local where = 'AFTER'
  if mode == 'before' then where = 'BEFORE' end
  redis.call('LREM', K_IDS, 1, id)
  redis.call('LINSERT', K_IDS, where, rel, id)
  if mode == 'before' then pos = ':' .. rel else pos = rel .. ':' end
elseif mode == 'begin' then
  redis.call('LREM', K_IDS, 1, id)
  redis.call('LPUSH', K_IDS, id)
  pos = 'begin:'
else
  redis.call('LREM', K_IDS, 1, id)
  redis.call('RPUSH', K_IDS, id)
  pos = ':end'
end
redis.call('PUBLISH', ARGV[4], id .. '\0' .. pos)
return 1
)lua"};

// Retract: remove the id and announce it; 0 (nothing published) if absent.
const script retract_script{std::string(detail::lua_prelude) + R"lua(
-- ARGV[1] id  ARGV[2] feed.retract channel. Returns 1 if removed, 0 if absent.
local err, conf = open_feed('sorted_feed', 'retraction_log')
if err then return err end
if redis.call('HEXISTS', K_ITEMS, ARGV[1]) == 0 then return 0 end
err = check_publish(ARGV[2])
if err then return err end
redis.call('LREM', K_IDS, 1, ARGV[1])
redis.call('HDEL', K_ITEMS, ARGV[1])
record_retracts({ARGV[1]}, publish_count(), tonumber(conf[2]) or 1000, true)
redis.call('PUBLISH', ARGV[2], ARGV[1])
return 1
)lua"};

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
  auto [sec, v] = co_await detail::run_script(*c, insert_script, keys, args);
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
  auto [sec, v] = co_await detail::run_script(*c, edit_script, keys, args);
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
  auto [sec, v] = co_await detail::run_script(*c, move_script, keys, args);
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
  auto [sec, v] = co_await detail::run_script(*c, retract_script, keys, args);
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
