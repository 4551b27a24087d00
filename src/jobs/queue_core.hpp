// The state and operations queue and job_queue share (behind
// detail::queue_base): names and keys, the put batchers and put_many, the
// wake-up subscription, the type check of open, create-or-open.
#pragma once

#include "detail/keys.hpp"
#include "detail/spawn.hpp"
#include "jobs/batcher.hpp"
#include "jobs/fetcher.hpp"
#include "jobs/pending.hpp"
#include "jobs/reply_parse.hpp"
#include "jobs/wake.hpp"
#include "scripts/script_exec.hpp"

#include <thoonk/client.hpp>
#include <thoonk/detail/queue_base.hpp>
#include <thoonk/script.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace thoonk::detail {

namespace asio = boost::asio;

/// What differs between the kinds that share queue_core.
struct queue_kind {
  feed_type type;
  /// The KEYS of the kind's layout (jobs::queue_keys, jobs::job_keys).
  std::vector<std::string> (*layout)(const feed_names&);
  /// The put script (ARGV: now_ms, high '1'/'0', wake channel, items...;
  /// returns the ids), run with the layout's keys.
  const script& (*put_script)();
};

class queue_core : public std::enable_shared_from_this<queue_core> {
 public:
  using error_code = boost::system::error_code;

  queue_core(std::shared_ptr<client_core> c, std::string_view name, const queue_kind& kind,
             const queue_options_base& o);
  virtual ~queue_core() = default;
  queue_core(const queue_core&) = delete;
  queue_core& operator=(const queue_core&) = delete;

  /// Makes the put batchers (needs weak_from_this()); derived kinds make
  /// their fetcher in their own init and call this.
  void init_puts();
  /// Ends everything pending with operation_aborted. On the executor. A
  /// derived kind closes its own machinery and calls this.
  virtual void close();
  /// Something may have arrived: the fetcher looks again.
  virtual void poke() = 0;

  /// Subscribes the wake-up channel (once) and waits for the confirmation
  /// up to `max_wait` (see jobs::wake_subscription::ensure).
  asio::awaitable<op_status> ensure_wake(std::chrono::milliseconds max_wait);
  /// open(): name valid, type right (one read), wake-up channel subscribed.
  asio::awaitable<op_status> open();
  /// create_or_open(): creates the feed with `fields` when missing
  /// (otherwise checks its type and leaves its config alone), then open().
  asio::awaitable<op_status> create_or_open(feed_config fields);
  /// The config fields `names` of the feed, read with its type check in
  /// one request; nullopt for fields that are not set.
  asio::awaitable<op_result<std::vector<std::optional<std::string>>>> read_fields(
      std::vector<std::string_view> fields);

  /// One put script call: the ids of `items`, in order.
  static asio::awaitable<op_result<std::vector<std::string>>> put_batch(
      std::shared_ptr<queue_core> self, bool high, std::vector<std::string> items);
  /// put_batch's ids as the put_results of plain puts (each one added).
  static asio::awaitable<op_result<std::vector<put_result>>> put_results(
      asio::awaitable<op_result<std::vector<std::string>>> ids);
  /// put_many: chunks of max_put_batch, each one put_batch.
  static asio::awaitable<op_result<std::vector<std::string>>> put_many(
      std::shared_ptr<queue_core> self, std::vector<std::string> items, priority p);

  /// The client's connections: owned (with every handle), so the
  /// machinery running in the background never outlives them.
  std::shared_ptr<client_core> client;
  client_core& cl;
  error_code name_ec;  ///< the name's validation: every operation fails with it
  feed_names names;
  feed_type type;
  /// The layout's KEYS.
  std::vector<std::string> keys;
  /// `feed.wake:name`: put scripts PUBLISH here when a getter sleeps.
  std::string wake_channel;
  const script& put_script;
  std::size_t max_put_batch;
  std::size_t max_puts_in_flight;
  std::shared_ptr<jobs::batcher<std::string, put_result>> puts[2];
  jobs::wake_subscription wake;
  bool closed = false;
};

/// open() and create_or_open() of a handle type (queue, job_queue): runs
/// the core's step and completes `h` with the handle. The handle (a copy of
/// the caller's) keeps the core alive meanwhile.
template <class Handle>
void start_open_handle(Handle q, std::shared_ptr<queue_core> core,
                       op_handler<void(boost::system::error_code, Handle)> h) {
  auto op = [](Handle q, std::shared_ptr<queue_core> core) -> asio::awaitable<op_result<Handle>> {
    auto st = co_await core->open();
    co_return std::tuple{std::move(st), std::move(q)};
  };
  const auto ex = core->cl.get_executor();
  spawn_op(ex, op(std::move(q), std::move(core)), std::move(h));
}

template <class Handle>
void start_create_or_open_handle(Handle q, std::shared_ptr<queue_core> core, feed_config fields,
                                 op_handler<void(boost::system::error_code, Handle)> h) {
  auto op = [](Handle q, std::shared_ptr<queue_core> core,
               feed_config fields) -> asio::awaitable<op_result<Handle>> {
    auto st = co_await core->create_or_open(std::move(fields));
    co_return std::tuple{std::move(st), std::move(q)};
  };
  const auto ex = core->cl.get_executor();
  spawn_op(ex, op(std::move(q), std::move(core), std::move(fields)), std::move(h));
}

/// read_settings() of a handle type: reads the config `fields` with the
/// type check in one request and parses the fields that are set with
/// Settings::from_fields (a queue has none: its settings are empty).
template <class Settings>
void start_read_settings_of(std::shared_ptr<queue_core> core, std::vector<std::string_view> fields,
                            op_handler<void(boost::system::error_code, Settings)> h) {
  auto op = [](std::shared_ptr<queue_core> core,
               std::vector<std::string_view> fields) -> asio::awaitable<op_result<Settings>> {
    auto [st, values] = co_await core->read_fields(fields);
    if (st) co_return std::tuple{std::move(st), Settings{}};
    feed_config set;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (values[i]) set.emplace_back(std::string(fields[i]), std::move(*values[i]));
    co_return std::tuple{op_status{}, Settings::from_fields(set)};
  };
  const auto ex = core->cl.get_executor();
  spawn_op(ex, op(std::move(core), std::move(fields)), std::move(h));
}

}  // namespace thoonk::detail
