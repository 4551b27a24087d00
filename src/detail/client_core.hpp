// What a thoonk::client is: its command connection, subscriber, command
// router and instance id, in one object that the client, every handle made
// from it (feeds, queues, job queues) and every operation in flight share
// (std::shared_ptr). Destroying the client stops the core; the core itself
// lives until the last handle and the last operation let go of it, so
// neither ever reaches a destroyed connection (docs/design.md, "Lifetimes").
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/subscriber.hpp>

#include <boost/asio/any_io_executor.hpp>

#include <memory>
#include <string>

namespace thoonk::detail {

class router;

class client_core {
 public:
  using executor_type = boost::asio::any_io_executor;

  client_core(executor_type ex, config cfg);
  ~client_core();
  client_core(const client_core&) = delete;
  client_core& operator=(const client_core&) = delete;

  executor_type get_executor() const noexcept { return conn_.get_executor(); }
  const config& get_config() const noexcept { return conn_.get_config(); }
  connection& conn() noexcept { return conn_; }
  subscriber& sub() noexcept { return sub_; }
  detail::router& route() noexcept { return *router_; }
  const std::string& instance_id() const noexcept { return instance_id_; }

  /// Stops the router, the connection and the subscriber: what is pending
  /// completes with error::client_stopped, and so does what starts later.
  void stop();
  /// stop(), for good: the client object is gone (~client). Subscriptions
  /// report themselves inactive from here on.
  void close();
  bool closed() const noexcept { return closed_; }

 private:
  connection conn_;
  subscriber sub_;
  std::unique_ptr<detail::router> router_;
  std::string instance_id_;
  bool closed_ = false;
};

inline router& router_of(client_core& c) noexcept { return c.route(); }
/// A client's core, for the library's own tests and benchmarks.
inline client_core& core_of(client& c) noexcept { return *client_access::core(c); }
/// The command router of a client (the library's tests read its counters).
inline router& router_of(client& c) noexcept { return core_of(c).route(); }

}  // namespace thoonk::detail
