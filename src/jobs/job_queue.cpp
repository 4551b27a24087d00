// thoonk::job_queue: contract 002 "Job" with atomic batched claims, claim
// tokens, batched finishes, durable results (contract 001 "Get Result").
#include <thoonk/job_queue.hpp>

#include "detail/spawn.hpp"
#include "jobs/job_queue_impl.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

namespace thoonk {
namespace detail {

namespace asio = boost::asio;
using namespace jobs;  // NOLINT

job_queue_impl::job_queue_impl(client& c, std::string name, job_queue_options o)
    : cl(c),
      name_ec(validate_name(c.get_config(), name)),
      k(feed_names(c.get_config(), name)),
      opts(o) {}

void job_queue_impl::init() {
  std::weak_ptr<job_queue_impl> weak = weak_from_this();
  auto ex = cl.get_executor();
  claims = std::make_shared<fetcher<claimed_job>>(
      ex, opts.poll_interval, opts.max_claim_batch, opts.max_claims_in_flight,
      [weak](std::size_t n) { return claim_batch(weak.lock(), n); },
      [weak](std::vector<claimed_job> js) { return release(weak.lock(), std::move(js)); },
      [weak]() { return prepare(weak.lock()); },
      fetcher<claimed_job>::prefetch_options{opts.prefetch, opts.prefetch_hold});
  for (int high = 0; high < 2; ++high) {
    puts[high] = std::make_shared<batcher<std::string, std::string>>(
        ex, opts.max_put_batch, opts.max_puts_in_flight,
        [weak, high](std::vector<std::string> items) {
          return put_batch(weak.lock(), high != 0, std::move(items));
        });
  }
  finishes = std::make_shared<batcher<finish_request, error_code>>(
      ex, opts.max_finish_batch, opts.max_finishes_in_flight,
      [weak](std::vector<finish_request> reqs) {
        return finish_batch(weak.lock(), std::move(reqs));
      });
}

void job_queue_impl::close() {
  if (closed) return;
  closed = true;
  const error_code aborted = asio::error::operation_aborted;
  claims->close(aborted);
  for (auto& p : puts) p->close(aborted);
  finishes->close(aborted);
  wake.close();
  for (auto& w : tracked)
    if (auto p = w.lock()) p->complete(aborted, {});
  tracked.clear();
}

void job_queue_impl::track(const std::shared_ptr<pending<std::string>>& p) {
  std::erase_if(tracked, [](const auto& w) { return w.expired(); });
  tracked.push_back(p);
}

asio::awaitable<std::tuple<error_code, resp3::value>> job_queue_impl::call(
    const script& s, std::vector<std::string> args) {
  return run_script(cl, s, k.keys, std::move(args));
}

asio::awaitable<void> job_queue_impl::prepare(std::shared_ptr<job_queue_impl> self) {
  if (!self || self->closed) co_return;
  // Bounded: if the subscriber cannot connect, claims still work (polling).
  co_await self->wake.ensure(self->cl, self->k.wake_channel,
                             std::weak_ptr<fetcher<claimed_job>>(self->claims),
                             std::chrono::milliseconds(1000));
}

asio::awaitable<std::tuple<error_code, std::vector<std::string>>> job_queue_impl::put_batch(
    std::shared_ptr<job_queue_impl> self, bool high, std::vector<std::string> items) {
  if (!self)
    co_return std::tuple{error_code(asio::error::operation_aborted), std::vector<std::string>{}};
  const std::size_t n = items.size();
  std::vector<std::string> args;
  args.reserve(n + 3);
  args.push_back(now_ms_string());
  args.push_back(high ? "1" : "0");
  args.push_back(self->k.wake_channel);
  for (auto& i : items) args.push_back(std::move(i));
  auto [ec, v] = co_await self->call(scripts::jobs_put(), std::move(args));
  if (ec) co_return std::tuple{ec, std::vector<std::string>{}};
  auto ids = as_strings(std::move(v));
  if (ids.size() != n) co_return std::tuple{error_code(error::unexpected_type), std::move(ids)};
  co_return std::tuple{error_code{}, std::move(ids)};
}

asio::awaitable<std::tuple<error_code, std::vector<claimed_job>>> job_queue_impl::claim_batch(
    std::shared_ptr<job_queue_impl> self, std::size_t n) {
  std::vector<claimed_job> out;
  if (!self) co_return std::tuple{error_code(asio::error::operation_aborted), std::move(out)};
  std::vector<std::string> args;
  args.push_back(now_ms_string());
  args.push_back(std::to_string(n));
  auto [ec, v] = co_await self->call(scripts::jobs_claim(), std::move(args));
  if (ec) co_return std::tuple{ec, std::move(out)};
  auto& e = v.elements;
  out.reserve(e.size() / 4);
  for (std::size_t i = 0; i + 3 < e.size(); i += 4) {
    claimed_job j;
    j.id = std::move(e[i].str);
    j.item = std::move(e[i + 1].str);
    j.failures = as_int(e[i + 2]);
    j.token = as_int(e[i + 3]);
    out.push_back(std::move(j));
  }
  co_return std::tuple{error_code{}, std::move(out)};
}

asio::awaitable<void> job_queue_impl::release(std::shared_ptr<job_queue_impl> self,
                                              std::vector<claimed_job> js) {
  if (!self || js.empty()) co_return;
  std::vector<std::string> args;
  args.reserve(1 + 2 * js.size());
  args.push_back(self->k.wake_channel);
  for (auto& j : js) {
    args.push_back(std::move(j.id));
    args.push_back(std::to_string(j.token));
  }
  // If this fails the claims lapse and maintenance requeues them.
  co_await self->call(scripts::jobs_release(), std::move(args));
}

asio::awaitable<std::tuple<error_code, std::vector<error_code>>> job_queue_impl::finish_batch(
    std::shared_ptr<job_queue_impl> self, std::vector<finish_request> reqs) {
  std::vector<error_code> out;
  if (!self) co_return std::tuple{error_code(asio::error::operation_aborted), std::move(out)};
  std::vector<std::string> keys = self->k.keys;
  std::vector<std::string> args;
  args.reserve(1 + 4 * reqs.size());
  args.push_back(self->k.finish_channel);
  for (auto& r : reqs) {
    args.push_back(r.id);
    args.push_back(std::to_string(r.token));
    if (r.result) {
      keys.push_back(self->k.names.job_result_key(r.id));
      args.push_back(std::to_string(keys.size()));
      args.push_back(std::move(*r.result));
    } else {
      args.push_back("0");
      args.push_back(std::string{});
    }
  }
  auto [ec, v] =
      co_await run_script(self->cl, scripts::jobs_finish(), std::move(keys), std::move(args));
  if (ec) co_return std::tuple{ec, std::move(out)};
  co_return std::tuple{error_code{}, claim_statuses(v)};
}

std::vector<error_code> job_queue_impl::claim_statuses(const resp3::value& v) {
  std::vector<error_code> out;
  out.reserve(v.elements.size());
  for (const auto& s : v.elements) {
    switch (as_int(s, -1)) {
      case 0: out.emplace_back(); break;
      case 1: out.emplace_back(error::job_not_found); break;
      case 2: out.emplace_back(error::job_not_claimed); break;
      case 3: out.emplace_back(error::lost_claim); break;
      case 4: out.emplace_back(error::no_channel_permission); break;
      default: out.emplace_back(error::unexpected_type); break;
    }
  }
  return out;
}

asio::awaitable<std::tuple<error_code, std::vector<error_code>>> job_queue_impl::heartbeat_batch(
    std::shared_ptr<job_queue_impl> self, std::vector<claim_ref> claims) {
  std::vector<error_code> out;
  if (self->name_ec) co_return std::tuple{self->name_ec, std::move(out)};
  for (const auto& c : claims)
    if (auto ec = validate_id(self->cl.get_config(), c.id)) co_return std::tuple{ec, std::move(out)};
  // Chunks of at most 1000 claims, each one atomic script call.
  for (std::size_t first = 0; first < claims.size(); first += 1000) {
    const std::size_t last = std::min(claims.size(), first + 1000);
    std::vector<std::string> args;
    args.reserve(1 + 2 * (last - first));
    args.push_back(now_ms_string());
    for (std::size_t i = first; i < last; ++i) {
      args.push_back(std::move(claims[i].id));
      args.push_back(std::to_string(claims[i].token));
    }
    auto [ec, v] = co_await self->call(scripts::jobs_heartbeat(), std::move(args));
    if (ec) co_return std::tuple{ec, std::move(out)};
    auto part = claim_statuses(v);
    if (part.size() != last - first)
      co_return std::tuple{error_code(error::unexpected_type), std::move(out)};
    out.insert(out.end(), part.begin(), part.end());
  }
  co_return std::tuple{error_code{}, std::move(out)};
}

namespace {

// Validation shared by the single-job operations.
error_code check_id(const job_queue_impl& impl, std::string_view id) {
  if (impl.name_ec) return impl.name_ec;
  return validate_id(impl.cl.get_config(), id);
}

}  // namespace

}  // namespace detail

namespace asio = boost::asio;
using boost::system::error_code;
using detail::job_queue_impl;
using namespace detail::jobs;  // NOLINT
namespace scripts = detail::scripts;

job_queue::job_queue(client& c, std::string name, job_queue_options opts)
    : client_(&c), impl_(std::make_shared<job_queue_impl>(c, std::move(name), opts)) {
  impl_->init();
  closer_ = close_when_released(impl_, c.get_executor());
}

job_queue::~job_queue() = default;

const std::string& job_queue::name() const noexcept { return impl_->k.names.name(); }

void job_queue::start_open(handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl) -> asio::awaitable<std::tuple<error_code>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec};
    std::vector<std::string> args{"type"};
    auto [ec, v] = co_await impl->call(scripts::jobs_read(), std::move(args));
    if (ec) co_return std::tuple{ec};
    auto sec = co_await impl->wake.ensure(impl->cl, impl->k.wake_channel,
                                          std::weak_ptr<fetcher<claimed_job>>(impl->claims),
                                          std::chrono::milliseconds::max());
    co_return std::tuple{sec};
  };
  detail::spawn_op(client_->get_executor(), op(impl_), std::move(h));
}

void job_queue::start_put(std::string item, priority p, handler<std::string> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string item,
               priority p) -> asio::awaitable<std::tuple<error_code, std::string>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec, std::string{}};
    if (auto ec = detail::validate_item(impl->cl.get_config(), item))
      co_return std::tuple{ec, std::string{}};
    co_return co_await impl->puts[p == priority::high ? 1 : 0]->submit(std::move(item));
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(item), p), std::move(h));
}

void job_queue::start_put_many(std::vector<std::string> items, priority p,
                               handler<std::vector<std::string>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::vector<std::string> items,
               priority p) -> asio::awaitable<std::tuple<error_code, std::vector<std::string>>> {
    std::vector<std::string> ids;
    if (impl->name_ec) co_return std::tuple{impl->name_ec, std::move(ids)};
    for (const auto& i : items)
      if (auto ec = detail::validate_item(impl->cl.get_config(), i))
        co_return std::tuple{ec, std::move(ids)};
    const bool high = p == priority::high;
    const std::size_t chunk = clamp_batch(impl->opts.max_put_batch);
    const std::size_t nchunks = (items.size() + chunk - 1) / chunk;
    std::vector<std::vector<std::string>> per_chunk(nchunks);
    // High priority: the last chunk goes first, so the first item ends up
    // next out.
    error_code failed;
    for (std::size_t c = 0; c < nchunks && !failed; ++c) {
      std::size_t idx = high ? nchunks - 1 - c : c;
      auto first = items.begin() + static_cast<std::ptrdiff_t>(idx * chunk);
      auto last =
          items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), (idx + 1) * chunk));
      std::vector<std::string> part(std::make_move_iterator(first), std::make_move_iterator(last));
      auto [ec, got] = co_await job_queue_impl::put_batch(impl, high, std::move(part));
      if (ec) failed = ec;
      else per_chunk[idx] = std::move(got);
    }
    for (auto& pc : per_chunk)
      for (auto& id : pc) ids.push_back(std::move(id));
    co_return std::tuple{failed, std::move(ids)};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(items), p), std::move(h));
}

void job_queue::start_claim(std::chrono::milliseconds timeout, handler<claimed_job> h) {
  // No coroutine per claim: the waiter holds h (a job claimed ahead is
  // handed out at once).
  if (impl_->name_ec) {
    detail::post_handler(std::move(h), client_->get_executor(), impl_->name_ec, claimed_job{});
    return;
  }
  impl_->claims->wait(timeout, std::move(h));
}

void job_queue::start_finish(std::string id, std::int64_t claim_token,
                             std::optional<std::string> result, handler<> h) {
  // No coroutine per finish: the request goes straight to the batcher, whose
  // (status) result completes h. Validation fails before any I/O.
  const auto& ex = client_->get_executor();
  auto invalid = detail::check_id(*impl_, id);
  if (!invalid && result) invalid = detail::validate_item(impl_->cl.get_config(), *result);
  if (invalid) {
    detail::post_handler(std::move(h), ex, invalid);
    return;
  }
  detail::finish_request req;
  req.id = std::move(id);
  req.token = claim_token;
  req.result = std::move(result);
  auto slot = asio::get_associated_cancellation_slot(h);
  auto hex = asio::get_associated_executor(h, ex);
  auto done = asio::bind_cancellation_slot(
      slot, asio::bind_executor(hex, [h = std::move(h)](error_code ec, error_code status) mutable {
        std::move(h)(ec ? ec : status);
      }));
  impl_->finishes->submit(std::move(req), std::move(done));
}

void job_queue::start_cancel(std::string id, std::int64_t claim_token, handler<std::int64_t> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string id,
               std::int64_t tok) -> asio::awaitable<std::tuple<error_code, std::int64_t>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{ec, std::int64_t{0}};
    std::vector<std::string> args;
    args.push_back(std::move(id));
    args.push_back(std::to_string(tok));
    args.push_back(impl->k.wake_channel);
    auto [ec, v] = co_await impl->call(scripts::jobs_cancel(), std::move(args));
    co_return std::tuple{ec, ec ? std::int64_t{0} : as_int(v)};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(id), claim_token), std::move(h));
}

void job_queue::start_stall(std::string id, std::int64_t claim_token, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string id,
               std::int64_t tok) -> asio::awaitable<std::tuple<error_code>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{ec};
    std::vector<std::string> args;
    args.push_back(std::move(id));
    args.push_back(std::to_string(tok));
    auto [ec, v] = co_await impl->call(scripts::jobs_stall(), std::move(args));
    co_return std::tuple{ec};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(id), claim_token), std::move(h));
}

void job_queue::start_heartbeat(std::string id, std::int64_t claim_token, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string id,
               std::int64_t tok) -> asio::awaitable<std::tuple<error_code>> {
    std::vector<claim_ref> one{claim_ref{std::move(id), tok}};
    auto [ec, st] = co_await job_queue_impl::heartbeat_batch(impl, std::move(one));
    co_return std::tuple{ec ? ec : st.at(0)};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(id), claim_token), std::move(h));
}

void job_queue::start_heartbeat_many(std::vector<claim_ref> claims,
                                     handler<std::vector<error_code>> h) {
  detail::spawn_op(client_->get_executor(),
                   job_queue_impl::heartbeat_batch(impl_, std::move(claims)), std::move(h));
}

void job_queue::start_retry(std::string id, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               std::string id) -> asio::awaitable<std::tuple<error_code>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{ec};
    std::vector<std::string> args;
    args.push_back(std::move(id));
    args.push_back(now_ms_string());
    args.push_back(impl->k.wake_channel);
    auto [ec, v] = co_await impl->call(scripts::jobs_retry(), std::move(args));
    co_return std::tuple{ec};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(id)), std::move(h));
}

void job_queue::start_retract(std::string id, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               std::string id) -> asio::awaitable<std::tuple<error_code>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{ec};
    std::vector<std::string> args;
    args.push_back(std::move(id));
    auto [ec, v] = co_await impl->call(scripts::jobs_retract(), std::move(args));
    co_return std::tuple{ec};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(id)), std::move(h));
}

void job_queue::start_failures(std::string id, handler<std::int64_t> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               std::string id) -> asio::awaitable<std::tuple<error_code, std::int64_t>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{ec, std::int64_t{0}};
    std::vector<std::string> args;
    args.push_back("failures");
    args.push_back(std::move(id));
    auto [ec, v] = co_await impl->call(scripts::jobs_read(), std::move(args));
    co_return std::tuple{ec, ec ? std::int64_t{0} : as_int(v)};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(id)), std::move(h));
}

void job_queue::start_get_ids(handler<std::vector<std::string>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl)
      -> asio::awaitable<std::tuple<error_code, std::vector<std::string>>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec, std::vector<std::string>{}};
    std::vector<std::string> args{"ids"};
    auto [ec, v] = co_await impl->call(scripts::jobs_read(), std::move(args));
    if (ec) co_return std::tuple{ec, std::vector<std::string>{}};
    co_return std::tuple{error_code{}, as_strings(std::move(v))};
  };
  detail::spawn_op(client_->get_executor(), op(impl_), std::move(h));
}

void job_queue::start_counts(handler<job_counts> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl)
      -> asio::awaitable<std::tuple<error_code, job_counts>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec, job_counts{}};
    std::vector<std::string> args{"counts"};
    auto [ec, v] = co_await impl->call(scripts::jobs_read(), std::move(args));
    job_counts c;
    if (ec) co_return std::tuple{ec, c};
    if (v.elements.size() < 6) co_return std::tuple{error_code(error::unexpected_type), c};
    c.waiting = as_int(v.elements[0]);
    c.claimed = as_int(v.elements[1]);
    c.stalled = as_int(v.elements[2]);
    c.items = as_int(v.elements[3]);
    c.puts = as_int(v.elements[4]);
    c.finishes = as_int(v.elements[5]);
    co_return std::tuple{error_code{}, c};
  };
  detail::spawn_op(client_->get_executor(), op(impl_), std::move(h));
}

void job_queue::start_get_result(std::string id, std::chrono::milliseconds timeout,
                                 handler<std::string> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string id,
               std::chrono::milliseconds timeout)
      -> asio::awaitable<std::tuple<error_code, std::string>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{ec, std::string{}};
    if (impl->closed)
      co_return std::tuple{error_code(asio::error::operation_aborted), std::string{}};
    const auto deadline = timeout == std::chrono::milliseconds::max()
                              ? clock_type::time_point::max()
                              : clock_type::now() + std::max(timeout, std::chrono::milliseconds(0));
    auto p = std::make_shared<pending<std::string>>(impl->cl.get_executor());
    impl->track(p);

    // 1. Listen on job.finish (so a finish from now on is seen), 2. read the
    // stored result (a finish before now), 3. re-read every poll interval
    // (a message lost in a subscriber reconnect).
    auto cb = [p, id](const message& m) {
      auto nul = m.payload.find('\0');
      if (nul == std::string_view::npos || m.payload.substr(0, nul) != id) return;
      p->complete({}, std::string(m.payload.substr(nul + 1)));
    };
    // Waiting for the subscription is bounded (a subscriber that cannot
    // connect, or may not subscribe, must not hold the caller): without it
    // we still poll.
    subscription sub;
    {
      using namespace asio::experimental::awaitable_operators;
      auto soon = clock_type::now() + std::chrono::seconds(1);
      asio::steady_timer limit(impl->cl.get_executor(), std::min(deadline, soon));
      auto r =
          co_await (impl->cl.sub().subscribe(impl->k.finish_channel, std::move(cb), use_nothrow) ||
                    limit.async_wait(use_nothrow));
      if (r.index() == 0) sub = std::move(std::get<1>(std::get<0>(r)));
    }
    const std::string key = impl->k.names.job_result_key(id);
    for (;;) {
      if (p->done) break;
      request req;
      req.push("LINDEX", key, 0);
      exec_options eo;
      auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now());
      // Not the caller's remaining time: when waiting for the subscription
      // used it up, this last read must still get an answer (result or
      // result_timeout), not a request_timeout of its own.
      eo.timeout = std::clamp(left, std::chrono::milliseconds(1000), std::chrono::milliseconds(60000));
      auto [ec, resp] = co_await impl->cl.conn().exec(req, eo, use_nothrow);
      if (p->done) break;
      if (ec) co_return std::tuple{ec, std::string{}};
      if (!resp.empty() && resp[0].is_string())
        co_return std::tuple{error_code{}, std::move(resp[0].str)};
      auto now = clock_type::now();
      if (now >= deadline) co_return std::tuple{error_code(error::result_timeout), std::string{}};
      auto next =
          deadline - now > impl->opts.poll_interval ? now + impl->opts.poll_interval : deadline;
      p->timer.expires_at(next);
      auto [wec] = co_await p->timer.async_wait(use_nothrow);
      if (p->done) break;
      if (wec) co_return std::tuple{error_code(asio::error::operation_aborted), std::string{}};
    }
    co_return std::tuple{p->ec, std::move(p->value)};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(id), timeout), std::move(h));
}

void job_queue::start_maintain(maintenance_options opts, handler<maintenance_report> h) {
  detail::spawn_op(client_->get_executor(), job_queue_impl::maintain(impl_, std::move(opts)),
                   std::move(h));
}

void job_queue::start_run_maintenance(std::chrono::milliseconds interval, maintenance_options opts,
                                      handler<> h) {
  detail::spawn_op(client_->get_executor(),
                   job_queue_impl::run_maintenance(impl_, interval, std::move(opts)), std::move(h));
}

}  // namespace thoonk
