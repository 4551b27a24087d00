// thoonk::with_durability: WAIT after an operation, on the connection its
// writes went through (docs/reliability.md, "Durable acknowledgements").
#include <thoonk/client.hpp>
#include <thoonk/error.hpp>

#include "connection/router.hpp"
#include "detail/client_core.hpp"
#include "detail/executor_util.hpp"
#include "detail/keys.hpp"
#include "scripts/script_exec.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/co_spawn.hpp>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

error_code check_durability(const detail::client_core& c, const durability& ack,
                            std::string_view feed) noexcept {
  if (ack.replicas < 1 || ack.timeout.count() <= 0) return error::invalid_argument;
  // WAIT counts the replicas of the connection it is sent on; in cluster
  // mode that is the feed's primary, and an operation of the client itself
  // (create_feed, ...) names no primary whose writes it could wait for
  // (docs/cluster.md, "Durability and failover").
  if (c.get_config().cluster && feed.empty()) return error::invalid_argument;
  // WAIT holds the connection silent until it answers; the health check
  // closes a connection silent for health_check_timeout (every request on
  // it would then end with unknown_outcome).
  const auto& cfg = c.get_config();
  if (cfg.health_check_interval.count() > 0) {
    const auto silent_limit = cfg.health_check_timeout.count() > 0 ? cfg.health_check_timeout
                                                                   : 3 * cfg.health_check_interval;
    if (ack.timeout >= silent_limit) return error::invalid_argument;
  }
  return {};
}

asio::any_io_executor executor_of(const client_core& c) noexcept { return c.get_executor(); }

namespace {

// Cluster mode: WAIT on the primary serving `feed`, through the router.
asio::awaitable<std::tuple<error_code, response>> wait_on_primary(detail::client_core* c,
                                                                  std::string key, request req,
                                                                  exec_options opts) {
  co_return co_await router_of(*c).exec(req, key, opts);
}

}  // namespace

void wait_for_replicas(std::shared_ptr<client_core> core, durability& ack, std::string feed,
                       asio::any_completion_handler<void(error_code)> then) {
  client_core& c = *core;
  request req;
  req.push("WAIT", ack.replicas, ack.timeout.count());
  // The WAIT answers within its own timeout; config::request_timeout (which
  // may be shorter) must not cut it, and a lost reply must not hang.
  exec_options opts;
  opts.timeout = ack.timeout + std::chrono::seconds(1);
  auto slot = asio::get_associated_cancellation_slot(then);
  auto ex = c.get_executor();
  // `core` rides with the completion: the client object may be gone.
  auto done = [&ack, then = std::move(then), ex, core](error_code ec, response r) mutable {
    if (!ec && !r.empty()) {
      if (r[0].type == resp3::type::number) ack.acknowledged = static_cast<int>(r[0].integer);
      else ec = r[0].is_error() ? reply_error(r[0]) : error_code(error::unexpected_type);
    }
    ack.error = ec;
    complete_handler(std::move(then), ex, ec);
  };
  if (c.get_config().cluster) {
    // The same primary connection the operation's writes went through, so
    // the WAIT covers them.
    auto key = feed_names(c.get_config(), feed).key("config");
    asio::co_spawn(ex, wait_on_primary(&c, std::move(key), std::move(req), opts),
                   asio::bind_cancellation_slot(
                       slot, [done = std::move(done)](std::exception_ptr e,
                                                      std::tuple<error_code, response> r) mutable {
                         auto [ec, resp] = std::move(r);
                         if (e) ec = error::unknown_outcome;
                         done(ec, std::move(resp));
                       }));
    return;
  }
  router_of(c).any().async_exec(req, opts, asio::bind_cancellation_slot(slot, std::move(done)));
}

}  // namespace thoonk::detail
