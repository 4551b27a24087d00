// The runner's run and its round loop (runner.hpp): the options' check, the
// registration, the subscriptions, the loop that sends the book's rounds
// (jobs/work.lua) and acts on their replies, the stop and the leave; and
// job_queue::start_run, which starts it.
#include "jobs/runner/runner.hpp"

#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "detail/uuid.hpp"
#include "jobs/job_queue_impl.hpp"
#include "jobs/time_limits.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/post.hpp>
#include <boost/json/object.hpp>
#include <boost/json/serialize.hpp>

#include <unistd.h>

#include <algorithm>

namespace thoonk {
namespace detail {

namespace asio = boost::asio;

runner::runner(job_queue h, std::shared_ptr<job_queue_impl> q, job_coroutine co, job_function fn,
               run_options o)
    : handle_(std::move(h)),
      impl_(std::move(q)),
      ex_(impl_->cl.get_executor()),
      co_handler_(std::move(co)),
      fn_handler_(std::move(fn)),
      opts_(std::move(o)),
      book_(book_settings(opts_, *impl_)),
      kick_(ex_) {}

jobs::runner_book::settings runner::book_settings(const run_options& o, const job_queue_impl& q) {
  book_type::settings s;
  s.concurrency = o.concurrency;
  s.max_claim_batch = jobs::clamp_batch(o.max_claim_batch);
  s.poll_interval = q.opts.poll_interval;
  s.stop_timeout = o.stop_timeout;
  s.prefetch = o.prefetch ? *o.prefetch : std::max<std::size_t>(o.concurrency, 64);
  s.hand_off = o.hand_off;
  s.worker_ttl = o.worker_ttl;
  s.heartbeat_interval = o.heartbeat_interval;
  return s;
}

void runner::spawn(asio::awaitable<void> op) {
  ++ops_;
  asio::co_spawn(ex_, std::move(op), [self = shared_from_this()](std::exception_ptr) {
    --self->ops_;
    self->poke();
  });
}

void runner::request_stop() {
  // A stop gives back every claim this worker holds: no reconciliation
  // (the book drops a check wanted and not running).
  book_.stop(book_type::clock::now());
  // Jobs claimed ahead will not start here: back to the front of the
  // line at once (no failure counted), for other workers.
  give_back_ready(time_point::max(), false);
  poke();
}

void runner::fail_run(op_status st) {
  if (!fatal_) fatal_ = std::move(st);
  request_stop();
}

std::string runner::make_description() const {
  boost::json::object o;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  o["host"] = host;
  o["pid"] = static_cast<std::int64_t>(::getpid());
  o["queue"] = impl_->names.name();
  o["concurrency"] = static_cast<std::int64_t>(opts_.concurrency);
  o["ttl_ms"] = static_cast<std::int64_t>(opts_.worker_ttl.count());
  o["started_ms"] = unix_ms();
  return boost::json::serialize(o);
}

std::string runner::default_name() const {
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) != 0) host[0] = '\0';
  return std::string(host) + ":" + std::to_string(::getpid()) + ":" + make_uuid().substr(0, 8);
}

op_status runner::check_options() const {
  if (opts_.concurrency < 1 || opts_.concurrency > 10000 ||
      opts_.worker_ttl < std::chrono::milliseconds(100) || !jobs::time_in_range(opts_.worker_ttl) ||
      opts_.heartbeat_interval.count() < 0 || opts_.heartbeat_interval >= opts_.worker_ttl ||
      opts_.stop_timeout.count() < 0 || opts_.max_claim_batch < 1 || opts_.max_claim_batch > 1000 ||
      (opts_.prefetch && *opts_.prefetch > 10000) || (!co_handler_ && !fn_handler_))
    return error::invalid_argument;
  if (!opts_.worker_name.empty())
    if (auto ec = validate_worker_name(impl_->cl.get_config(), opts_.worker_name)) return ec;
  return {};
}

asio::awaitable<void> runner::subscribe_aborts(std::shared_ptr<runner> self) {
  // Aborts from any client stop the job's handler at once; without the
  // subscription (refused, or the subscriber is down) the heartbeat still
  // finds the lost claim.
  std::weak_ptr<runner> weak = self;
  auto cb = [weak](const std::string& id) {
    if (auto s = weak.lock()) s->aborted(id);
  };
  asio::steady_timer limit(self->ex_, std::chrono::seconds(1));
  using namespace asio::experimental::awaitable_operators;
  auto r = co_await (self->handle_.async_subscribe_aborts(std::move(cb), use_nothrow) ||
                     limit.async_wait(use_nothrow));
  if (r.index() == 0) self->aborts_ = std::move(std::get<1>(std::get<0>(r)));
}

asio::awaitable<void> runner::run_round(std::shared_ptr<runner> self, book_type::round r) {
  const auto sent = book_type::clock::now();
  auto& q = *self->impl_;
  std::vector<std::string> keys = q.keys;
  std::vector<std::string> args;
  args.reserve(6 + 4 * r.finishes.size());
  args.push_back(unix_ms_string());
  args.push_back(self->worker_);
  args.push_back(std::to_string(r.claim));
  args.push_back(q.finish_channel);
  args.push_back(std::to_string(r.offer));
  args.push_back(std::to_string(self->book_.offer_ttl().count()));
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
  auto [st, v] = co_await run_script(q.cl, scripts::jobs_work(), std::move(keys), std::move(args));
  const auto now = book_type::clock::now();
  if (st) {
    if (jobs::is_transient(st.ec)) self->book_.round_failed(std::move(r), now);
    else {
      self->book_.round_failed(book_type::round{}, now);
      self->fail_run(std::move(st));
    }
    self->poke();
    co_return;
  }
  auto& e = v.elements;
  const std::size_t m = e.size() >= 2 ? static_cast<std::size_t>(jobs::as_int(e[1])) : 0;
  if (e.size() < 2 || m != r.finishes.size() || e.size() < 2 + m) {
    self->book_.round_failed(book_type::round{}, now);
    self->fail_run(op_status(error::unexpected_type));
    self->poke();
    co_return;
  }
  for (std::size_t j = 0; j < m; ++j) {
    const auto code = job_queue_impl::claim_status(jobs::as_int(e[2 + j], -1));
    if (!code) ++self->report_.finished;
    else if (code == error::no_channel_permission) self->fail_run(op_status(code));
    else ++self->report_.lost;
  }
  std::optional<std::int64_t> due;
  auto jobs_claimed = job_queue_impl::parse_claims(e, 2 + m, &due);
  std::optional<time_point> retry_at;
  if (due && *due > 0) retry_at = now + wait_until_epoch_ms(*due);
  const std::size_t starting =
      self->book_.round_done(r.claim, jobs_claimed.size(), retry_at, now, now - sent);
  self->start_or_keep(std::move(jobs_claimed), starting, now);
  // A stop asked for while this round was in flight: what it brought
  // beyond the slots goes back at once.
  if (self->book_.stopping()) self->give_back_ready(time_point::max(), false);
  if (jobs::as_int(e[0]) != 1) self->lapsed();
  self->poke();
}

asio::awaitable<op_result<run_report>> runner::run(std::shared_ptr<runner> self) {
  if (self->impl_->name_ec) co_return std::tuple{op_status(self->impl_->name_ec), run_report{}};
  if (auto st = self->check_options()) co_return std::tuple{std::move(st), run_report{}};
  self->worker_ = self->opts_.worker_name.empty() ? self->default_name() : self->opts_.worker_name;
  self->report_.worker_name = self->worker_;
  self->description_ = self->make_description();

  // Wake-ups first (a put after this is seen), then the registration.
  co_await self->impl_->ensure_wake(std::chrono::milliseconds(1000));
  {
    auto st = co_await self->register_worker();
    if (st) co_return std::tuple{std::move(st), std::move(self->report_)};
  }
  std::weak_ptr<runner> weak = self;
  self->wake_listener_ = self->impl_->add_wake_listener([weak]() {
    if (auto s = weak.lock()) {
      s->book_.woken();
      s->poke();
    }
  });
  co_await subscribe_aborts(self);
  if (self->opts_.stop.stop_possible()) {
    // Requested from any thread (or already): the stop runs on the
    // runner's executor.
    self->on_stop_.emplace(self->opts_.stop, std::function<void()>([weak, ex = self->ex_]() {
                             asio::post(ex, [weak]() {
                               if (auto s = weak.lock()) s->request_stop();
                             });
                           }));
  }
  self->spawn(heartbeats(self));
  if (self->opts_.hand_off) co_await start_taking(self);

  self->book_.woken();  // the first round claims at once
  for (;;) {
    auto now = book_type::clock::now();
    if (self->book_.ready_to_leave(now)) break;
    if (self->fatal_ &&
        (self->fatal_ == error::client_stopped || self->fatal_ == asio::error::operation_aborted))
      break;  // nothing more can be sent
    if (self->book_.cancel_due(now)) self->cancel_all(true);
    if (self->book_.start_check()) self->spawn(reconcile(self));
    while (auto r = self->book_.next_round(now)) self->spawn(run_round(self, std::move(*r)));
    const auto at = self->book_.next_timer();
    self->kick_.expires_at(at == time_point::max() ? time_point::max() : std::max(at, now));
    co_await self->kick_.async_wait(use_nothrow);
  }

  // Leave: nothing more is claimed; what is still held goes back to the
  // front of the line (no failure counted) and the registration goes.
  self->leaving_ = true;
  self->cancel_all(true);
  self->impl_->remove_wake_listener(self->wake_listener_);
  self->aborts_.reset();
  self->takes_.stop();
  if (self->reconcile_retry_) self->reconcile_retry_->cancel();
  if (self->heartbeat_timer_) self->heartbeat_timer_->cancel();
  self->on_stop_.reset();
  // Rounds, fails and releases in flight end first (their outcome counts,
  // and a release must not follow the stop), and so does the heartbeat.
  while (self->ops_ > 0) {
    self->kick_.expires_at(time_point::max());
    co_await self->kick_.async_wait(use_nothrow);
  }
  if (!(self->fatal_ == error::client_stopped)) {
    std::vector<std::string> args{self->worker_, self->impl_->wake_channel};
    auto [st, v] = co_await self->impl_->call(scripts::jobs_stop_worker(), std::move(args));
    if (!st) self->report_.released += static_cast<std::uint64_t>(jobs::as_int(v));
    else if (!self->fatal_) self->fatal_ = std::move(st);
  }
  co_return std::tuple{std::move(self->fatal_), std::move(self->report_)};
}

}  // namespace detail

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
    auto ex = client_core_->get_executor();
    slot.assign([weak, ex](asio::cancellation_type) {
      asio::post(ex, [weak]() {
        if (auto s = weak.lock()) s->request_stop();
      });
    });
  }
  auto done = [slot, h = std::move(h), ex = client_core_->get_executor()](
                  std::exception_ptr e, detail::op_result<run_report> res) mutable {
    auto s = slot;
    if (s.is_connected()) s.clear();
    if (e) std::get<0>(res) = detail::op_status(detail::exception_to_code(e));
    auto& [st, rep] = res;
    detail::complete_op(std::move(h), ex, std::move(st), std::move(rep));
  };
  asio::co_spawn(client_core_->get_executor(), detail::runner::run(r), std::move(done));
}

}  // namespace thoonk
