// job_queue::run: the worker runner (docs/jobs.md "Workers and the
// runner"). Its decisions are runner_book's (no I/O, unit-tested); this is
// the I/O around them, all on the client's executor except the handlers:
//
//  * the main loop asks the book for rounds and sends each as one
//    jobs/work.lua call (finish what is done, claim for idle slots);
//  * a heartbeat loop renews the registration and every lease in one
//    jobs/worker_heartbeat.lua call and cancels the handlers of lost claims;
//  * wake-ups (the queue's channel), aborts (`job.abort:[name]`), signals
//    and the operation's own cancellation become book events;
//  * jobs handed off by puts arrive on the runner's own channel
//    (`job.take:[name]:worker`); after the subscriber reconnects, a fence
//    on that channel tells which hand-offs were missed (reconcile());
//  * each handler runs on a strand of the handler executor, where its
//    cancellation signal is emitted too (a cancellation signal is not
//    thread-safe).
#include <thoonk/job_queue.hpp>

#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "detail/uuid.hpp"
#include "jobs/hand_off.hpp"
#include "jobs/job_queue_impl.hpp"
#include "jobs/runner_book.hpp"
#include "jobs/taker_channel.hpp"
#include "jobs/time_limits.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/strand.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <deque>
#include <unordered_map>

namespace thoonk {
namespace detail {

namespace asio = boost::asio;
using jobs::as_int;
using jobs::is_transient;
using jobs::runner_book;

class runner;

/// One job in a handler: job_context's state. `cancelled` is read from any
/// thread; `signal` is used on `strand` only; the rest on the client's
/// executor.
class job_slot : public std::enable_shared_from_this<job_slot> {
 public:
  job_slot(claimed_job j, asio::strand<asio::any_io_executor> s, std::weak_ptr<runner> r)
      : job(std::move(j)), strand(std::move(s)), owner(std::move(r)) {}

  claimed_job job;
  asio::strand<asio::any_io_executor> strand;
  std::weak_ptr<runner> owner;
  runner_book::clock::time_point started = runner_book::clock::now();
  std::atomic<bool> cancelled{false};
  asio::cancellation_signal signal;
  /// The cancellation was asked for without knowing that the claim ended
  /// (an abort message names the id, not the token; the stop deadline):
  /// when the handler ends, the claim is given back if it is still ours.
  bool release_if_held = false;

  /// On the client's executor. Idempotent.
  void cancel(bool unsure) {
    if (unsure) release_if_held = true;
    if (cancelled.exchange(true)) return;
    asio::post(strand, [self = shared_from_this()]() {
      self->signal.emit(asio::cancellation_type::terminal);
    });
  }
};

class runner : public std::enable_shared_from_this<runner> {
 public:
  runner(job_queue h, std::shared_ptr<job_queue_impl> q, job_coroutine co, job_function fn,
         run_options o)
      : handle(std::move(h)),
        impl(std::move(q)),
        ex(impl->cl.get_executor()),
        co_handler(std::move(co)),
        fn_handler(std::move(fn)),
        opts(std::move(o)),
        book(book_settings(opts, *impl)),
        kick(ex) {}

  static runner_book::settings book_settings(const run_options& o, const job_queue_impl& q) {
    runner_book::settings s;
    s.concurrency = o.concurrency;
    s.max_claim_batch = jobs::clamp_batch(o.max_claim_batch);
    s.poll_interval = q.opts.poll_interval;
    s.stop_timeout = o.stop_timeout;
    s.prefetch = o.prefetch ? *o.prefetch : std::max<std::size_t>(o.concurrency, 64);
    s.hand_off = o.hand_off;
    return s;
  }

  /// The queue as its users see it (abort subscription, progress).
  job_queue handle;
  std::shared_ptr<job_queue_impl> impl;
  asio::any_io_executor ex;
  job_coroutine co_handler;
  job_function fn_handler;
  run_options opts;
  runner_book book;
  /// The main loop's wait: cancelled to make it look again.
  asio::steady_timer kick;
  std::string worker;
  std::string description;
  run_report report;
  std::unordered_map<std::string, std::shared_ptr<job_slot>> slots;
  /// A job claimed ahead (runner_book::prefetching), since when it waits.
  struct ready_job {
    claimed_job job;
    runner_book::time_point since;
  };
  /// Jobs claimed ahead, in claim order; the book counts them.
  std::deque<ready_job> ready;
  /// An error that ends the run (not transient).
  op_status fatal;
  bool leaving = false;
  bool reregistering = false;
  bool cancelled_at_deadline = false;
  std::uint64_t wake_listener = 0;
  subscription aborts;
  /// Asks for the graceful stop when run_options::stop is requested.
  std::optional<std::stop_callback<std::function<void()>>> on_stop;
  /// Hand-off: the runner's channel, with the subscriber's connection
  /// events, and its fence.
  taker_channel takes;
  /// Claims being failed (fail_op in flight): reconcile() must not give
  /// them back.
  std::unordered_map<std::string, std::int64_t> failing;
  /// Reconciliation (reconcile()): wanted after a reconnect, one at a time.
  bool reconcile_wanted = false;
  bool reconciling = false;
  /// The pause before a check whose fence did not come is tried again.
  asio::steady_timer* reconcile_retry = nullptr;
  asio::steady_timer* heartbeat_timer = nullptr;
  /// Coroutines of this runner still running (rounds, fails, releases,
  /// re-registration, heartbeats): the run completes only when none is,
  /// so none outlives the operation (the client must outlive only that).
  int ops = 0;

  /// Runs `op` as one of `ops`.
  void spawn(asio::awaitable<void> op) {
    ++ops;
    asio::co_spawn(ex, std::move(op), [self = shared_from_this()](std::exception_ptr) {
      --self->ops;
      self->poke();
    });
  }

  void poke() { kick.cancel(); }

  void request_stop() {
    book.stop(runner_book::clock::now());
    // A stop gives back every claim this worker holds: no reconciliation.
    if (reconcile_wanted && !reconciling) {
      reconcile_wanted = false;
      book.hold_rounds(false);
    }
    // Jobs claimed ahead will not start here: back to the front of the
    // line at once (no failure counted), for other workers.
    give_back_ready(runner_book::time_point::max(), false);
    poke();
  }

  void fail_run(op_status st) {
    if (!fatal) fatal = std::move(st);
    request_stop();
  }

  std::chrono::milliseconds heartbeat_interval() const {
    if (opts.heartbeat_interval.count() > 0) return jobs::timer_capped(opts.heartbeat_interval);
    return jobs::timer_capped(std::max(opts.worker_ttl / 3, std::chrono::milliseconds(1)));
  }

  // ---- handlers ------------------------------------------------------------------

  void start_handler(claimed_job j) {
    auto hex = opts.handler_executor ? *opts.handler_executor : ex;
    auto slot = std::make_shared<job_slot>(std::move(j), asio::make_strand(hex), weak_from_this());
    auto& held = slots[slot->job.id];
    // A job claimed again while an earlier claim of it is still in a
    // handler here: that claim ended (it was released or lapsed), so its
    // handler stops.
    if (held) {
      held->cancel(false);
      ++report.cancelled;
    }
    held = slot;
    ++report.started;
    std::weak_ptr<runner> weak = weak_from_this();
    auto done = [weak, slot](std::exception_ptr e, std::optional<std::string> result) {
      if (auto self = weak.lock()) self->handler_ended(slot, e, std::move(result));
    };
    if (co_handler) {
      asio::co_spawn(slot->strand, co_handler(job_context(slot)),
                     asio::bind_cancellation_slot(slot->signal.slot(),
                                                  asio::bind_executor(ex, std::move(done))));
    } else {
      asio::post(slot->strand, [fn = fn_handler, slot, done = std::move(done), cex = ex]() mutable {
        std::exception_ptr e;
        std::optional<std::string> r;
        try {
          r = fn(job_context(slot));
        } catch (...) {
          e = std::current_exception();
        }
        asio::post(cex, [done = std::move(done), e, r = std::move(r)]() mutable {
          done(e, std::move(r));
        });
      });
    }
  }

  void handler_ended(const std::shared_ptr<job_slot>& slot, std::exception_ptr e,
                     std::optional<std::string> result) {
    if (auto it = slots.find(slot->job.id); it != slots.end() && it->second == slot)
      slots.erase(it);
    claim_ref claim{slot->job.id, slot->job.token};
    const auto ran = runner_book::clock::now() - slot->started;
    if (slot->cancelled) {
      // Its outcome is dropped; give the job back if the claim may still
      // be ours (released later at the stop otherwise).
      book.handler_ended(std::nullopt, ran);
      if (slot->release_if_held && !leaving) release(std::move(claim));
    } else if (!e) {
      book.handler_ended(runner_book::finish{std::move(claim), std::move(result)}, ran);
    } else {
      book.handler_ended(std::nullopt, ran);
      fail(std::move(claim), e);
    }
    start_ready();
    poke();
  }

  /// Starts jobs claimed ahead while the book says a slot is free.
  void start_ready() {
    while (!ready.empty() && book.take_ready()) {
      auto j = std::move(ready.front().job);
      ready.pop_front();
      start_handler(std::move(j));
    }
  }

  /// Removes and returns the job claimed ahead with this id (and token,
  /// when given), if there is one.
  std::optional<claimed_job> drop_ready(const std::string& id, std::optional<std::int64_t> token) {
    auto it = std::find_if(ready.begin(), ready.end(), [&](const ready_job& r) {
      return r.job.id == id && (!token || r.job.token == *token);
    });
    if (it == ready.end()) return std::nullopt;
    auto j = std::move(it->job);
    ready.erase(it);
    book.ready_dropped(1);
    return j;
  }

  /// Gives back the jobs claimed ahead that wait since `before` or
  /// earlier; `waited_too_long`: they sat behind a handler that turned out
  /// long (the heartbeat's check), not a stop.
  void give_back_ready(runner_book::time_point before, bool waited_too_long) {
    if (ready.empty() || leaving) return;
    std::vector<claimed_job> js;
    while (!ready.empty() && ready.front().since <= before) {
      js.push_back(std::move(ready.front().job));
      ready.pop_front();
    }
    if (js.empty()) return;
    if (waited_too_long) book.ready_waited_too_long(js.size());
    else book.ready_dropped(js.size());
    auto op = [](std::shared_ptr<runner> self,
                 std::vector<claimed_job> c) -> asio::awaitable<void> {
      const auto n = co_await job_queue_impl::release(self->impl, std::move(c));
      self->report.released += n;
    };
    spawn(op(shared_from_this(), std::move(js)));
  }

  void fail(claim_ref claim, std::exception_ptr e) {
    std::string what = "handler failed";
    fail_options fo;
    try {
      std::rethrow_exception(e);
    } catch (const permanent_job_error& pe) {
      what = pe.what();
      fo.permanent = true;
    } catch (const std::exception& x) {
      what = x.what();
    } catch (...) {
      what = "handler threw a non-standard exception";
    }
    // The error is kept on the job: bounded like an item.
    const auto cap = impl->cl.get_config().max_item_size;
    if (what.size() > cap) what.resize(cap);
    failing[claim.id] = claim.token;
    spawn(fail_op(shared_from_this(), std::move(claim), std::move(what), fo));
  }

  static asio::awaitable<void> fail_op(std::shared_ptr<runner> self, claim_ref claim,
                                       std::string what, fail_options fo) {
    const claim_ref c = claim;
    auto [st, r] = co_await job_queue_impl::fail_job(self->impl, std::move(claim), std::move(what),
                                                     fo, self->worker);
    if (auto it = self->failing.find(c.id); it != self->failing.end() && it->second == c.token)
      self->failing.erase(it);
    if (!st) {
      (r.outcome == fail_result::outcome_t::dead_lettered ? self->report.dead_lettered
                                                          : self->report.failed)++;
    } else if (st == error::lost_claim || st == error::job_not_found ||
               st == error::job_not_claimed) {
      ++self->report.lost;
    }
    // Other errors: the claim lapses with the lease and maintenance
    // requeues it (a stall counted), as for any worker that went silent.
  }

  void release(claim_ref claim) {
    auto op = [](std::shared_ptr<runner> self, claim_ref c) -> asio::awaitable<void> {
      std::vector<claimed_job> js(1);
      js[0].id = std::move(c.id);
      js[0].token = c.token;
      co_await job_queue_impl::release(self->impl, std::move(js));
    };
    spawn(op(shared_from_this(), std::move(claim)));
  }

  /// Cancels the handler of claim (id, token) if it runs here, or drops
  /// it if it was claimed ahead.
  void lose(const std::string& id, std::int64_t token) {
    if (drop_ready(id, token)) return;
    auto it = slots.find(id);
    if (it == slots.end() || it->second->job.token != token || it->second->cancelled) return;
    it->second->cancel(false);
    ++report.cancelled;
  }

  void cancel_all(bool unsure) {
    for (auto& [id, slot] : slots) {
      if (slot->cancelled) continue;
      slot->cancel(unsure);
      ++report.cancelled;
    }
  }

  // ---- rounds --------------------------------------------------------------------

  static asio::awaitable<void> run_round(std::shared_ptr<runner> self, runner_book::round r) {
    const auto sent = runner_book::clock::now();
    auto& q = *self->impl;
    std::vector<std::string> keys = q.keys;
    std::vector<std::string> args;
    args.reserve(6 + 4 * r.finishes.size());
    args.push_back(unix_ms_string());
    args.push_back(self->worker);
    args.push_back(std::to_string(r.claim));
    args.push_back(q.finish_channel);
    args.push_back(std::to_string(r.offer));
    args.push_back(std::to_string(self->offer_ttl().count()));
    for (const auto& f : r.finishes) {
      args.push_back(f.claim.id);
      args.push_back(std::to_string(f.claim.token));
      if (f.result) {
        keys.push_back(q.names.job_result_key(f.claim.id));
        args.push_back(std::to_string(keys.size()));
        args.push_back(*f.result);
      } else {
        args.push_back("0");
        args.push_back(std::string{});
      }
    }
    auto [st, v] =
        co_await run_script(q.cl, scripts::jobs_work(), std::move(keys), std::move(args));
    const auto now = runner_book::clock::now();
    if (st) {
      if (is_transient(st.ec)) self->book.round_failed(std::move(r), now);
      else {
        self->book.round_failed(runner_book::round{}, now);
        self->fail_run(std::move(st));
      }
      self->poke();
      co_return;
    }
    auto& e = v.elements;
    const std::size_t m = e.size() >= 2 ? static_cast<std::size_t>(as_int(e[1])) : 0;
    if (e.size() < 2 || m != r.finishes.size() || e.size() < 2 + m) {
      self->book.round_failed(runner_book::round{}, now);
      self->fail_run(op_status(error::unexpected_type));
      self->poke();
      co_return;
    }
    for (std::size_t j = 0; j < m; ++j) {
      const auto code = job_queue_impl::claim_status(as_int(e[2 + j], -1));
      if (!code) ++self->report.finished;
      else if (code == error::no_channel_permission) self->fail_run(op_status(code));
      else ++self->report.lost;
    }
    std::optional<std::int64_t> due;
    auto jobs_claimed = job_queue_impl::parse_claims(e, 2 + m, &due);
    std::optional<runner_book::time_point> retry_at;
    if (due && *due > 0) retry_at = now + wait_until_epoch_ms(*due);
    const std::size_t starting =
        self->book.round_done(r.claim, jobs_claimed.size(), retry_at, now, now - sent);
    for (std::size_t i = 0; i < jobs_claimed.size(); ++i) {
      if (i < starting) self->start_handler(std::move(jobs_claimed[i]));
      else self->ready.push_back({std::move(jobs_claimed[i]), now});
    }
    // A stop asked for while this round was in flight: what it brought
    // beyond the slots goes back at once.
    if (self->book.stopping()) self->give_back_ready(runner_book::time_point::max(), false);
    if (as_int(e[0]) != 1) self->lapsed();
    self->poke();
  }

  // ---- hand-off ---------------------------------------------------------------------
  // docs/jobs.md "Hand-off": rounds that find the queue dry offer the idle
  // slots (runner_book::round::offer), and puts claim jobs for them and send
  // them here. A message lost while the subscriber reconnected leaves a
  // claim this runner does not know: after every reconnect, reconcile()
  // finds and gives back such claims.

  /// How long an offer lasts: a dry runner renews it every poll interval,
  /// and one that died stops getting jobs soon after, well before its
  /// registration lapses.
  std::chrono::milliseconds offer_ttl() const {
    return std::min(opts.worker_ttl, jobs::twice_capped(impl->opts.poll_interval));
  }

  /// Subscribes to the runner's channel (at most a second's wait: without
  /// it the runner works by wake-ups and claims alone).
  static asio::awaitable<void> start_taking(std::shared_ptr<runner> self) {
    std::weak_ptr<runner> weak = self;
    // Named, not temporaries in the co_await expression: g++ 12 destroys
    // such temporaries twice.
    std::function<void(const message&)> on_message = [weak](const message& m) {
      if (auto s = weak.lock()) s->taken(m.payload);
    };
    std::function<void(const subscriber_event&)> on_event = [weak](const subscriber_event& ev) {
      auto s = weak.lock();
      if (!s) return;
      if (ev.kind == subscriber_event::disconnected) {
        // Hand-offs sent now are lost: offer no more (the next round
        // withdraws the offer), and check once the channel is back.
        s->book.set_offering(false);
      } else if (ev.kind == subscriber_event::connected) {
        s->want_reconcile();
      }
      s->poke();
    };
    const bool subscribed = co_await self->takes.subscribe(
        *self->impl, self->worker, std::move(on_message), std::move(on_event));
    if (subscribed) self->book.set_offering(true);
  }

  /// A message on the runner's channel: jobs handed off, or a fence.
  void taken(std::string_view payload) {
    if (takes.seen_fence(payload)) return;
    // Leaving: the stop gives back every claim recorded under this worker.
    if (leaving) return;
    auto js = jobs::parse_hand_off(payload);
    if (!js) {
      // Claims were made for this worker that it cannot read.
      want_reconcile();
      return;
    }
    report.handed_off += js->size();
    const std::size_t starting = book.handed_off(js->size());
    const auto now = runner_book::clock::now();
    for (std::size_t i = 0; i < js->size(); ++i) {
      if (i < starting) start_handler(std::move((*js)[i]));
      else ready.push_back({std::move((*js)[i]), now});
    }
    if (book.stopping()) give_back_ready(runner_book::time_point::max(), false);
    poke();
  }

  void want_reconcile() {
    if (!takes.active() || leaving || book.stopping()) return;
    reconcile_wanted = true;
    book.hold_rounds(true);
    poke();
  }

  /// Gives back the claims recorded under this worker that it does not
  /// know. Runs with rounds held and none in flight, so every claim a round
  /// made is known; a fence on the runner's channel, sent after its offer
  /// was withdrawn, says when every hand-off sent before has arrived. If
  /// the fence does not come (the subscriber is down again), the next
  /// reconnect tries again; the claims of lost messages lapse with their
  /// leases meanwhile.
  static asio::awaitable<void> reconcile(std::shared_ptr<runner> self) {
    self->reconciling = true;
    self->reconcile_wanted = false;
    self->book.set_offering(false);
    auto [st, came] = co_await self->takes.fence(*self->impl, !self->leaving);
    const bool fence_lost = !st && !came;
    if (!st && came && !self->leaving) {
      std::vector<std::string> known{self->worker, self->impl->wake_channel, "0"};
      for (auto& c : self->held_claims()) known.push_back(std::move(c));
      for (const auto& [id, token] : self->failing) {
        known.push_back(id);
        known.push_back(std::to_string(token));
      }
      auto [rst, back] = co_await self->impl->call(scripts::jobs_reconcile(), std::move(known));
      if (!rst) {
        self->report.released += static_cast<std::uint64_t>(as_int(back));
        self->book.set_offering(true);
      } else if (is_transient(rst.ec)) {
        st = std::move(rst);  // try again after a pause, as below
      }
    }
    if (st && is_transient(st.ec) && !self->leaving) {
      asio::steady_timer pause(self->ex, self->impl->opts.poll_interval);
      co_await pause.async_wait(use_nothrow);
      self->reconcile_wanted = !self->leaving && !self->book.stopping();
    }
    // Other errors (the user may not PUBLISH on its own channel): no
    // hand-off for this run.
    self->reconciling = false;
    if (!self->reconcile_wanted) self->book.hold_rounds(false);
    self->poke();
    if (fence_lost && !self->leaving) {
      // The fence did not come while the subscriber is up again (its
      // connection was lost once more, or the fence was): the rounds go on
      // meanwhile, and the check is tried again after a poll interval, so
      // offering does not stay off until another reconnect.
      asio::steady_timer later(self->ex, self->impl->opts.poll_interval);
      self->reconcile_retry = &later;
      co_await later.async_wait(use_nothrow);
      self->reconcile_retry = nullptr;
      if (self->impl->cl.sub().is_connected()) self->want_reconcile();
    }
  }

  // ---- registration and heartbeats -----------------------------------------------

  asio::awaitable<op_status> register_worker() {
    std::vector<std::string> args{worker, std::to_string(opts.worker_ttl.count()), description,
                                  impl->wake_channel};
    auto [st, v] =
        co_await impl->call_with_dlq(scripts::jobs_register_worker(), std::move(args), {});
    if (!st) ++report.registrations;
    co_return st;
  }

  /// The registration lapsed (a heartbeat or round said so): every claim
  /// this worker held is being returned, so its handlers stop; then it
  /// registers again (which also fails the lapsed registration, if nobody
  /// did yet).
  void lapsed() {
    book.registration_lapsed();
    cancel_all(false);
    // The server gave back every claim of the lapsed registration, those
    // claimed ahead too.
    book.ready_dropped(ready.size());
    ready.clear();
    if (reregistering || leaving) return;
    reregistering = true;
    auto op = [](std::shared_ptr<runner> self) -> asio::awaitable<void> {
      for (;;) {
        if (self->leaving || self->book.stopping()) break;
        auto st = co_await self->register_worker();
        if (!st) {
          self->book.registered();
          break;
        }
        if (!is_transient(st.ec)) {
          self->fail_run(std::move(st));
          break;
        }
        asio::steady_timer t(self->ex, self->impl->opts.poll_interval);
        co_await t.async_wait(use_nothrow);
      }
      self->reregistering = false;
    };
    spawn(op(shared_from_this()));
  }

  /// The claims this worker holds, as id, token pairs.
  std::vector<std::string> held_claims() const {
    std::vector<std::string> out;
    out.reserve(2 * (slots.size() + ready.size() + book.pending_finishes()));
    for (const auto& [id, slot] : slots) {
      if (slot->cancelled) continue;
      out.push_back(id);
      out.push_back(std::to_string(slot->job.token));
    }
    for (const auto& r : ready) {
      out.push_back(r.job.id);
      out.push_back(std::to_string(r.job.token));
    }
    book.for_each_pending([&](const claim_ref& c) {
      out.push_back(c.id);
      out.push_back(std::to_string(c.token));
    });
    return out;
  }

  static asio::awaitable<void> heartbeats(std::shared_ptr<runner> self) {
    asio::steady_timer t(self->ex);
    self->heartbeat_timer = &t;
    while (!self->leaving) {
      t.expires_after(self->heartbeat_interval());
      co_await t.async_wait(use_nothrow);
      if (self->leaving) break;
      if (self->reregistering) continue;
      // Jobs claimed ahead that waited a whole interval sit behind handlers
      // that turned out long: back to the line, for idle workers.
      self->give_back_ready(runner_book::clock::now() - self->heartbeat_interval(), true);
      std::vector<std::string> args{self->worker, std::to_string(self->opts.worker_ttl.count()),
                                    unix_ms_string(), self->impl->wake_channel};
      // The claims to renew, named by the worker (the server's records are
      // indexed by job, not by worker): those its handlers hold and those
      // whose finish waits for the next round.
      std::vector<std::string> held = self->held_claims();
      auto [st, v] = co_await self->impl->call_with_dlq(scripts::jobs_worker_heartbeat(),
                                                        std::move(args), std::move(held));
      if (self->leaving) break;
      if (st) {
        if (!is_transient(st.ec)) self->fail_run(std::move(st));
        continue;
      }
      auto& e = v.elements;
      if (!e.empty() && e[0].str == "lapsed") {
        self->lapsed();
        continue;
      }
      for (std::size_t i = 2; i + 1 < e.size(); i += 2) self->lose(e[i].str, as_int(e[i + 1]));
    }
    self->heartbeat_timer = nullptr;
  }

  // ---- the run --------------------------------------------------------------------

  std::string make_description() const {
    boost::json::object o;
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    o["host"] = host;
    o["pid"] = static_cast<std::int64_t>(::getpid());
    o["queue"] = impl->names.name();
    o["concurrency"] = static_cast<std::int64_t>(opts.concurrency);
    o["ttl_ms"] = static_cast<std::int64_t>(opts.worker_ttl.count());
    o["started_ms"] = unix_ms();
    return boost::json::serialize(o);
  }

  std::string default_name() const {
    char host[256] = {};
    if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
    return std::string(host) + ":" + std::to_string(::getpid()) + ":" + make_uuid().substr(0, 8);
  }

  op_status check_options() const {
    if (opts.concurrency < 1 || opts.concurrency > 10000 ||
        opts.worker_ttl < std::chrono::milliseconds(100) || !jobs::time_in_range(opts.worker_ttl) ||
        opts.heartbeat_interval.count() < 0 || opts.heartbeat_interval >= opts.worker_ttl ||
        opts.stop_timeout.count() < 0 || opts.max_claim_batch < 1 || opts.max_claim_batch > 1000 ||
        (opts.prefetch && *opts.prefetch > 10000) || (!co_handler && !fn_handler))
      return error::invalid_argument;
    if (!opts.worker_name.empty())
      if (auto ec = validate_worker_name(impl->cl.get_config(), opts.worker_name)) return ec;
    return {};
  }

  static asio::awaitable<op_result<run_report>> run(std::shared_ptr<runner> self) {
    if (self->impl->name_ec) co_return std::tuple{op_status(self->impl->name_ec), run_report{}};
    if (auto st = self->check_options()) co_return std::tuple{std::move(st), run_report{}};
    self->worker = self->opts.worker_name.empty() ? self->default_name() : self->opts.worker_name;
    self->report.worker_name = self->worker;
    self->description = self->make_description();

    // Wake-ups first (a put after this is seen), then the registration.
    co_await self->impl->ensure_wake(std::chrono::milliseconds(1000));
    {
      auto st = co_await self->register_worker();
      if (st) co_return std::tuple{std::move(st), std::move(self->report)};
    }
    std::weak_ptr<runner> weak = self;
    self->wake_listener = self->impl->add_wake_listener([weak]() {
      if (auto s = weak.lock()) {
        s->book.woken();
        s->poke();
      }
    });
    {
      // Aborts from any client stop the job's handler at once; without the
      // subscription (refused, or the subscriber is down) the heartbeat
      // still finds the lost claim.
      auto cb = [weak](const std::string& id) {
        auto s = weak.lock();
        if (!s) return;
        // Claimed ahead: it does not start; given back in case the abort
        // found it queued, not claimed (then the release is refused).
        if (auto j = s->drop_ready(id, std::nullopt)) {
          s->release(claim_ref(std::move(j->id), j->token));
          return;
        }
        auto it = s->slots.find(id);
        if (it == s->slots.end() || it->second->cancelled) return;
        it->second->cancel(true);
        ++s->report.cancelled;
      };
      asio::steady_timer limit(self->ex, std::chrono::seconds(1));
      using namespace asio::experimental::awaitable_operators;
      auto r = co_await (self->handle.async_subscribe_aborts(std::move(cb), use_nothrow) ||
                         limit.async_wait(use_nothrow));
      if (r.index() == 0) self->aborts = std::move(std::get<1>(std::get<0>(r)));
    }
    if (self->opts.stop.stop_possible()) {
      // Requested from any thread (or already): the stop runs on the
      // runner's executor.
      self->on_stop.emplace(self->opts.stop, std::function<void()>([weak, ex = self->ex]() {
                              asio::post(ex, [weak]() {
                                if (auto s = weak.lock()) s->request_stop();
                              });
                            }));
    }
    self->spawn(heartbeats(self));
    if (self->opts.hand_off) co_await start_taking(self);

    self->book.woken();  // the first round claims at once
    for (;;) {
      auto now = runner_book::clock::now();
      if (self->book.ready_to_leave(now)) break;
      if (self->fatal &&
          (self->fatal == error::client_stopped || self->fatal == asio::error::operation_aborted))
        break;  // nothing more can be sent
      if (self->book.stopping() && !self->cancelled_at_deadline &&
          now >= self->book.stop_deadline() && self->book.busy() > 0) {
        self->cancelled_at_deadline = true;
        self->cancel_all(true);
      }
      if (self->reconcile_wanted && !self->reconciling && self->book.rounds_in_flight() == 0)
        self->spawn(reconcile(self));
      while (auto r = self->book.next_round(now)) self->spawn(run_round(self, std::move(*r)));
      const auto at = self->book.next_timer();
      self->kick.expires_at(at == runner_book::time_point::max() ? runner_book::time_point::max()
                                                                 : std::max(at, now));
      co_await self->kick.async_wait(use_nothrow);
    }

    // Leave: nothing more is claimed; what is still held goes back to the
    // front of the line (no failure counted) and the registration goes.
    self->leaving = true;
    self->cancel_all(true);
    self->impl->remove_wake_listener(self->wake_listener);
    self->aborts.reset();
    self->takes.stop();
    if (self->reconcile_retry) self->reconcile_retry->cancel();
    if (self->heartbeat_timer) self->heartbeat_timer->cancel();
    self->on_stop.reset();
    // Rounds, fails and releases in flight end first (their outcome counts,
    // and a release must not follow the stop), and so does the heartbeat.
    while (self->ops > 0) {
      self->kick.expires_at(runner_book::time_point::max());
      co_await self->kick.async_wait(use_nothrow);
    }
    if (!(self->fatal == error::client_stopped)) {
      std::vector<std::string> args{self->worker, self->impl->wake_channel};
      auto [st, v] = co_await self->impl->call(scripts::jobs_stop_worker(), std::move(args));
      if (!st) self->report.released += static_cast<std::uint64_t>(as_int(v));
      else if (!self->fatal) self->fatal = std::move(st);
    }
    co_return std::tuple{std::move(self->fatal), std::move(self->report)};
  }
};

}  // namespace detail

// ---- job_context ------------------------------------------------------------------

job_context::job_context(std::shared_ptr<detail::job_slot> slot) noexcept
    : slot_(std::move(slot)) {}

const claimed_job& job_context::job() const noexcept { return slot_->job; }

bool job_context::cancelled() const noexcept { return slot_->cancelled.load(); }

void job_context::progress(std::string text) const {
  auto r = slot_->owner.lock();
  if (!r) return;
  // On the client's executor, whatever thread the handler runs on.
  boost::asio::post(r->ex, [r, claim = claim_ref(slot_->job.id, slot_->job.token),
                            text = std::move(text)]() mutable {
    r->handle.async_progress(claim, std::move(text), [r](boost::system::error_code ec) {
      if (ec) ++r->report.progress_refused;
    });
  });
}

// ---- job_queue::run ------------------------------------------------------------------

void job_queue::start_run(job_coroutine co, job_function fn, run_options opts,
                          handler<run_report> h) {
  namespace asio = boost::asio;
  auto r = std::make_shared<detail::runner>(*this, detail::shared_impl(core_), std::move(co),
                                            std::move(fn), std::move(opts));
  // Any cancellation of the operation asks for the graceful stop; the run
  // then completes normally. The slot is cleared before completion.
  auto slot = asio::get_associated_cancellation_slot(h.handler);
  if (slot.is_connected()) {
    std::weak_ptr<detail::runner> weak = r;
    auto ex = client_->get_executor();
    slot.assign([weak, ex](asio::cancellation_type) {
      asio::post(ex, [weak]() {
        if (auto s = weak.lock()) s->request_stop();
      });
    });
  }
  auto done = [slot, h = std::move(h), ex = client_->get_executor()](
                  std::exception_ptr e, detail::op_result<run_report> res) mutable {
    auto s = slot;
    if (s.is_connected()) s.clear();
    if (e) std::get<0>(res) = detail::op_status(detail::exception_to_code(e));
    auto& [st, rep] = res;
    detail::complete_op(std::move(h), ex, std::move(st), std::move(rep));
  };
  asio::co_spawn(client_->get_executor(), detail::runner::run(r), std::move(done));
}

}  // namespace thoonk
