// Feed (docs/contract.md "Feed"): items in a zset scored by publish time (ms).
// What feeds share with sorted feeds is in feed_base.cpp; here: publish and
// the typed settings.
#include <thoonk/feed.hpp>

#include "detail/keys.hpp"
#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "detail/uuid.hpp"
#include "feeds/bench_access.hpp"
#include "feeds/common.hpp"
#include "scripts/script_exec.hpp"
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
asio::awaitable<detail::op_result<publish_result>> publish_op(detail::client_core& c,
                                                              std::string name,
                                                              std::optional<std::string> id,
                                                              std::string item) {
  const auto& cfg = c.get_config();
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
  args.push_back(detail::unix_ms_string());
  args.push_back(n.channel("publish"));
  args.push_back(n.channel("edit"));
  args.push_back(n.channel("retract"));
  auto [st, v] = co_await detail::run_script(c, detail::scripts::feeds_publish(),
                                             detail::data_keys(n), std::move(args));
  if (st) co_return std::tuple{std::move(st), std::move(out)};
  if (v.elements.size() != 2)
    co_return std::tuple{detail::op_status(error::unexpected_type), std::move(out)};
  out.edited = v.elements[0].integer == 1;
  for (auto& e : v.elements[1].elements) out.evicted.push_back(std::move(e.str));
  co_return std::tuple{detail::op_status{}, std::move(out)};
}

constexpr std::string_view max_length_field = "max_length";

}  // namespace

namespace detail {
asio::awaitable<op_result<publish_result>> publish_item(client_core& c, std::string name,
                                                        std::string item) {
  return publish_op(c, std::move(name), std::nullopt, std::move(item));
}

std::vector<std::string> feed_script_keys(std::string_view name) {
  return data_keys(feed_names(config{}, name));
}
}  // namespace detail

void feed::start_publish(std::optional<std::string> id, std::string item,
                         handler<publish_result> h) const {
  detail::spawn_op(client_core_, publish_op(*client_core_, name_, std::move(id), std::move(item)),
                   std::move(h));
}

feed_config feed_settings::to_fields() const {
  feed_config out;
  if (max_length) out.emplace_back(max_length_field, std::to_string(*max_length));
  return out;
}

feed_settings feed_settings::from_fields(const feed_config& fields) {
  feed_settings out;
  for (const auto& [f, v] : fields) {
    // A value the scripts would not use (they fall back to the default)
    // reads as unset, so what is read is what takes effect.
    if (f != max_length_field) continue;
    if (auto n = detail::read_config_int(f, v)) out.max_length = static_cast<std::uint64_t>(*n);
  }
  return out;
}

std::string feed_settings::problem() const {
  for (const auto& [f, v] : to_fields())
    if (auto r = detail::validate_config_field(f, v)) return r.reason;
  return {};
}

}  // namespace thoonk
