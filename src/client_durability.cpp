// thoonk::with_durability: WAIT after an operation, on the connection its
// writes went through (docs/reliability.md, "Durable acknowledgements").
#include <thoonk/client.hpp>
#include <thoonk/error.hpp>

#include "connection/router.hpp"
#include "detail/executor_util.hpp"
#include "detail/script_exec.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

error_code check_durability(const client& c, const durability& ack) noexcept {
  if (ack.replicas < 1 || ack.timeout.count() <= 0) return error::invalid_argument;
  // WAIT counts the replicas of the connection it is sent on; in cluster
  // mode an operation's writes go to its feed's primary, which this
  // completion does not know (docs/cluster.md, "Durability").
  if (c.get_config().cluster) return error::invalid_argument;
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

asio::any_io_executor executor_of(client& c) noexcept { return c.get_executor(); }

void wait_for_replicas(client& c, durability& ack,
                       asio::any_completion_handler<void(error_code)> then) {
  request req;
  req.push("WAIT", ack.replicas, ack.timeout.count());
  // The WAIT answers within its own timeout; config::request_timeout (which
  // may be shorter) must not cut it, and a lost reply must not hang.
  exec_options opts;
  opts.timeout = ack.timeout + std::chrono::seconds(1);
  auto slot = asio::get_associated_cancellation_slot(then);
  auto ex = c.get_executor();
  router_of(c).any().exec(
      req, opts,
      asio::bind_cancellation_slot(
          slot, [&ack, then = std::move(then), ex](error_code ec, response r) mutable {
            if (!ec && !r.empty()) {
              if (r[0].type == resp3::type::number)
                ack.acknowledged = static_cast<int>(r[0].integer);
              else ec = r[0].is_error() ? reply_error(r[0]) : error_code(error::unexpected_type);
            }
            ack.error = ec;
            complete_handler(std::move(then), ex, ec);
          }));
}

}  // namespace thoonk::detail
