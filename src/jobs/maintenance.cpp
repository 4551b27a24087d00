// Job queue maintenance (the contract's "Maintenance", done properly):
// lapsed claims, jobs in no state (two-pass), orphaned extension state,
// stats published to a feed. Every server step is one bounded script. The
// handle's maintain and run_maintenance are at the end.
#include "jobs/job_queue_impl.hpp"
#include "jobs/time_limits.hpp"
#include "thoonk_lua_scripts.hpp"

#include "connection/router.hpp"
#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "detail/uuid.hpp"

#include <thoonk/feed.hpp>

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <functional>
#include <unordered_set>

namespace thoonk::detail {

namespace asio = boost::asio;
using namespace jobs;  // NOLINT

namespace {

// Releases the lock if it is still ours. Never waits for a reconnect and
// never longer than lock_ttl (by then the lock has expired anyway): if the
// release fails, the lock's TTL is the fallback.
asio::awaitable<void> unlock(std::shared_ptr<job_queue_impl> self, std::string owner,
                             std::chrono::milliseconds lock_ttl) {
  std::vector<std::string_view> keys{self->lock_key};
  std::vector<std::string_view> args{owner};
  exec_options eo;
  eo.wait_for_connection = false;
  eo.timeout = timer_capped(std::max(lock_ttl, std::chrono::milliseconds(1)));
  co_await eval_script(self->cl, scripts::maintenance_unlock(), keys, args, eo);
}

std::string stats_json(const std::string& queue, std::int64_t now, const maintenance_report& r) {
  boost::json::object o;
  o["queue"] = queue;
  o["time_ms"] = now;
  // The queue's counts.
  o["waiting"] = r.counts.waiting;
  o["claimed"] = r.counts.claimed;
  o["stalled"] = r.counts.stalled;
  o["jobs"] = r.counts.items;
  o["puts"] = r.counts.puts;
  o["finishes"] = r.counts.finishes;
  o["scheduled"] = r.counts.scheduled;
  o["held"] = r.counts.held;
  // What this run did.
  o["lapsed_requeued"] = r.requeued;
  o["lapsed_stalled"] = r.stalled;
  o["unaccounted_requeued"] = r.unaccounted_requeued;
  o["unaccounted_suspects"] = r.unaccounted_suspects;
  o["orphans_removed"] = r.orphans_removed;
  o["promoted"] = r.promoted;
  o["held_released"] = r.held_released;
  o["dead_workers"] = r.dead_workers;
  o["worker_jobs_requeued"] = r.worker_jobs_requeued;
  o["worker_jobs_stalled"] = r.worker_jobs_stalled;
  return boost::json::serialize(o);
}

// A cursor scan's arguments for one call, from the cursor.
using scan_args = std::function<std::vector<std::string>(const std::string& cursor)>;

// Runs a cursor scan whose replies are the next cursor and a count, to its
// end, adding the counts to `total`.
asio::awaitable<op_status> count_scan(job_queue_impl& self, const script& s,
                                      const scan_args& args_for, std::int64_t& total) {
  std::string cursor = "0";
  do {
    auto [ec, v] = co_await self.call(s, args_for(cursor));
    if (ec) co_return ec;
    if (v.elements.size() < 2) co_return op_status(error::unexpected_type);
    cursor = std::move(v.elements[0].str);
    total += as_int(v.elements[1]);
  } while (cursor != "0");
  co_return op_status{};
}

// Publishes `item` to the stats feed, creating the feed when missing.
asio::awaitable<error_code> publish_stats(detail::client_core& c, std::string name,
                                          std::size_t max_length, std::string item) {
  if (auto ec = validate_name(c.get_config(), name)) co_return ec;
  auto [st, r] = co_await publish_item(c, name, item);
  if (st.ec != error::feed_not_found) co_return st.ec;
  feed_config cfg;
  cfg.emplace_back("max_length", std::to_string(max_length));
  auto [cst, created] = co_await create_or_open_feed(c, name, feed_type::feed, std::move(cfg));
  if (cst) co_return cst.ec;
  auto [st2, r2] = co_await publish_item(c, std::move(name), std::move(item));
  co_return st2.ec;
}

}  // namespace

namespace {
asio::awaitable<op_result<maintenance_report>> maintain_locked(std::shared_ptr<job_queue_impl> self,
                                                               maintenance_options opts);
}  // namespace

asio::awaitable<op_result<maintenance_report>> job_queue_impl::maintain(
    std::shared_ptr<job_queue_impl> self, maintenance_options opts) {
  maintenance_report rep;
  if (self->name_ec) co_return std::tuple{self->name_ec, rep};
  // The lock's PX: a time the server adds to its clock (and a timeout here).
  if (!jobs::time_in_range(opts.lock_ttl)) co_return std::tuple{error::invalid_argument, rep};

  // One runner per queue: SET NX PX; released below, before this run
  // completes, whatever happens (if this process dies, or the release
  // fails, the lock expires after lock_ttl).
  const std::string owner = self->cl.instance_id() + ":" + make_uuid();
  const auto lock_ttl = opts.lock_ttl;
  {
    request req;
    req.push("SET", self->lock_key, owner, "NX", "PX",
             std::max<std::int64_t>(1, opts.lock_ttl.count()));
    // Not cancellable: a SET already written would still take the lock on
    // the server, with nobody left to release it. Bounded by lock_ttl.
    exec_options eo;
    eo.timeout = timer_capped(std::max(lock_ttl, std::chrono::milliseconds(1)));
    auto set_op = router_of(self->cl).exec(req, self->lock_key, eo);
    auto [ep, set_result] = co_await asio::co_spawn(
        self->cl.get_executor(), std::move(set_op),
        asio::bind_cancellation_slot(asio::cancellation_slot(), use_nothrow));
    auto [ec, resp] = std::move(set_result);
    if (ep) ec = exception_to_code(ep);
    if (ec) {
      // The SET may have run (unknown outcome, timeout): release what may
      // be ours; the unlock deletes the lock only if it holds our owner.
      co_await asio::co_spawn(self->cl.get_executor(), unlock(self, owner, lock_ttl),
                              asio::bind_cancellation_slot(asio::cancellation_slot(), use_nothrow));
      co_return std::tuple{ec, rep};
    }
    if (resp[0].is_error()) co_return std::tuple{reply_status(resp[0]), rep};
    if (resp[0].is_null()) co_return std::tuple{op_status{}, rep};  // someone else runs it
  }
  op_status ec;
  try {
    std::tie(ec, rep) = co_await maintain_locked(self, std::move(opts));
  } catch (const boost::system::system_error& e) {
    ec = e.code();  // cancelled: the next co_await threw
  }
  rep.ran = true;
  // Release the lock before completing, so that a process that runs one
  // maintenance and exits (a cron job) leaves the queue free for the next
  // runner. Also when this run was cancelled: the release runs in its own
  // coroutine, out of reach of the caller's cancellation (it is bounded by
  // unlock's options), and a cancellation arriving meanwhile stays pending
  // for the caller (run_maintenance's loop sees it at its next step).
  const bool throw_before = co_await asio::this_coro::throw_if_cancelled();
  co_await asio::this_coro::throw_if_cancelled(false);
  co_await asio::co_spawn(self->cl.get_executor(), unlock(self, owner, lock_ttl),
                          asio::bind_cancellation_slot(asio::cancellation_slot(), use_nothrow));
  co_await asio::this_coro::throw_if_cancelled(throw_before);
  co_return std::tuple{ec, rep};
}

namespace {
asio::awaitable<op_result<maintenance_report>> maintain_locked(std::shared_ptr<job_queue_impl> self,
                                                               maintenance_options opts) {
  maintenance_report rep;
  const std::size_t batch = clamp_batch(opts.batch);
  const std::string batch_s = std::to_string(batch);
  // One step of a cursor scan (the scan and orphans scripts take the cursor
  // and the batch size, and reply with the next cursor first).
  auto scan_step = [&](const script& s, const std::string& cursor) {
    std::vector<std::string> args{cursor, batch_s};
    return self->call(s, std::move(args));
  };

  // ---- 1. lapsed claims -----------------------------------------------------
  // First: on a cluster, a dead-letter queue of another slot makes this
  // step's first call refuse (error::cluster_cross_slot) before anything
  // changes, so the pass stops before any other step has written.
  for (;;) {
    std::vector<std::string> args;
    args.push_back(unix_ms_string());
    args.push_back(batch_s);
    args.push_back(self->wake_channel);
    auto [ec, v] = co_await self->call_with_dlq(scripts::maintenance_expire(), std::move(args), {});
    if (ec) co_return std::tuple{ec, rep};
    if (v.elements.size() < 3) co_return std::tuple{op_status(error::unexpected_type), rep};
    rep.requeued += as_int(v.elements[0]);
    rep.stalled += as_int(v.elements[1]);
    if (static_cast<std::size_t>(as_int(v.elements[2])) < batch) break;
  }

  // ---- 2. due scheduled jobs ------------------------------------------------
  // Promotion moves each job between four structures, about 5 us a job on
  // a queue of 100,000: at most 100 per call keeps every call near half a
  // millisecond (250 measured up to 2.8 ms, 500 up to 5 ms).
  const std::size_t promote_batch = std::min<std::size_t>(batch, 100);
  for (;;) {
    std::vector<std::string> args{unix_ms_string(), std::to_string(promote_batch),
                                  self->wake_channel};
    auto [ec, v] = co_await self->call(scripts::maintenance_promote(), std::move(args));
    if (ec) co_return std::tuple{ec, rep};
    const auto n = as_int(v);
    rep.promoted += n;
    if (static_cast<std::size_t>(n) < promote_batch) break;
  }

  // ---- 2b. workers whose registration lapsed (worker liveness) ---------------
  for (;;) {
    auto [ec, r] = co_await job_queue_impl::fail_workers(self, std::string{}, batch);
    if (ec) co_return std::tuple{ec, rep};
    rep.dead_workers += r.workers;
    rep.worker_jobs_requeued += r.requeued;
    rep.worker_jobs_stalled += r.dead_lettered;
    if (static_cast<std::size_t>(r.workers) < batch) break;
  }

  // ---- 3. held puts whose claim ended without this library ---------------------
  {
    const scan_args held_args = [&](const std::string& cursor) {
      return std::vector<std::string>{unix_ms_string(), cursor, batch_s, self->wake_channel};
    };
    auto ec = co_await count_scan(*self, scripts::maintenance_held(), held_args, rep.held_released);
    if (ec) co_return std::tuple{ec, rep};
  }

  // ---- 4. jobs in no state (two-pass) ---------------------------------------
  if (opts.check_unaccounted) {
    // a) the waiting ids, read in chunks. Not atomic with (b): a job put
    //    after its position was read looks unaccounted in this pass, but it
    //    will be in feed.ids (or claimed, or gone) on the next one, and only
    //    ids suspect on both passes are rechecked atomically.
    std::unordered_set<std::string> waiting;
    for (std::int64_t start = 0;; start += 1000) {
      request req;
      req.push("LRANGE", self->key(job_keys::ids), start, start + 999);
      auto [ec, resp] = co_await exec_co(self->cl, req, self->key(job_keys::ids));
      if (ec) co_return std::tuple{ec, rep};
      if (resp[0].is_error()) co_return std::tuple{reply_status(resp[0]), rep};
      for (auto& e : resp[0].elements) waiting.insert(std::move(e.str));
      if (resp[0].elements.size() < 1000) break;
    }
    // b) every job that is neither claimed nor stalled (HSCAN in steps).
    std::vector<std::string> suspects;
    std::string cursor = "0";
    do {
      auto [ec, v] = co_await scan_step(scripts::maintenance_scan(), cursor);
      if (ec) co_return std::tuple{ec, rep};
      if (v.elements.empty()) co_return std::tuple{op_status(error::unexpected_type), rep};
      cursor = std::move(v.elements[0].str);
      for (std::size_t i = 1; i < v.elements.size(); ++i)
        if (!waiting.count(v.elements[i].str)) suspects.push_back(std::move(v.elements[i].str));
    } while (cursor != "0");
    std::sort(suspects.begin(), suspects.end());
    suspects.erase(std::unique(suspects.begin(), suspects.end()), suspects.end());

    // c) suspects of the previous pass that are still in no state: requeue.
    std::unordered_set<std::string> requeued;
    for (std::size_t i = 0; i < suspects.size(); i += batch) {
      std::vector<std::string> args;
      args.push_back(self->wake_channel);
      for (std::size_t j = i; j < std::min(suspects.size(), i + batch); ++j)
        args.push_back(suspects[j]);
      auto [ec, v] =
          co_await self->call(scripts::maintenance_requeue_unaccounted(), std::move(args));
      if (ec) co_return std::tuple{ec, rep};
      for (auto& e : v.elements) requeued.insert(std::move(e.str));
    }
    rep.unaccounted_requeued = static_cast<std::int64_t>(requeued.size());
    std::erase_if(suspects, [&](const std::string& s) { return requeued.count(s) > 0; });
    // d) the rest are this pass's suspects.
    std::size_t i = 0;
    do {
      std::vector<std::string> args;
      args.push_back(i == 0 ? "1" : "0");
      for (std::size_t j = i; j < std::min(suspects.size(), i + batch); ++j)
        args.push_back(suspects[j]);
      auto [ec, v] = co_await self->call(scripts::maintenance_store_suspects(), std::move(args));
      if (ec) co_return std::tuple{ec, rep};
      i += batch;
    } while (i < suspects.size());
    rep.unaccounted_suspects = static_cast<std::int64_t>(suspects.size());

    // e) tokens and job records of jobs that vanished (finished or
    //    retracted with plain commands).
    for (const char* hash : {"attempts", "jobmeta"}) {
      const scan_args orphan_args = [&](const std::string& cursor) {
        return std::vector<std::string>{cursor, batch_s, hash};
      };
      auto ec = co_await count_scan(*self, scripts::maintenance_orphans(), orphan_args,
                                    rep.orphans_removed);
      if (ec) co_return std::tuple{ec, rep};
    }
  }

  // ---- 5. counts and stats ----------------------------------------------------
  {
    std::vector<std::string> args{"counts"};
    auto [ec, v] = co_await self->call(scripts::jobs_read(), std::move(args));
    if (ec) co_return std::tuple{ec, rep};
    parse_counts(v, rep.counts);  // a shorter reply leaves the counts at 0
  }
  if (opts.publish_stats) {
    std::string name = opts.stats_feed.empty() ? self->names.name() + ".stats" : opts.stats_feed;
    auto item = stats_json(self->names.name(), unix_ms(), rep);
    auto ec =
        co_await publish_stats(self->cl, std::move(name), opts.stats_max_length, std::move(item));
    // A stats feed that cannot be written does not fail the maintenance.
    rep.stats_published = !ec;
  }
  co_return std::tuple{op_status{}, rep};
}
}  // namespace

asio::awaitable<op_result<>> job_queue_impl::run_maintenance(std::shared_ptr<job_queue_impl> self,
                                                             std::chrono::milliseconds interval,
                                                             maintenance_options opts) {
  auto p = std::make_shared<pending<std::string>>(self->cl.get_executor());
  self->track(p);
  for (;;) {
    if (self->closed || p->done) co_return std::tuple{op_status(asio::error::operation_aborted)};
    auto [ec, rep] = co_await maintain(self, opts);
    if (ec == error::feed_not_found || ec == error::wrong_feed_type || ec == error::invalid_name ||
        ec == error::client_stopped)
      co_return std::tuple{std::move(ec)};
    if (self->closed || p->done) co_return std::tuple{op_status(asio::error::operation_aborted)};
    p->timer.expires_after(std::max(interval, std::chrono::milliseconds(1)));
    auto [wec] = co_await p->timer.async_wait(use_nothrow);
    if (wec) co_return std::tuple{op_status(asio::error::operation_aborted)};
  }
}

}  // namespace thoonk::detail

namespace thoonk {

// ---- the handle's operations --------------------------------------------------

using detail::job_queue_impl;

void job_queue::start_maintain(maintenance_options opts, handler<maintenance_report> h) {
  detail::spawn_op(client_core_,
                   job_queue_impl::maintain(detail::shared_impl(core_), std::move(opts)),
                   std::move(h));
}

void job_queue::start_run_maintenance(std::chrono::milliseconds interval, maintenance_options opts,
                                      handler<> h) {
  detail::spawn_op(
      client_core_->get_executor(),
      job_queue_impl::run_maintenance(detail::shared_impl(core_), interval, std::move(opts)),
      std::move(h));
}

}  // namespace thoonk
