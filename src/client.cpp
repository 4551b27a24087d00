#include <thoonk/client.hpp>

#include "connection/connection_impl.hpp"
#include "connection/router.hpp"
#include "detail/client_core.hpp"
#include "detail/impl_access.hpp"
#include "detail/spawn.hpp"
#include "detail/uuid.hpp"
#include "scripts/script_exec.hpp"
#include "subscriber/subscriber_impl.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

std::string_view to_string(feed_type t) noexcept {
  switch (t) {
    case feed_type::feed: return "feed";
    case feed_type::sorted_feed: return "sorted_feed";
    case feed_type::queue: return "queue";
    case feed_type::job: return "job";
  }
  return "feed";
}

std::optional<feed_type> feed_type_from_string(std::string_view s) noexcept {
  for (auto t : {feed_type::feed, feed_type::sorted_feed, feed_type::queue, feed_type::job})
    if (to_string(t) == s) return t;
  return std::nullopt;
}

namespace detail {

client_core::client_core(executor_type ex, config cfg)
    : conn_(ex, cfg),
      sub_(ex, std::move(cfg)),
      router_(std::make_unique<detail::router>(conn_)),
      instance_id_(detail::make_uuid()) {
  // Cluster mode: the subscriber's shard channels go where the map says.
  detail::impl_access::of(sub_)->set_slot_source(router_->slots());
}

client_core::~client_core() = default;

void client_core::stop() {
  router_->stop();
  conn_.stop();
  sub_.stop();
}

void client_core::close() {
  closed_ = true;
  // Stopped here and now, not through connection::stop(), which only posts
  // the stop when called off the executor. ~client runs on the executor's
  // thread or after its io_context stopped (the documented rule), where a
  // direct call is safe. A posted stop might never run (an io_context that
  // is not run again), and the requests waiting in the connection's queue
  // hold completion handlers that hold this core: a cycle the direct stop
  // breaks, as it moves them out to the io_context at once.
  router_->stop();
  detail::impl_access::of(conn_)->stop();
  detail::impl_access::of(sub_)->stop();
}

}  // namespace detail

client::client(executor_type ex, config cfg)
    : client_core_(std::make_shared<detail::client_core>(std::move(ex), std::move(cfg))) {}

// The core outlives this object when handles or operations still hold it:
// they complete with client_stopped from here on.
client::~client() { client_core_->close(); }

client::executor_type client::get_executor() const noexcept { return client_core_->get_executor(); }
const config& client::get_config() const noexcept { return client_core_->get_config(); }
connection& client::conn() noexcept { return client_core_->conn(); }
subscriber& client::sub() noexcept { return client_core_->sub(); }
const std::string& client::instance_id() const noexcept { return client_core_->instance_id(); }

thoonk::cluster_stats client::cluster_stats() const { return client_core_->route().stats(); }

std::optional<config::address> client::node_for_slot(std::uint16_t slot) const {
  auto n = client_core_->route().node_for_slot(slot);
  if (!n) return std::nullopt;
  return config::address{n->host, n->port};
}

void client::stop() { client_core_->stop(); }

void client::start_connect(handler<> h) {
  auto op = [](detail::client_core* self) -> asio::awaitable<std::tuple<error_code>> {
    auto [ec] = co_await self->conn().async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return std::tuple{ec};
    // Cluster mode: the slot map and a connection to each primary.
    auto rec = co_await self->route().connect();
    if (rec) co_return std::tuple{rec};
    auto [ec2] = co_await self->sub().async_connect(asio::as_tuple(asio::use_awaitable));
    co_return std::tuple{ec2};
  };
  detail::spawn_op(client_core_, op(client_core_.get()), std::move(h));
}

void client::start_eval(script s, std::vector<std::string> keys, std::vector<std::string> args,
                        handler<resp3::value> h) {
  auto op =
      [](detail::client_core* self, script s, std::vector<std::string> keys,
         std::vector<std::string> args) -> asio::awaitable<std::tuple<error_code, resp3::value>> {
    std::vector<std::string_view> k(keys.begin(), keys.end()), a(args.begin(), args.end());
    co_return co_await detail::eval_script(*self, s, k, a);
  };
  detail::spawn_op(client_core_,
                   op(client_core_.get(), std::move(s), std::move(keys), std::move(args)),
                   std::move(h));
}

}  // namespace thoonk
