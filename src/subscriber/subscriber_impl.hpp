// Subscription bookkeeping and fan-out on top of a connection_impl in
// subscriber mode.
#pragma once

#include "connection/connection_impl.hpp"
#include "connection/router.hpp"
#include "subscriber/shard_placement.hpp"

#include <thoonk/subscriber.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>

#include <deque>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace thoonk::detail {

using subscribe_handler = op_handler<void(boost::system::error_code, subscription)>;

class subscriber_impl : public std::enable_shared_from_this<subscriber_impl> {
 public:
  subscriber_impl(boost::asio::any_io_executor ex, config cfg);
  ~subscriber_impl();

  /// Wires the connection's hooks; must be called right after construction
  /// (needs shared_from_this).
  void init();

  const boost::asio::any_io_executor& executor() const noexcept { return conn_->executor(); }
  connection_impl& conn() noexcept { return *conn_; }

  void async_connect(connect_handler h) { conn_->async_connect(std::move(h)); }
  void async_subscribe(subscription::kind k, std::string name, subscriber::callback cb,
                       subscribe_handler h);
  /// Cluster mode: where shard channels go (the client's router map). Without
  /// one, shard channels go to this subscriber's own server first and follow
  /// its MOVED replies.
  void set_slot_source(std::weak_ptr<slot_source> s) { slots_ = std::move(s); }
  subscription add_listener(std::function<void(const subscriber_event&)> l);
  void set_error_handler(std::function<void(std::exception_ptr)> h) {
    error_handler_ = std::move(h);
  }
  void remove(subscription::kind k, const std::string& name, std::uint64_t id);
  void stop();

  bool connected() const noexcept {
    return conn_->connected() && restore_pending_.empty() && !placement_.any_lost();
  }
  subscriber_stats stats() const noexcept;

 private:
  struct callback_slot {
    std::uint64_t id;
    subscriber::callback fn;  // empty: removed during a fan-out (tombstone)
  };
  struct waiter {
    std::uint64_t id;
    handler_box<void(boost::system::error_code, subscription)> handler;
    diagnostics* diag = nullptr;  // gets the server's text of a refusal
  };
  struct entry {
    std::vector<callback_slot> callbacks;
    std::vector<waiter> waiters;  // subscribe() calls waiting for confirmation
    bool confirmed = false;
  };
  using table = std::unordered_map<std::string, entry>;
  using kind = subscription::kind;

  // One connection per node that holds shard channels (the key is
  // to_string(node); "" is the subscriber's own server).
  struct shard_conn {
    cluster_node node;
    std::shared_ptr<connection_impl> conn;
    // SSUBSCRIBEs written and not confirmed yet, in order: a refusal
    // (MOVED...) belongs to the oldest.
    std::deque<std::string> unconfirmed;
    // SUNSUBSCRIBEs we sent whose confirmation is still due, by channel.
    std::unordered_map<std::string, unsigned> own_unsubscribes;
    // Confirmations (or refusals) still due for SSUBSCRIBEs whose
    // registration was dropped before they came, by channel.
    std::unordered_map<std::string, unsigned> stale;
  };

  void on_push(resp3::value&& v);
  void on_connection_event(const connection_event& ev);
  void on_setup(request& req);
  void confirm(bool pattern, const std::string& name);
  void deliver(entry& e, const message& m);
  void send(std::string_view command, const std::string& name);
  void subscribe_on_server(bool pattern, const std::string& name, request* setup = nullptr);
  void on_refused(resp3::value&& error_reply);
  void fail_waiters(boost::system::error_code ec);
  void emit(const subscriber_event& ev);
  table& tbl(bool pattern) { return pattern ? patterns_ : channels_; }
  table& tbl(kind k) { return k == kind::shard ? shards_ : tbl(k == kind::pattern); }
  static bool live(const entry& e);
  void cleanup(kind k, const std::string& name);
  void emit_connected_if_restored();

  // ---- shard channels (SSUBSCRIBE): placement decides, these do the I/O ----
  shard_placement::lookup map_lookup() const;
  shard_conn& shard_conn_for(const cluster_node& node);
  void shard_subscribe(const std::string& channel, const cluster_node& node);
  void shard_unsubscribe(const std::string& channel, const cluster_node& node);
  void on_shard_push(const std::string& key, resp3::value&& v);
  void on_shard_setup(const std::string& key, request& req);
  void on_shard_refused(const std::string& key, resp3::value&& error_reply);
  void on_shard_event(const std::string& key, const connection_event& ev);
  void confirm_shard(const std::string& key, const std::string& channel);
  void after_shard_change(bool became_lost);
  void apply_plan();
  void drop_idle_shard_conns();
  void start_healing();
  static boost::asio::awaitable<void> heal(std::shared_ptr<subscriber_impl> self);

  std::shared_ptr<connection_impl> conn_;
  config cfg_;  // the subscriber's own, request timeout off
  table channels_, patterns_, shards_;
  shard_placement placement_;
  std::map<std::string, shard_conn> shard_conns_;
  std::vector<std::shared_ptr<connection_impl>> retired_;  // stopped shard connections
  std::weak_ptr<slot_source> slots_;
  bool healing_ = false;
  std::weak_ptr<boost::asio::steady_timer> heal_timer_;
  bool shard_gap_ = false;  // a `disconnected` was emitted for lost shard channels
  // Confirmations still due for SUBSCRIBEs whose registration was dropped
  // before the server confirmed; they must not confirm a newer registration.
  std::unordered_map<std::string, unsigned> stale_channel_confirms_, stale_pattern_confirms_;
  // Names re-subscribed by the current connection's setup, not yet confirmed.
  std::unordered_set<std::string> restore_pending_;
  // SUBSCRIBE/PSUBSCRIBE commands sent on this connection and not confirmed
  // yet, in order. The server answers them in order, so a refusal (an error
  // reply) belongs to the oldest one.
  std::deque<std::pair<bool, std::string>> unconfirmed_;
  std::vector<std::pair<std::uint64_t, std::function<void(const subscriber_event&)>>> listeners_;
  std::function<void(std::exception_ptr)> error_handler_;
  std::uint64_t next_id_ = 1;
  unsigned dispatching_ = 0;  // >0 while callbacks run: removals are deferred
  std::vector<std::pair<kind, std::string>> deferred_cleanup_;
  bool stopped_ = false;
  subscriber_stats stats_;
};

}  // namespace thoonk::detail
