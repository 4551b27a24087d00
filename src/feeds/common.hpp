// Helpers shared by the feed, sorted feed, management and subscription
// sources: the key layouts of the feed scripts, typed reply access,
// timestamps, config checks. The scripts themselves live in src/lua, the one
// runner and error mapper in scripts/script_exec.hpp (docs/architecture.md
// "Scripts").
#pragma once

#include "detail/op_status.hpp"

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_item.hpp>
#include <thoonk/resp3/value.hpp>
#include <thoonk/script.hpp>

#include "detail/keys.hpp"
#include "scripts/script_exec.hpp"

#include <boost/asio/awaitable.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace thoonk::detail {

/// The outcome of checking one config field: `ec` is success or
/// error::invalid_argument; `reason` names the field and its allowed values
/// (empty on success).
struct config_check {
  boost::system::error_code ec;
  std::string reason;
  explicit operator bool() const noexcept { return static_cast<bool>(ec); }
};

/// Checks one config field a caller wants to write with create_feed,
/// set_config or set_config_json (before any I/O; docs/feeds.md §2 lists the
/// rules). Fields the library reads must hold what the scripts expect:
///
///   max_length, retraction_log    integer 0 .. 2^53-1
///   claim_timeout_ms, result_ttl_ms  integer 1 .. 2^53-1 (milliseconds)
///   max_retries, max_stalls       integer 1 .. 2^53-1
///   min_backoff_ms, max_backoff_ms  integer 0 .. 2^53-1 (milliseconds)
///   rate_limit                    integer 0 .. 1000000 (jobs per second, 0 = none)
///   published, events, paused     "0" or "1"
///   dead_letter_queue             a job queue's name (no NUL), empty for none
///
/// Integers are plain decimal digits (no sign, space, point or exponent).
/// `type` may not be written (it is set at creation only) and a field name
/// may not be empty. Any other field is the application's and any value is
/// accepted. The rules go by field name alone, whatever the feed's type: a
/// job field on a plain feed is checked too (no round trip to read the
/// type, and a feed deleted and re-created with another type never holds a
/// value its scripts cannot read).
config_check validate_config_field(std::string_view field, std::string_view value);

/// A numeric config field's value as the library reads it, the same way
/// the scripts do (includes/numbers.lua conf_int): an integer by parse_int's rule
/// (^-?[0-9]+$) within the field's range above. nullopt for anything else
/// (the field's default applies, in the scripts too) and for a field that
/// is not numeric.
std::optional<std::int64_t> read_config_int(std::string_view field, std::string_view value);

/// Checks the reply of `HGET feed.config:[f] type`: feed_not_found when
/// null, wrong_feed_type when not `want`.
boost::system::error_code check_type_reply(const resp3::value& v, feed_type want);

/// Runs `req` (whose first command is `HGET feed.config:[f] type`, pushed
/// with push_type_check; every command on keys of feed `names`) through the
/// client's router and checks the type, then every other reply for error
/// values (with the server's text).
void push_type_check(request& req, const feed_names& names);
/// feed::async_publish (a generated id) as an awaitable for the library's
/// own operations (src/feeds/feed.cpp).
boost::asio::awaitable<op_result<publish_result>> publish_item(client_core& c, std::string name,
                                                               std::string item);
/// client::async_create_or_open_feed as an awaitable for the library's own
/// operations (src/feeds/management.cpp): completes with whether it created.
boost::asio::awaitable<op_result<bool>> create_or_open_feed(client_core& c, std::string name,
                                                            feed_type type, feed_config cfg);
boost::asio::awaitable<std::tuple<op_status, response>> exec_checked(detail::client_core& c,
                                                                     const feed_names& names,
                                                                     const request& req,
                                                                     feed_type want);

/// The KEYS of the `feed` layout (src/lua/layouts/feed.lua names them, in
/// this order): config, ids, items, publishes, changes, retracts,
/// retracttrim, idincr. Every data-changing feed and sorted-feed script,
/// get_all and catch_up take them.
std::vector<std::string> data_keys(const feed_names& n);

/// The KEYS of the `admin` layout (src/lua/layouts/admin.lua): the `feeds`
/// set, feed.config:[f], then, when `every_key`, every other key of the feed
/// (detail::all_keys order, config excluded as it is already second).
std::vector<std::string> admin_keys(const feed_names& n, bool every_key);
/// The KEYS of the `feed_admin` layout (src/lua/layouts/feed_admin.lua,
/// cluster mode): feed.config:[f], then, when `every_key`, every other key
/// of the feed. All in the feed's hash slot; the `feeds` set is not among them.
std::vector<std::string> feed_admin_keys(const feed_names& n, bool every_key);

/// Typed access to script replies (all throw nothing; bad shapes yield
/// error::unexpected_type through `ec`).
std::optional<std::string> as_opt_string(const resp3::value& v);
std::uint64_t as_u64(const resp3::value& v, boost::system::error_code& ec);

/// The checks before any I/O of an operation on one item: validate_name,
/// then validate_id.
boost::system::error_code validate_name_and_id(const config& cfg, std::string_view name,
                                               std::string_view id);

/// Validates an id list (each as validate_id).
boost::system::error_code validate_ids(const config& cfg, const std::vector<std::string>& ids);

}  // namespace thoonk::detail
