// The hand-off for job_queue::claim (docs/jobs.md "Hand-off to claim()"): a
// job_queue handle whose claim() calls wait on a dry queue offers them to
// puts, which claim their jobs for it and send them on the handle's own
// channel, so a job reaches a waiting claim() in one hop instead of a
// wake-up followed by a claim round trip.
//
// The handle is not a registered worker: its entry in feed.takers carries
// the `:c` mark and lives only as long as it says (2 poll intervals,
// renewed by every claim call that finds the queue dry). The claims a put
// makes for it are recorded under its taker name (feed.worker_jobs), which
// serves one purpose: after its subscriber reconnects, the handle finds the
// claims whose messages were lost (a fence on its channel, then
// jobs/reconcile.lua with the claims it did receive) and gives them back.
// A received job's record goes with its claim (any finish, fail, cancel,
// stall, abort, retract or lapse ends both).
//
// A put's hand-off to a handle is provisional (includes/hand_off.lua
// provisional): the handle confirms what arrived within confirm_delay, in
// one call for all of it (jobs/take_confirm.lua); a hand-off left
// unconfirmed for a second (its process died or stopped) goes back to the
// line with no failure counted. And a handle whose last claim() learns that
// the queue is empty has withdrawn its offer by then (settled()), so a
// process that stops its client next leaves no offer behind.
#pragma once

#include "jobs/fetcher.hpp"
#include "jobs/pending.hpp"
#include "jobs/taker_channel.hpp"
#include "scripts/script_exec.hpp"

#include <thoonk/job_types.hpp>

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace thoonk::detail {

namespace asio = boost::asio;

class job_queue_impl;

class claim_taker : public std::enable_shared_from_this<claim_taker>, public taker_events {
 public:
  explicit claim_taker(const std::shared_ptr<job_queue_impl>& q);

  /// Subscribes to the handle's channel, waiting at most a second (without
  /// it, claims work by wake-ups as before). Called once, before the first
  /// claim call.
  static asio::awaitable<void> start(std::shared_ptr<claim_taker> self);

  /// Adds the offer to a claim call's arguments (jobs/claim.lua ARGV 3..5)
  /// when the handle takes hand-offs now: `waiting` claimers. Each call that
  /// returns true is matched by one offer_done().
  bool add_offer(std::vector<std::string>& args, std::size_t waiting);
  /// The claim call that carried an offer completed: `dry` when it found
  /// the queue dry, so the offer now stands.
  void offer_done(bool dry);
  /// Nobody waits any more: withdraw an offer that stands (once the claim
  /// calls in flight with an offer replied, if any are).
  void idle();
  /// Completes once no withdrawal asked for by idle() is pending or in
  /// flight (at most an offer's life: past it, the offer lapsed anyway).
  static asio::awaitable<void> settled(std::weak_ptr<claim_taker> weak);

  /// The handle closed: no more offers; the entry is withdrawn, the claims
  /// recorded under the taker that never arrived go back at once (what
  /// arrives later goes back through the closed fetcher), and the records
  /// of the jobs its callers hold are dropped.
  void close();

  const std::string& name() const noexcept { return name_; }

 private:
  // taker_events: what the handle's channel says.
  void handed(std::vector<claimed_job> jobs) override;
  void channel_lost() override;
  void check_claims() override;
  void want_reconcile();
  /// After a reconnect, a message it could not read, and at the close:
  /// withdraws the offer behind a fence, waits for the fence, then gives
  /// back the claims recorded under this taker that did not arrive
  /// (jobs/take_fence.lua, jobs/reconcile.lua). One at a time; asked for
  /// again meanwhile, it runs once more.
  static asio::awaitable<void> reconcile(std::shared_ptr<claim_taker> self);
  /// Forgets the known jobs whose claims ended elsewhere
  /// (jobs/claim_records.lua): run when `known_` reaches `prune_at_`, which
  /// then doubles what is left, so the map stays within twice the jobs the
  /// callers hold at a cost of one read per job at most.
  static asio::awaitable<void> prune(std::shared_ptr<claim_taker> self);
  /// Waits (at most 2 s) until no claim call with an offer is in flight.
  asio::awaitable<void> quiesce();
  std::chrono::milliseconds offer_ttl() const;
  /// jobs/claim.lua with n = 0, without waiting for a reconnect and for no
  /// longer than an offer lives; wakes settled() when done.
  static asio::awaitable<void> withdraw(std::shared_ptr<claim_taker> self,
                                        std::shared_ptr<job_queue_impl> q);
  /// Confirms the hand-offs received (jobs/take_confirm.lua): every
  /// confirm_delay while some arrived, one call for all of them.
  static asio::awaitable<void> confirm(std::shared_ptr<claim_taker> self,
                                       std::shared_ptr<job_queue_impl> q);
  void wake_settled();

  /// How long received hand-offs gather before one call confirms them. A
  /// hand-off lapses 1 s after its put (includes/hand_off.lua HANDED_MS),
  /// which leaves the message and the confirmation most of that second.
  static constexpr std::chrono::milliseconds confirm_delay{50};
  /// Most jobs one confirmation carries.
  static constexpr std::size_t confirm_batch = 1000;

  std::weak_ptr<job_queue_impl> q_;
  asio::any_io_executor ex_;
  std::string name_;
  taker_channel channel_;
  /// Received by hand-off: id → token. An entry stays until prune() finds
  /// its claim ended (every script that ends a claim deletes its record),
  /// so reconcile() never gives back a job a caller holds; an ended one it
  /// still lists is harmless (it has no record to match).
  std::unordered_map<std::string, std::int64_t> known_;
  static constexpr std::size_t min_prune = 1024;
  std::size_t prune_at_ = min_prune;
  bool pruning_ = false;
  bool offering_ = false;  ///< claim calls carry an offer
  bool offered_ = false;   ///< an offer may stand on the server
  bool closed_ = false;
  bool reconciling_ = false;
  bool reconcile_wanted_ = false;
  std::size_t offers_in_flight_ = 0;
  /// idle() came while offers were in flight: withdraw after their replies.
  bool withdraw_wanted_ = false;
  std::size_t withdrawals_ = 0;  ///< withdraw() calls not yet done
  std::vector<asio::steady_timer*> settle_waits_;
  /// Received by hand-off, not yet confirmed: id, token.
  std::vector<std::pair<std::string, std::int64_t>> unconfirmed_;
  bool confirming_ = false;
  /// Wakes reconcile() when the offers in flight ended (quiesce), or from
  /// its pause before another try.
  asio::steady_timer* waiting_ = nullptr;
};

}  // namespace thoonk::detail
