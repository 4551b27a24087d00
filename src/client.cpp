#include <thoonk/client.hpp>

#include "connection/router.hpp"
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

client::client(executor_type ex, config cfg)
    : conn_(ex, cfg),
      sub_(ex, std::move(cfg)),
      router_(std::make_unique<detail::router>(conn_)),
      instance_id_(detail::make_uuid()) {
  // Cluster mode: the subscriber's shard channels go where the map says.
  detail::impl_access::of(sub_)->set_slot_source(router_->slots());
}

client::~client() = default;

thoonk::cluster_stats client::cluster_stats() const { return router_->stats(); }

std::optional<config::address> client::node_for_slot(std::uint16_t slot) const {
  auto n = router_->node_for_slot(slot);
  if (!n) return std::nullopt;
  return config::address{n->host, n->port};
}

void client::stop() {
  router_->stop();
  conn_.stop();
  sub_.stop();
}

void client::start_connect(handler<> h) {
  auto op = [](client* self) -> asio::awaitable<std::tuple<error_code>> {
    auto [ec] = co_await self->conn_.async_connect(asio::as_tuple(asio::use_awaitable));
    if (ec) co_return std::tuple{ec};
    // Cluster mode: the slot map and a connection to each primary.
    auto rec = co_await self->router_->connect();
    if (rec) co_return std::tuple{rec};
    auto [ec2] = co_await self->sub_.async_connect(asio::as_tuple(asio::use_awaitable));
    co_return std::tuple{ec2};
  };
  detail::spawn_op(get_executor(), op(this), std::move(h));
}

namespace detail {
router& router_of(client& c) noexcept { return *c.router_; }
}  // namespace detail

void client::start_eval(script s, std::vector<std::string> keys, std::vector<std::string> args,
                        handler<resp3::value> h) {
  auto op =
      [](client* self, script s, std::vector<std::string> keys,
         std::vector<std::string> args) -> asio::awaitable<std::tuple<error_code, resp3::value>> {
    std::vector<std::string_view> k(keys.begin(), keys.end()), a(args.begin(), args.end());
    co_return co_await detail::eval_script(*self, s, k, a);
  };
  detail::spawn_op(get_executor(), op(this, std::move(s), std::move(keys), std::move(args)),
                   std::move(h));
}

}  // namespace thoonk
