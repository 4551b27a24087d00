// The entry point: one command connection, one subscriber, feed management.
#pragma once

#include <thoonk/cluster.hpp>
#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/export.hpp>
#include <thoonk/resp3/value.hpp>
#include <thoonk/script.hpp>
#include <thoonk/subscriber.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/json/value.hpp>
#include <boost/system/error_code.hpp>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace thoonk {

class client;

/// The kinds of feed the contract knows; stored as config field `type`.
enum class feed_type { feed, sorted_feed, queue, job };

/// "feed", "sorted_feed", "queue", "job".
THOONK_API std::string_view to_string(feed_type t) noexcept;
/// Parses the stored `type` value; nullopt for anything else.
THOONK_API std::optional<feed_type> feed_type_from_string(std::string_view s) noexcept;

/// Extra config fields written at creation, e.g. {{"max_length", "100"}}.
using feed_config = std::vector<std::pair<std::string, std::string>>;

/// A client of one Redis server: a multiplexed command connection, a
/// subscriber connection, the script registry and this instance's UUID
/// (carried in `newfeed`/`delfeed`/`conffeed` payloads).
///
/// **Threading**: as thoonk::connection: everything runs on the executor
/// given at construction; pass a strand when the io_context has several
/// threads. **Lifetime** (one rule for every handle; docs/design.md,
/// "Lifetimes"): feeds, sorted feeds, queues, job queues, runners and
/// subscription handles made from a client share its connections, so any of
/// them may be kept, copied, used and destroyed after the client is gone.
/// Destroying the client stops it at once, as stop() does: operations in
/// flight, waiting claims and gets included, complete with
/// error::client_stopped, as does every operation started afterwards through
/// a handle of it; subscriptions stop delivering. Destroy the client and its
/// handles on its executor.
class THOONK_API client {
 public:
  /// The executor everything of the client runs on.
  using executor_type = boost::asio::any_io_executor;

  /// Makes the connections without I/O: async_connect() connects.
  client(executor_type ex, config cfg);
  ~client();
  client(const client&) = delete;
  client& operator=(const client&) = delete;

  /// The executor given at construction.
  executor_type get_executor() const noexcept;
  /// The configuration given at construction.
  const config& get_config() const noexcept;
  /// The command connection, for commands of your own (exec). The
  /// library's feed, queue and job operations do not use it directly: they
  /// go through the client's command router (on a single server, this
  /// connection).
  connection& conn() noexcept;
  /// The subscriber connection (feed events, your own channels).
  subscriber& sub() noexcept;
  /// A random UUID made at construction: identifies this client instance.
  const std::string& instance_id() const noexcept;

  /// Connects the command connection, then the subscriber.
  /// Completion signature `void(error_code)`; errors as connection::async_connect.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_connect(CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &client::start_connect, this);
  }
  /// Deprecated: async_connect.
  template <class CompletionToken>
  [[deprecated("use async_connect")]] auto connect(CompletionToken&& token) {
    return async_connect(std::forward<CompletionToken>(token));
  }

  /// Runs `s` with EVALSHA; on NOSCRIPT (after SCRIPT FLUSH, a restart or a
  /// failover) loads it and runs it again, transparently.
  ///
  /// Completion signature `void(error_code, resp3::value)`. The value is the
  /// script's reply; a Lua error is an error value (check is_error()), not
  /// an error code. Error codes are transport errors as for async_exec().
  /// Cancellation: as connection::async_exec.
  /// Thread safety: start it on the client's executor (a strand when the io_context runs on several
  /// threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_eval(script s, std::vector<std::string> keys, std::vector<std::string> args,
                  CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, resp3::value)>(
        std::forward<CompletionToken>(token), &client::start_eval, this, std::move(s),
        std::move(keys), std::move(args));
  }
  /// Deprecated: async_eval.
  template <class CompletionToken>
  [[deprecated("use async_eval")]] auto eval(script s, std::vector<std::string> keys,
                                             std::vector<std::string> args,
                                             CompletionToken&& token) {
    return async_eval(std::move(s), std::move(keys), std::move(args),
                      std::forward<CompletionToken>(token));
  }

  // ---- feed management (docs/contract.md: Create/Delete Feed, Set/Get Config)
  // Every function validates names before any I/O (error::invalid_name).

  /// Creates a feed: SADD feeds, config `type` plus `cfg` fields, and
  /// PUBLISH newfeed `name\0instance-uuid`, in one atomic script.
  /// Completion `void(error_code)`; error::feed_exists if it exists.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_create_feed(std::string name, feed_type type, feed_config cfg,
                         CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code)>(std::forward<CompletionToken>(token),
                                                             &client::start_create_feed, this,
                                                             std::move(name), type, std::move(cfg));
  }
  /// Deprecated: async_create_feed.
  template <class CompletionToken>
  [[deprecated("use async_create_feed")]] auto create_feed(std::string name, feed_type type,
                                                           feed_config cfg,
                                                           CompletionToken&& token) {
    return async_create_feed(std::move(name), std::move(type), std::move(cfg),
                             std::forward<CompletionToken>(token));
  }

  /// Creates the feed as async_create_feed() does, or, when a feed of that name
  /// exists with type `type`, leaves it as it is (its config included: `cfg`
  /// applies only to a feed this call creates). One atomic script, so two
  /// clients racing to create the same feed agree on one. Completion
  /// `void(error_code, bool created)`; error::wrong_feed_type when the feed
  /// exists with another type; error::invalid_argument for a config value
  /// the library cannot use (nothing written); the handles' create_or_open
  /// (feed, sorted_feed, queue, job_queue) are built on it.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_create_or_open_feed(std::string name, feed_type type, feed_config cfg,
                                 CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, bool)>(
        std::forward<CompletionToken>(token), &client::start_create_or_open_feed, this,
        std::move(name), type, std::move(cfg));
  }
  /// Deprecated: async_create_or_open_feed.
  template <class CompletionToken>
  [[deprecated("use async_create_or_open_feed")]] auto create_or_open_feed(
      std::string name, feed_type type, feed_config cfg, CompletionToken&& token) {
    return async_create_or_open_feed(std::move(name), std::move(type), std::move(cfg),
                                     std::forward<CompletionToken>(token));
  }

  /// Deletes a feed and every key of it, and PUBLISHes delfeed.
  /// Completion `void(error_code)`; error::feed_not_found if missing.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_delete_feed(std::string name, CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token), &client::start_delete_feed, this, std::move(name));
  }
  /// Deprecated: async_delete_feed.
  template <class CompletionToken>
  [[deprecated("use async_delete_feed")]] auto delete_feed(std::string name,
                                                           CompletionToken&& token) {
    return async_delete_feed(std::move(name), std::forward<CompletionToken>(token));
  }

  /// Completion `void(error_code, bool)`.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_feed_exists(std::string name, CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, bool)>(
        std::forward<CompletionToken>(token), &client::start_feed_exists, this, std::move(name));
  }
  /// Deprecated: async_feed_exists.
  template <class CompletionToken>
  [[deprecated("use async_feed_exists")]] auto feed_exists(std::string name,
                                                           CompletionToken&& token) {
    return async_feed_exists(std::move(name), std::forward<CompletionToken>(token));
  }

  /// Names of all feeds, sorted. Completion `void(error_code, std::vector<std::string>)`.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_list_feeds(CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, std::vector<std::string>)>(
        std::forward<CompletionToken>(token), &client::start_list_feeds, this);
  }
  /// Deprecated: async_list_feeds.
  template <class CompletionToken>
  [[deprecated("use async_list_feeds")]] auto list_feeds(CompletionToken&& token) {
    return async_list_feeds(std::forward<CompletionToken>(token));
  }

  /// Sets one config field (HSET) and PUBLISHes conffeed.
  /// Completion `void(error_code)`; error::feed_not_found if missing;
  /// error::invalid_argument, with nothing written, for a value the library
  /// cannot use (config_field_problem() says which rule it broke).
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_set_config(std::string name, std::string field, std::string value,
                        CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token), &client::start_set_config, this, std::move(name),
        std::move(field), std::move(value));
  }
  /// Deprecated: async_set_config.
  template <class CompletionToken>
  [[deprecated("use async_set_config")]] auto set_config(std::string name, std::string field,
                                                         std::string value,
                                                         CompletionToken&& token) {
    return async_set_config(std::move(name), std::move(field), std::move(value),
                            std::forward<CompletionToken>(token));
  }

  /// Reads one config field. Completion
  /// `void(error_code, std::optional<std::string>)` (nullopt: field unset);
  /// error::feed_not_found if the feed is missing.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_get_config(std::string name, std::string field, CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, std::optional<std::string>)>(
        std::forward<CompletionToken>(token), &client::start_get_config, this, std::move(name),
        std::move(field));
  }
  /// Deprecated: async_get_config.
  template <class CompletionToken>
  [[deprecated("use async_get_config")]] auto get_config(std::string name, std::string field,
                                                         CompletionToken&& token) {
    return async_get_config(std::move(name), std::move(field),
                            std::forward<CompletionToken>(token));
  }

  /// Stores a structured value as JSON text in one config field.
  /// Completion `void(error_code)`. Errors as async_set_config() (the value is the JSON text).
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_set_config_json(std::string name, std::string field, boost::json::value value,
                             CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code)>(
        std::forward<CompletionToken>(token), &client::start_set_config_json, this, std::move(name),
        std::move(field), std::move(value));
  }
  /// Deprecated: async_set_config_json.
  template <class CompletionToken>
  [[deprecated("use async_set_config_json")]] auto set_config_json(std::string name,
                                                                   std::string field,
                                                                   boost::json::value value,
                                                                   CompletionToken&& token) {
    return async_set_config_json(std::move(name), std::move(field), std::move(value),
                                 std::forward<CompletionToken>(token));
  }

  /// Reads one config field as JSON. Completion
  /// `void(error_code, boost::json::value)`: null when the field is unset;
  /// a field that is not valid JSON is returned as a JSON string.
  /// Cancellation: as connection::async_exec (a request not yet written is never sent; a written
  /// one completes with operation_aborted at once and may still run on the server). Thread safety:
  /// start it on the client's executor (a strand when the io_context runs on several threads).
  template <completion_token CompletionToken = default_token_t>
  auto async_get_config_json(std::string name, std::string field, CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, boost::json::value)>(
        std::forward<CompletionToken>(token), &client::start_get_config_json, this, std::move(name),
        std::move(field));
  }
  /// Deprecated: async_get_config_json.
  template <class CompletionToken>
  [[deprecated("use async_get_config_json")]] auto get_config_json(std::string name,
                                                                   std::string field,
                                                                   CompletionToken&& token) {
    return async_get_config_json(std::move(name), std::move(field),
                                 std::forward<CompletionToken>(token));
  }

  /// Deletes the Redis function libraries that other builds of this
  /// library loaded (docs/design.md §3, "Old libraries"): every library
  /// named `thoonk_` plus 40 hex digits that this build does not use, on
  /// the server (in cluster mode, on every primary of the slot map, one
  /// after the other). Libraries of other names are never touched. Call it
  /// after an upgrade, once no process of the old build runs: a process of
  /// another build that still runs loads its library again at its next
  /// call (one extra round trip, nothing fails); while two builds run on
  /// purpose, each call of this costs the other build one load of each
  /// library it uses.
  ///
  /// Completion signature `void(error_code, std::size_t deleted)`: how many
  /// libraries this call deleted (a library another client deleted first
  /// is not counted and is no error). A server without functions (before
  /// Redis 7.0) has none: 0. Errors: error::no_permission when the user may
  /// not run FUNCTION LIST or FUNCTION DELETE (grant `+function|list
  /// +function|delete`); the server's text reaches capture_diagnostics. On
  /// an error, the count is what this call did delete (run it again for
  /// the rest). Cancellation: as connection::async_exec. Thread safety: as the
  /// client's other operations.
  template <completion_token CompletionToken = default_token_t>
  auto async_delete_stale_functions(CompletionToken&& token = {}) {
    return detail::initiate<void(boost::system::error_code, std::size_t)>(
        std::forward<CompletionToken>(token), &client::start_delete_stale_functions, this);
  }
  /// Deprecated: async_delete_stale_functions.
  template <class CompletionToken>
  [[deprecated("use async_delete_stale_functions")]] auto delete_stale_functions(
      CompletionToken&& token) {
    return async_delete_stale_functions(std::forward<CompletionToken>(token));
  }

  /// What the client's command router has done on a Redis Cluster
  /// (config::cluster; docs/cluster.md, "Watching the router"): MOVED and
  /// ASK replies followed, TRYAGAIN and CLUSTERDOWN pauses, requests sent
  /// again because their node was down, slot maps read, and one entry per
  /// primary connection with its connects and requests. All zero on one
  /// server (conn().stats() has that connection's counters). Returns at
  /// once, no I/O. Thread safety: call it on the client's executor, like
  /// every other member.
  thoonk::cluster_stats cluster_stats() const;

  /// The primary that the client's current slot map names for hash slot
  /// `slot` (see hash_slot(); a feed's slot is hash_slot(name)): where the
  /// client sends that slot's requests next. nullopt on one server, before
  /// connect() read a map, while no primary serves the slot, and for a
  /// slot past 16383. The map follows MOVED replies and refreshes (after
  /// failovers, every config::cluster_refresh_interval), so the answer
  /// can change from one call to the next. Returns at once, no I/O. Thread
  /// safety: call it on the client's executor.
  std::optional<config::address> node_for_slot(std::uint16_t slot) const;

  /// Stops both connections. Pending operations fail (see connection::stop).
  void stop();

 private:
  template <class... Ts>
  using handler = detail::op_handler<void(boost::system::error_code, Ts...)>;

  void start_connect(handler<> h);
  void start_eval(script s, std::vector<std::string> keys, std::vector<std::string> args,
                  handler<resp3::value> h);
  void start_create_feed(std::string name, feed_type type, feed_config cfg, handler<> h);
  void start_create_or_open_feed(std::string name, feed_type type, feed_config cfg,
                                 handler<bool> h);
  void start_delete_feed(std::string name, handler<> h);
  void start_feed_exists(std::string name, handler<bool> h);
  void start_list_feeds(handler<std::vector<std::string>> h);
  void start_set_config(std::string name, std::string field, std::string value, handler<> h);
  void start_get_config(std::string name, std::string field, handler<std::optional<std::string>> h);
  void start_set_config_json(std::string name, std::string field, boost::json::value value,
                             handler<> h);
  void start_get_config_json(std::string name, std::string field, handler<boost::json::value> h);
  void start_delete_stale_functions(handler<std::size_t> h);

  friend struct detail::client_access;

  // Shared with every handle made from this client and every operation in
  // flight; see "Lifetime" above.
  std::shared_ptr<detail::client_core> client_core_;
};

/// Why create_feed, set_config or set_config_json would refuse `value` for
/// the config field `field` with error::invalid_argument: a sentence naming
/// the field and its allowed values (for instance "claim_timeout_ms must be
/// an integer from 1 to 9007199254740991 (milliseconds)"), or an empty
/// string when the value is accepted. Fields the library does not read
/// accept any value. No I/O; thread-safe. The rules are in docs/feeds.md §2.
THOONK_API std::string config_field_problem(std::string_view field, std::string_view value);

}  // namespace thoonk
