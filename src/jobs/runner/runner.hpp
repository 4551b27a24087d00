// job_queue::run: the worker runner (docs/jobs.md "Workers and the
// runner"). Its decisions are runner_book's (no I/O, unit-tested); the
// runner is the I/O around them, all on the client's executor except the
// handlers. Its parts, one file each in this folder:
//
//  * rounds.cpp: the run and its round loop: the loop asks the book for
//    rounds and sends each as one jobs/work.lua call (finish what is done,
//    claim for idle slots); wake-ups (the queue's channel), aborts
//    (`job.abort:[name]`), signals and the operation's own cancellation
//    become book events; the stop and the leave;
//  * handlers.cpp: running the user's handler for each job, each on a strand
//    of the handler executor, where its cancellation signal is emitted too
//    (a cancellation signal is not thread-safe); its outcome (finish in a
//    round, fail, give back); the jobs claimed ahead;
//  * heartbeat.cpp: the registration, and a heartbeat loop that renews it
//    and every lease in one jobs/worker_heartbeat.lua call and cancels the
//    handlers of lost claims;
//  * hand_off.cpp: jobs handed off by puts arrive on the runner's own
//    channel (`job.take:[name]:worker`, jobs/taker_channel.hpp); after the
//    subscriber reconnects, a fence on that channel tells which hand-offs
//    were missed (reconcile()).
#pragma once

#include "detail/op_status.hpp"
#include "jobs/runner_book.hpp"
#include "jobs/taker_channel.hpp"

#include <thoonk/job_queue.hpp>

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace thoonk::detail {

class job_queue_impl;
class runner;

/// One job in a handler: job_context's state. `cancelled` is read from any
/// thread; `signal` is used on `strand` only; the rest on the client's
/// executor.
class job_slot : public std::enable_shared_from_this<job_slot> {
 public:
  job_slot(claimed_job j, boost::asio::strand<boost::asio::any_io_executor> s,
           std::weak_ptr<runner> r)
      : job(std::move(j)), strand(std::move(s)), owner(std::move(r)) {}

  claimed_job job;
  boost::asio::strand<boost::asio::any_io_executor> strand;
  std::weak_ptr<runner> owner;
  jobs::runner_book::clock::time_point started = jobs::runner_book::clock::now();
  std::atomic<bool> cancelled{false};
  boost::asio::cancellation_signal signal;
  /// The cancellation was asked for without knowing that the claim ended
  /// (an abort message names the id, not the token; the stop deadline):
  /// when the handler ends, the claim is given back if it is still ours.
  bool release_if_held = false;

  /// On the client's executor. Idempotent.
  void cancel(bool unsure);
};

/// Lives as long as its run (run() holds it) and any handler or coroutine
/// of it; used on the client's executor only.
class runner : public std::enable_shared_from_this<runner>, public taker_events {
 public:
  runner(job_queue h, std::shared_ptr<job_queue_impl> q, job_coroutine co, job_function fn,
         run_options o);

  /// The run, from the options' check to the leave (rounds.cpp).
  static boost::asio::awaitable<op_result<run_report>> run(std::shared_ptr<runner> self);
  /// Asks for the graceful stop (the operation's cancellation,
  /// run_options::stop).
  void request_stop();
  /// job_context::progress: sends the report for claim, from any thread.
  void progress(claim_ref claim, std::string text);

 private:
  using book_type = jobs::runner_book;
  using time_point = book_type::time_point;

  /// A job claimed ahead (runner_book::prefetching), since when it waits.
  struct ready_job {
    claimed_job job;
    time_point since;
  };

  static book_type::settings book_settings(const run_options& o, const job_queue_impl& q);

  // ---- the run and its rounds (rounds.cpp) ----------------------------------------
  /// Runs `op` as one of `ops_`.
  void spawn(boost::asio::awaitable<void> op);
  /// Makes the round loop look again.
  void poke() { kick_.cancel(); }
  void fail_run(op_status st);
  op_status check_options() const;
  std::string make_description() const;
  std::string default_name() const;
  /// Subscribes to the queue's aborts (at most a second's wait).
  static boost::asio::awaitable<void> subscribe_aborts(std::shared_ptr<runner> self);
  static boost::asio::awaitable<void> run_round(std::shared_ptr<runner> self, book_type::round r);

  // ---- handlers (handlers.cpp) ----------------------------------------------------
  void start_handler(claimed_job j);
  void handler_ended(const std::shared_ptr<job_slot>& slot, std::exception_ptr e,
                     std::optional<std::string> result);
  /// Starts jobs claimed ahead while the book says a slot is free.
  void start_ready();
  /// Starts the first `starting` jobs, keeps the rest claimed ahead.
  void start_or_keep(std::vector<claimed_job> js, std::size_t starting, time_point now);
  /// Removes and returns the job claimed ahead with this id (and token,
  /// when given), if there is one.
  std::optional<claimed_job> drop_ready(const std::string& id, std::optional<std::int64_t> token);
  /// Gives back the jobs claimed ahead that wait since `before` or
  /// earlier; `waited_too_long`: they sat behind a handler that turned out
  /// long (the heartbeat's check), not a stop.
  void give_back_ready(time_point before, bool waited_too_long);
  void fail(claim_ref claim, std::exception_ptr e);
  static boost::asio::awaitable<void> fail_op(std::shared_ptr<runner> self, claim_ref claim,
                                              std::string what, fail_options fo);
  void release(claim_ref claim);
  /// Cancels the handler of claim (id, token) if it runs here, or drops
  /// it if it was claimed ahead.
  void lose(const std::string& id, std::int64_t token);
  /// An abort message for job `id`: its handler stops, or, claimed ahead,
  /// it does not start.
  void aborted(const std::string& id);
  void cancel_all(bool unsure);
  /// The claims this worker holds, as id, token pairs.
  std::vector<std::string> held_claims() const;

  // ---- registration and heartbeats (heartbeat.cpp) --------------------------------
  boost::asio::awaitable<op_status> register_worker();
  /// The registration lapsed (a heartbeat or round said so): every claim
  /// this worker held is being returned, so its handlers stop; then it
  /// registers again (which also fails the lapsed registration, if nobody
  /// did yet).
  void lapsed();
  static boost::asio::awaitable<void> heartbeats(std::shared_ptr<runner> self);

  // ---- hand-off (hand_off.cpp) ----------------------------------------------------
  /// Subscribes to the runner's channel (at most a second's wait: without
  /// it the runner works by wake-ups and claims alone).
  static boost::asio::awaitable<void> start_taking(std::shared_ptr<runner> self);
  // taker_events: what the runner's channel says.
  void handed(std::vector<claimed_job> js) override;
  void channel_lost() override;
  void check_claims() override;
  void want_reconcile();
  static boost::asio::awaitable<void> reconcile(std::shared_ptr<runner> self);

  /// The queue as its users see it (abort subscription, progress).
  job_queue handle_;
  std::shared_ptr<job_queue_impl> impl_;
  boost::asio::any_io_executor ex_;
  job_coroutine co_handler_;
  job_function fn_handler_;
  run_options opts_;
  book_type book_;
  /// The round loop's wait: cancelled to make it look again.
  boost::asio::steady_timer kick_;
  std::string worker_;
  std::string description_;
  run_report report_;
  std::unordered_map<std::string, std::shared_ptr<job_slot>> slots_;
  /// Jobs claimed ahead, in claim order; the book counts them.
  std::deque<ready_job> ready_;
  /// An error that ends the run (not transient).
  op_status fatal_;
  bool leaving_ = false;
  bool reregistering_ = false;
  std::uint64_t wake_listener_ = 0;
  subscription aborts_;
  /// Asks for the graceful stop when run_options::stop is requested.
  std::optional<std::stop_callback<std::function<void()>>> on_stop_;
  /// Hand-off: the runner's channel, with the subscriber's connection
  /// events, and its fence.
  taker_channel takes_;
  /// Claims being failed (fail_op in flight): reconcile() must not give
  /// them back.
  std::unordered_map<std::string, std::int64_t> failing_;
  /// The pause before a check whose fence did not come is tried again.
  boost::asio::steady_timer* reconcile_retry_ = nullptr;
  boost::asio::steady_timer* heartbeat_timer_ = nullptr;
  /// Coroutines of this runner still running (rounds, fails, releases,
  /// re-registration, heartbeats): the run completes only when none is,
  /// so none outlives the operation (the client must outlive only that).
  int ops_ = 0;
};

}  // namespace thoonk::detail
