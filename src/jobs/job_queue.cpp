// thoonk::job_queue: the contract's "Job" with atomic batched claims, claim
// tokens, batched finishes, durable results (docs/contract.md).
#include <thoonk/job_queue.hpp>

#include "connection/cluster.hpp"
#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "feeds/common.hpp"
#include "jobs/claim_taker.hpp"
#include "jobs/job_queue_impl.hpp"
#include "subscriber/notify.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>

namespace thoonk {
namespace detail {

namespace asio = boost::asio;
using namespace jobs;  // NOLINT

namespace {
const queue_kind job_layout{feed_type::job, [](const feed_names& n) { return job_keys(n).keys; },
                            &scripts::jobs_put};
}  // namespace

job_queue_impl::job_queue_impl(client& c, std::string_view name, job_queue_options o)
    : queue_core(c, name, job_layout, o),
      lock_key(names.key("maintenance")),
      finish_channel(names.job_finish_channel()),
      opts(std::move(o)) {}

void job_queue_impl::init() {
  std::weak_ptr<job_queue_impl> weak = shared();
  auto ex = cl.get_executor();
  claims = std::make_shared<fetcher<claimed_job>>(
      ex, opts.poll_interval, opts.max_claim_batch, opts.max_claims_in_flight,
      [weak](std::size_t n) { return claim_batch(weak.lock(), n); },
      [weak](std::vector<claimed_job> js) { return give_back(weak.lock(), std::move(js)); },
      [weak]() { return prepare(weak.lock()); },
      fetcher<claimed_job>::prefetch_options{opts.prefetch, opts.prefetch_hold});
  if (opts.hand_off) {
    taker = std::make_shared<claim_taker>(shared());
    const std::weak_ptr<claim_taker> weak_taker = taker;
    claims->on_idle(
        [weak_taker] {
          if (auto t = weak_taker.lock()) t->idle();
        },
        [weak_taker] { return claim_taker::settled(weak_taker); });
  }
  finishes = std::make_shared<batcher<finish_request, error_code>>(
      ex, opts.max_finish_batch, opts.max_finishes_in_flight,
      [weak](std::vector<finish_request> reqs) {
        return finish_batch(weak.lock(), std::move(reqs));
      });
  finish_claims = std::make_shared<batcher<finish_request, finish_claim_outcome>>(
      ex, opts.max_claim_batch, opts.max_finishes_in_flight,
      [weak](std::vector<finish_request> reqs) {
        return finish_claim_batch(weak.lock(), std::move(reqs));
      },
      // A caller that cancelled while its call was out: its job goes back
      // to the front of the queue (no failure counted).
      [weak, ex](finish_claim_outcome o) {
        if (!o.next) return;
        std::vector<claimed_job> back;
        back.push_back(std::move(*o.next));
        asio::co_spawn(ex, give_back(weak.lock(), std::move(back)), asio::detached);
      });
  init_puts();
}

void job_queue_impl::close() {
  if (closed) return;
  const error_code aborted = asio::error::operation_aborted;
  claims->close(aborted);
  if (taker) taker->close();
  finishes->close(aborted);
  finish_claims->close(aborted);
  queue_core::close();
  for (auto& w : tracked)
    if (auto p = w.lock()) p->complete(aborted, {});
  tracked.clear();
}

void job_queue_impl::track(const std::shared_ptr<pending<std::string>>& p) {
  std::erase_if(tracked, [](const auto& w) { return w.expired(); });
  tracked.push_back(p);
}

asio::awaitable<std::tuple<op_status, resp3::value>> job_queue_impl::call(
    const script& s, std::vector<std::string> args) {
  return run_script(cl, s, keys, std::move(args));
}

asio::awaitable<std::tuple<op_status, resp3::value>> job_queue_impl::call_with_dlq(
    const script& s, std::vector<std::string> args, std::vector<std::string> after) {
  bool fresh = false;  // dead_letter_queue came from the server in this call
  for (int attempt = 0;; ++attempt) {
    std::string name = dead_letter_queue.value_or(std::string{});
    if (other_slot(name)) {
      // Sent, the script would fail with CROSSSLOT (or, when both slots sit
      // on one node, run its writes until the first key of the other slot).
      // A remembered name may be stale: without one, the script reads the
      // config (the queue's own slot) and names the current one.
      if (fresh) co_return std::tuple{op_status{error::cluster_cross_slot}, resp3::value{}};
      name.clear();
    }
    std::vector<std::string> k = keys;
    std::vector<std::string> a = args;
    a.push_back(name);
    if (name.empty()) {
      a.emplace_back();
    } else {
      const feed_names dn(cl.get_config(), name);
      for (std::string_view what : {"config", "ids", "items", "publishes", "idincr", "sleepers"})
        k.push_back(dn.key(what));
      a.push_back(dn.channel("wake"));
    }
    a.insert(a.end(), after.begin(), after.end());
    auto [st, v] = co_await run_script(cl, s, std::move(k), std::move(a));
    // {'dlq', name}: the config names another queue (or none) and nothing
    // was done. Three rounds cover a config that changes meanwhile.
    if (!st && v.elements.size() == 2 && v.elements[0].str == "dlq" && attempt < 3) {
      dead_letter_queue = std::move(v.elements[1].str);
      fresh = true;
      continue;
    }
    co_return std::tuple{std::move(st), std::move(v)};
  }
}

bool job_queue_impl::other_slot(std::string_view dlq) const {
  const auto& cfg = cl.get_config();
  if (!cfg.cluster || dlq.empty()) return false;
  return hash_slot(feed_names(cfg, dlq).key("config")) != hash_slot(keys.front());
}

asio::awaitable<void> job_queue_impl::prepare(std::shared_ptr<job_queue_impl> self) {
  if (!self || self->closed) co_return;
  // Bounded: if the subscriber cannot connect, claims still work (polling).
  co_await self->ensure_wake(std::chrono::milliseconds(1000));
  if (self->taker) co_await claim_taker::start(self->taker);
}

asio::awaitable<op_result<std::vector<claimed_job>>> job_queue_impl::claim_batch(
    std::shared_ptr<job_queue_impl> self, std::size_t n) {
  std::vector<claimed_job> out;
  if (!self) co_return std::tuple{op_status(asio::error::operation_aborted), std::move(out)};
  std::vector<std::string> args;
  args.push_back(unix_ms_string());
  args.push_back(std::to_string(n));
  args.push_back(self->wake_channel);
  const bool offered = self->taker && self->taker->add_offer(args, self->claims->waiting());
  auto [st, v] = co_await self->call(scripts::jobs_claim(), std::move(args));
  std::optional<std::int64_t> due;
  if (!st) out = parse_claims(v.elements, 0, &due);
  // A reply that says when to look again got fewer jobs than asked: the
  // offer stands (an error leaves that open).
  if (offered) self->taker->offer_done(st || due.has_value());
  if (st) co_return std::tuple{std::move(st), std::move(out)};
  auto at = fetch_policy::time_point::max();
  if (due && *due > 0) {
    at = fetch_policy::clock::now() + wait_until_epoch_ms(*due);
  }
  if (self->claims) self->claims->due_at(at);
  co_return std::tuple{op_status{}, std::move(out)};
}

asio::awaitable<void> job_queue_impl::give_back(std::shared_ptr<job_queue_impl> self,
                                                std::vector<claimed_job> js) {
  co_await release(std::move(self), std::move(js));
}

asio::awaitable<std::uint64_t> job_queue_impl::release(std::shared_ptr<job_queue_impl> self,
                                                       std::vector<claimed_job> js) {
  if (!self || js.empty()) co_return 0;
  std::vector<std::string> args;
  args.reserve(1 + 2 * js.size());
  args.push_back(self->wake_channel);
  for (auto& j : js) {
    args.push_back(std::move(j.id));
    args.push_back(std::to_string(j.token));
  }
  auto [st, v] = co_await self->call(scripts::jobs_release(), std::move(args));
  co_return st ? 0 : static_cast<std::uint64_t>(as_int(v));
}

namespace {

// The finish arguments of jobs/finish.lua and jobs/finish_claim.lua: per
// job id, token, the index of its result key in `keys` (0: no result),
// result; each result key is appended to `keys`.
void add_finish_args(const job_queue_impl& q, std::vector<finish_request>& reqs,
                     std::vector<std::string>& keys, std::vector<std::string>& args) {
  args.reserve(args.size() + 4 * reqs.size());
  for (auto& r : reqs) {
    args.push_back(std::move(r.id));
    args.push_back(std::to_string(r.token));
    if (r.result) {
      keys.push_back(q.names.job_result_key(args[args.size() - 2]));
      args.push_back(std::to_string(keys.size()));
      args.push_back(std::move(*r.result));
    } else {
      args.push_back("0");
      args.push_back(std::string{});
    }
  }
}

}  // namespace

asio::awaitable<op_result<std::vector<boost::system::error_code>>> job_queue_impl::finish_batch(
    std::shared_ptr<job_queue_impl> self, std::vector<finish_request> reqs) {
  std::vector<error_code> out;
  if (!self) co_return std::tuple{op_status(asio::error::operation_aborted), std::move(out)};
  std::vector<std::string> keys = self->keys;
  std::vector<std::string> args{self->finish_channel};
  add_finish_args(*self, reqs, keys, args);
  auto [st, v] =
      co_await run_script(self->cl, scripts::jobs_finish(), std::move(keys), std::move(args));
  if (st) co_return std::tuple{std::move(st), std::move(out)};
  co_return std::tuple{op_status{}, claim_statuses(v)};
}

asio::awaitable<op_result<std::vector<finish_claim_outcome>>> job_queue_impl::finish_claim_batch(
    std::shared_ptr<job_queue_impl> self, std::vector<finish_request> reqs) {
  std::vector<finish_claim_outcome> out;
  if (!self) co_return std::tuple{op_status(asio::error::operation_aborted), std::move(out)};
  const std::size_t m = reqs.size();
  std::vector<std::string> keys = self->keys;
  std::vector<std::string> args{unix_ms_string(), self->finish_channel};
  add_finish_args(*self, reqs, keys, args);
  auto [st, v] =
      co_await run_script(self->cl, scripts::jobs_finish_claim(), std::move(keys), std::move(args));
  if (st) co_return std::tuple{std::move(st), std::move(out)};
  // {m, m statuses, then claim_jobs' reply}: a reply of another shape is
  // not ours to guess at.
  auto& e = v.elements;
  if (e.size() < m + 1 || as_int(e[0], -1) != static_cast<std::int64_t>(m))
    co_return std::tuple{op_status(error::unexpected_type), std::move(out)};
  out.resize(m);
  std::size_t finished = 0;
  for (std::size_t j = 0; j < m; ++j) {
    out[j].status = claim_status(as_int(e[j + 1], -1));
    if (!out[j].status) ++finished;
  }
  auto next = parse_claims(e, m + 1, nullptr);
  if (next.size() > finished)
    co_return std::tuple{op_status(error::unexpected_type), std::move(out)};
  // The claimed jobs go to the finished requests in order; those left
  // without one complete with queue_empty.
  std::size_t k = 0;
  for (auto& o : out)
    if (!o.status && k < next.size()) o.next = std::move(next[k++]);
  co_return std::tuple{op_status{}, std::move(out)};
}

boost::system::error_code job_queue_impl::claim_status(std::int64_t s) {
  switch (s) {
    case 0: return {};
    case 1: return error::job_not_found;
    case 2: return error::job_not_claimed;
    case 3: return error::lost_claim;
    case 4: return error::no_channel_permission;
    default: return error::unexpected_type;
  }
}

std::vector<boost::system::error_code> job_queue_impl::claim_statuses(const resp3::value& v) {
  std::vector<error_code> out;
  out.reserve(v.elements.size());
  for (const auto& s : v.elements) out.push_back(claim_status(as_int(s, -1)));
  return out;
}

std::vector<claimed_job> job_queue_impl::parse_claims(resp3::value_list& e, std::size_t first,
                                                      std::optional<std::int64_t>* due) {
  std::vector<claimed_job> out;
  if (first > e.size()) return out;
  out.reserve((e.size() - first) / 4);
  std::size_t i = first;
  for (; i + 3 < e.size(); i += 4) {
    claimed_job j;
    j.id = std::move(e[i].str);
    j.item = std::move(e[i + 1].str);
    j.failures = as_int(e[i + 2]);
    j.token = as_int(e[i + 3]);
    out.push_back(std::move(j));
  }
  if (i < e.size() && due) *due = as_int(e[i]);
  return out;
}

asio::awaitable<op_result<std::vector<boost::system::error_code>>> job_queue_impl::heartbeat_batch(
    std::shared_ptr<job_queue_impl> self, std::vector<claim_ref> claims) {
  std::vector<error_code> out;
  if (self->name_ec) co_return std::tuple{op_status(self->name_ec), std::move(out)};
  for (const auto& c : claims)
    if (auto ec = validate_id(self->cl.get_config(), c.id))
      co_return std::tuple{op_status(ec), std::move(out)};
  // Chunks of at most 1000 claims, each one atomic script call.
  for (std::size_t first = 0; first < claims.size(); first += 1000) {
    const std::size_t last = std::min(claims.size(), first + 1000);
    std::vector<std::string> args;
    args.reserve(1 + 2 * (last - first));
    args.push_back(unix_ms_string());
    for (std::size_t i = first; i < last; ++i) {
      args.push_back(std::move(claims[i].id));
      args.push_back(std::to_string(claims[i].token));
    }
    auto [st, v] = co_await self->call(scripts::jobs_heartbeat(), std::move(args));
    if (st) co_return std::tuple{std::move(st), std::move(out)};
    auto part = claim_statuses(v);
    if (part.size() != last - first)
      co_return std::tuple{op_status(error::unexpected_type), std::move(out)};
    out.insert(out.end(), part.begin(), part.end());
  }
  co_return std::tuple{op_status{}, std::move(out)};
}

namespace {

using error_code = boost::system::error_code;

}  // namespace

job_queue_impl& impl_of(const std::shared_ptr<queue_core>& core) {
  return static_cast<job_queue_impl&>(*core);
}

std::shared_ptr<job_queue_impl> shared_impl(const std::shared_ptr<queue_core>& core) {
  return std::static_pointer_cast<job_queue_impl>(core);
}

namespace {

std::shared_ptr<queue_core> make_job_queue(client& c, std::string_view name, job_queue_options o) {
  auto impl = std::make_shared<job_queue_impl>(c, name, std::move(o));
  impl->init();
  return impl;
}

}  // namespace

// Validation shared by the single-job operations.
error_code check_id(const job_queue_impl& impl, std::string_view id) {
  if (impl.name_ec) return impl.name_ec;
  return validate_id(impl.cl.get_config(), id);
}

// A script of one job: `args` after the id; the reply, or the status.
asio::awaitable<op_result<resp3::value>> job_script(std::shared_ptr<job_queue_impl> impl,
                                                    const script& s, std::string id,
                                                    std::vector<std::string> args) {
  if (auto ec = check_id(*impl, id)) co_return std::tuple{op_status(ec), resp3::value{}};
  args.insert(args.begin(), std::move(id));
  co_return co_await impl->call(s, std::move(args));
}

// A job script whose reply the caller does not need.
asio::awaitable<op_result<>> job_script_status(std::shared_ptr<job_queue_impl> impl,
                                               const script& s, std::string id,
                                               std::vector<std::string> args) {
  auto [st, v] = co_await job_script(std::move(impl), s, std::move(id), std::move(args));
  co_return std::tuple{std::move(st)};
}

namespace {

// jobs/read.lua's queries without an id ('ids', 'counts').
asio::awaitable<op_result<resp3::value>> read_query(std::shared_ptr<job_queue_impl> impl,
                                                    std::string what) {
  if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), resp3::value{}};
  std::vector<std::string> args{std::move(what)};
  co_return co_await impl->call(scripts::jobs_read(), std::move(args));
}

}  // namespace

// jobs/inspect.lua's and jobs/list.lua's jobs: 14 values each, from
// `first` (includes/describe.lua).
std::vector<job_info> parse_jobs(resp3::value&& v, std::size_t first) {
  std::vector<job_info> out;
  auto& e = v.elements;
  for (std::size_t i = first; i + 13 < e.size(); i += 14) out.push_back(parse_job(&e[i]));
  return out;
}

bool parse_counts(const resp3::value& v, job_counts& out) {
  if (v.elements.size() < 8) return false;
  const auto& e = v.elements;
  out.waiting = as_int(e[0]);
  out.claimed = as_int(e[1]);
  out.stalled = as_int(e[2]);
  out.items = as_int(e[3]);
  out.puts = as_int(e[4]);
  out.finishes = as_int(e[5]);
  out.scheduled = as_int(e[6]);
  out.held = as_int(e[7]);
  return true;
}

namespace {

// Splits a `job.finish` payload, `id\0result`; false when it has no NUL
// or an empty id.
bool split_finish(std::string_view payload, job_finished& out) {
  const auto nul = payload.find('\0');
  if (nul == std::string_view::npos || nul == 0) return false;
  out.id.assign(payload.substr(0, nul));
  out.result.assign(payload.substr(nul + 1));
  return true;
}

}  // namespace
}  // namespace detail

namespace asio = boost::asio;
using boost::system::error_code;
using detail::job_queue_impl;
using detail::op_result;
using detail::op_status;
using detail::use_nothrow;
using namespace detail::jobs;  // NOLINT
namespace scripts = detail::scripts;

// ---- settings -------------------------------------------------------------------

feed_config job_queue::settings::to_fields() const {
  feed_config out;
  auto ms = [&](std::string_view field, const std::optional<std::chrono::milliseconds>& v) {
    if (v) out.emplace_back(field, std::to_string(v->count()));
  };
  auto num = [&](std::string_view field, const std::optional<std::int64_t>& v) {
    if (v) out.emplace_back(field, std::to_string(*v));
  };
  auto flag = [&](std::string_view field, const std::optional<bool>& v) {
    if (v) out.emplace_back(field, *v ? "1" : "0");
  };
  ms(job_config::claim_timeout_ms, claim_timeout);
  ms(job_config::result_ttl_ms, result_ttl);
  flag(job_config::published, published);
  num(job_config::max_retries, retry.max_retries);
  num(job_config::max_stalls, retry.max_stalls);
  ms(job_config::min_backoff_ms, retry.min_backoff);
  ms(job_config::max_backoff_ms, retry.max_backoff);
  if (dead_letter_queue) out.emplace_back(job_config::dead_letter_queue, *dead_letter_queue);
  flag(job_config::events, events);
  num(job_config::rate_limit, rate_limit);
  flag(job_config::paused, paused);
  return out;
}

std::string job_queue::settings::problem() const {
  for (const auto& [field, value] : to_fields())
    if (auto p = config_field_problem(field, value); !p.empty()) return p;
  if (retry.min_backoff && retry.max_backoff && *retry.max_backoff < *retry.min_backoff)
    return "max_backoff_ms must not be less than min_backoff_ms";
  return {};
}

job_queue::settings job_queue::settings::from_fields(const feed_config& fields) {
  settings s;
  for (const auto& [field, value] : fields) {
    // Read as the scripts read it: a value they replace by the default
    // (not an integer, or outside the field's range) is unset here too.
    const auto n = detail::read_config_int(field, value);
    const auto as_ms = [&]() -> std::optional<std::chrono::milliseconds> {
      if (n) return std::chrono::milliseconds(*n);
      return std::nullopt;
    };
    if (field == job_config::claim_timeout_ms) s.claim_timeout = as_ms();
    else if (field == job_config::result_ttl_ms) s.result_ttl = as_ms();
    else if (field == job_config::max_retries) s.retry.max_retries = n;
    else if (field == job_config::max_stalls) s.retry.max_stalls = n;
    else if (field == job_config::min_backoff_ms) s.retry.min_backoff = as_ms();
    else if (field == job_config::max_backoff_ms) s.retry.max_backoff = as_ms();
    else if (field == job_config::dead_letter_queue) s.dead_letter_queue = value;
    else if ((field == job_config::published || field == job_config::events) &&
             (value == "1" || value == "0"))
      (field == job_config::published ? s.published : s.events) = value == "1";
    else if (field == job_config::rate_limit) s.rate_limit = n;
    else if (field == job_config::paused && (value == "1" || value == "0")) s.paused = value == "1";
  }
  return s;
}

// ---- handles --------------------------------------------------------------------

job_queue::job_queue(client& c, std::string name, job_queue_options opts)
    : queue_base(c, detail::make_job_queue(c, name, std::move(opts))) {}

std::uint64_t job_queue::malformed_finish_events() const noexcept {
  return core_ ? *detail::impl_of(core_).malformed_finishes : 0;
}

void job_queue::start_open(handler<job_queue> h) {
  detail::start_open_handle(*this, core_, std::move(h));
}

void job_queue::start_create_or_open(settings s, handler<job_queue> h) {
  // Each field is checked on its way; this also checks how they combine
  // (max_backoff not below min_backoff).
  if (!s.problem().empty()) {
    detail::post_handler(std::move(h), client_->get_executor(), error_code(error::invalid_argument),
                         job_queue{});
    return;
  }
  if (s.dead_letter_queue && detail::impl_of(core_).other_slot(*s.dead_letter_queue)) {
    detail::post_handler(std::move(h), client_->get_executor(),
                         error_code(error::cluster_cross_slot), job_queue{});
    return;
  }
  detail::start_create_or_open_handle(*this, core_, s.to_fields(), std::move(h));
}

void job_queue::start_read_settings(handler<settings> h) {
  auto op = [](std::shared_ptr<detail::queue_core> core) -> asio::awaitable<op_result<settings>> {
    static constexpr std::string_view fields[] = {job_config::claim_timeout_ms,
                                                  job_config::result_ttl_ms,
                                                  job_config::published,
                                                  job_config::max_retries,
                                                  job_config::max_stalls,
                                                  job_config::min_backoff_ms,
                                                  job_config::max_backoff_ms,
                                                  job_config::dead_letter_queue,
                                                  job_config::events,
                                                  job_config::rate_limit,
                                                  job_config::paused};
    auto [st, values] = co_await core->read_fields({std::begin(fields), std::end(fields)});
    if (st) co_return std::tuple{std::move(st), settings{}};
    feed_config set;
    for (std::size_t i = 0; i < values.size(); ++i)
      if (values[i]) set.emplace_back(std::string(fields[i]), std::move(*values[i]));
    co_return std::tuple{op_status{}, settings::from_fields(set)};
  };
  detail::spawn_op(client_->get_executor(), op(core_), std::move(h));
}

// ---- claims and the claimed job's operations --------------------------------------

void job_queue::start_claim(std::chrono::milliseconds timeout, handler<claimed_job> h) {
  // No coroutine per claim: the waiter holds h (a job claimed ahead is
  // handed out at once).
  if (core_->name_ec) {
    detail::post_handler(std::move(h), client_->get_executor(), core_->name_ec, claimed_job{});
    return;
  }
  detail::impl_of(core_).claims->wait(timeout, std::move(h.handler), h.diag);
}

namespace detail {
namespace {

// What makes a finish fail before any I/O (start_finish,
// start_finish_and_claim).
error_code finish_problem(const job_queue_impl& impl, const claim_ref& claim,
                          const std::optional<std::string>& result) {
  if (auto ec = check_id(impl, claim.id)) return ec;
  if (result) return validate_item(impl.cl.get_config(), *result);
  return {};
}

// The batcher's handler for the caller's `h`: `fn(h, batcher's results...)`
// on h's executor, cancelled through h's slot.
template <class Handler, class Fn>
auto adapt_handler(Handler h, const asio::any_io_executor& ex, Fn fn) {
  auto slot = asio::get_associated_cancellation_slot(h);
  auto hex = asio::get_associated_executor(h, ex);
  return asio::bind_cancellation_slot(
      slot, asio::bind_executor(hex, [h = std::move(h), fn = std::move(fn)](auto&&... r) mutable {
        fn(std::move(h), std::forward<decltype(r)>(r)...);
      }));
}

}  // namespace
}  // namespace detail

void job_queue::start_finish(claim_ref claim, std::optional<std::string> result, handler<> h) {
  // No coroutine per finish: the request goes straight to the batcher, whose
  // (status) result completes h. Validation fails before any I/O.
  const auto& ex = client_->get_executor();
  auto& impl = detail::impl_of(core_);
  if (auto invalid = detail::finish_problem(impl, claim, result)) {
    detail::post_handler(std::move(h), ex, invalid);
    return;
  }
  detail::finish_request req{std::move(claim.id), claim.token, std::move(result)};
  auto done = detail::adapt_handler(
      std::move(h.handler), ex,
      [](auto h, error_code ec, error_code status) { std::move(h)(ec ? ec : status); });
  impl.finishes->submit(std::move(req), std::move(done), h.diag);
}

void job_queue::start_finish_and_claim(claim_ref claim, std::optional<std::string> result,
                                       handler<claimed_job> h) {
  // As start_finish, with the next job (or queue_empty) in the completion.
  const auto& ex = client_->get_executor();
  auto& impl = detail::impl_of(core_);
  if (auto invalid = detail::finish_problem(impl, claim, result)) {
    detail::post_handler(std::move(h), ex, invalid, claimed_job{});
    return;
  }
  detail::finish_request req{std::move(claim.id), claim.token, std::move(result)};
  auto done = detail::adapt_handler(std::move(h.handler), ex,
                                    [](auto h, error_code ec, detail::finish_claim_outcome o) {
                                      if (!ec) ec = o.status;
                                      // Finished, but the queue had nothing to claim for this call.
                                      if (!ec && !o.next) ec = error::queue_empty;
                                      std::move(h)(ec, o.next ? std::move(*o.next) : claimed_job{});
                                    });
  impl.finish_claims->submit(std::move(req), std::move(done), h.diag);
}

void job_queue::start_cancel(claim_ref claim, handler<std::int64_t> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               claim_ref c) -> asio::awaitable<op_result<std::int64_t>> {
    std::vector<std::string> args{std::to_string(c.token), impl->wake_channel,
                                  detail::unix_ms_string()};
    auto [st, v] =
        co_await detail::job_script(impl, scripts::jobs_cancel(), std::move(c.id), std::move(args));
    co_return std::tuple{std::move(st), st ? std::int64_t{0} : as_int(v)};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_), std::move(claim)),
                   std::move(h));
}

void job_queue::start_stall(claim_ref claim, handler<> h) {
  std::vector<std::string> args{std::to_string(claim.token), detail::unix_ms_string(),
                                core_->wake_channel};
  detail::spawn_op(client_->get_executor(),
                   detail::job_script_status(detail::shared_impl(core_), scripts::jobs_stall(),
                                             std::move(claim.id), std::move(args)),
                   std::move(h));
}

void job_queue::start_heartbeat(claim_ref claim, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, claim_ref c) -> asio::awaitable<op_result<>> {
    std::vector<claim_ref> one{std::move(c)};
    auto [st, statuses] = co_await job_queue_impl::heartbeat_batch(impl, std::move(one));
    if (st) co_return std::tuple{std::move(st)};
    co_return std::tuple{op_status(statuses.at(0))};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_), std::move(claim)),
                   std::move(h));
}

void job_queue::start_heartbeat_many(std::vector<claim_ref> claims,
                                     handler<std::vector<error_code>> h) {
  detail::spawn_op(client_->get_executor(),
                   job_queue_impl::heartbeat_batch(detail::shared_impl(core_), std::move(claims)),
                   std::move(h));
}

// ---- any job ----------------------------------------------------------------------

void job_queue::start_retry(std::string id, handler<> h) {
  std::vector<std::string> args{detail::unix_ms_string(), core_->wake_channel};
  detail::spawn_op(client_->get_executor(),
                   detail::job_script_status(detail::shared_impl(core_), scripts::jobs_retry(),
                                             std::move(id), std::move(args)),
                   std::move(h));
}

void job_queue::start_retract(std::string id, handler<> h) {
  detail::spawn_op(client_->get_executor(),
                   detail::job_script_status(detail::shared_impl(core_), scripts::jobs_retract(),
                                             std::move(id), {}),
                   std::move(h));
}

void job_queue::start_failures(std::string id, handler<std::int64_t> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               std::string id) -> asio::awaitable<op_result<std::int64_t>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{op_status(ec), std::int64_t{0}};
    std::vector<std::string> args{"failures", std::move(id)};
    auto [st, v] = co_await impl->call(scripts::jobs_read(), std::move(args));
    co_return std::tuple{std::move(st), st ? std::int64_t{0} : as_int(v)};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_), std::move(id)),
                   std::move(h));
}

void job_queue::start_get_job(std::string id, handler<std::optional<job_info>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               std::string id) -> asio::awaitable<op_result<std::optional<job_info>>> {
    auto [st, v] = co_await detail::job_script(impl, scripts::jobs_inspect(), std::move(id), {});
    std::optional<job_info> out;
    if (st) co_return std::tuple{std::move(st), std::move(out)};
    auto jobs = detail::parse_jobs(std::move(v));
    if (!jobs.empty()) out = std::move(jobs.front());
    co_return std::tuple{op_status{}, std::move(out)};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_), std::move(id)),
                   std::move(h));
}

void job_queue::start_get_jobs(handler<std::vector<job_info>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl)
      -> asio::awaitable<op_result<std::vector<job_info>>> {
    if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), std::vector<job_info>{}};
    auto [st, v] = co_await impl->call(scripts::jobs_inspect(), {});
    if (st) co_return std::tuple{std::move(st), std::vector<job_info>{}};
    co_return std::tuple{op_status{}, detail::parse_jobs(std::move(v))};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_)), std::move(h));
}

void job_queue::start_get_ids(handler<std::vector<std::string>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl)
      -> asio::awaitable<op_result<std::vector<std::string>>> {
    auto [st, v] = co_await detail::read_query(std::move(impl), "ids");
    if (st) co_return std::tuple{std::move(st), std::vector<std::string>{}};
    co_return std::tuple{op_status{}, as_strings(std::move(v))};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_)), std::move(h));
}

void job_queue::start_counts(handler<job_counts> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl) -> asio::awaitable<op_result<job_counts>> {
    auto [st, v] = co_await detail::read_query(std::move(impl), "counts");
    job_counts c;
    if (st) co_return std::tuple{std::move(st), c};
    if (!detail::parse_counts(v, c)) co_return std::tuple{op_status(error::unexpected_type), c};
    co_return std::tuple{op_status{}, c};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_)), std::move(h));
}

// ---- results ----------------------------------------------------------------------

void job_queue::start_subscribe_finished(std::function<void(const job_finished&)> on_finished,
                                         handler<subscription> h) {
  auto& impl = detail::impl_of(core_);
  detail::subscribe_split<job_finished>(*client_, impl, impl.finish_channel, &detail::split_finish,
                                        std::move(on_finished), std::move(h));
}

void job_queue::start_get_result(std::string id, std::chrono::milliseconds timeout,
                                 handler<std::string> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string id,
               std::chrono::milliseconds timeout) -> asio::awaitable<op_result<std::string>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{op_status(ec), std::string{}};
    if (impl->closed)
      co_return std::tuple{op_status(asio::error::operation_aborted), std::string{}};
    const auto deadline = timeout == std::chrono::milliseconds::max()
                              ? clock_type::time_point::max()
                              : clock_type::now() + std::max(timeout, std::chrono::milliseconds(0));
    auto p = std::make_shared<pending<std::string>>(impl->cl.get_executor());
    impl->track(p);

    // 1. Listen on job.finish (so a finish from now on is seen), 2. read the
    // stored result (a finish before now), 3. re-read every poll interval
    // (a message lost in a subscriber reconnect).
    auto cb = [p, id](const message& m) {
      job_finished ev;
      if (!detail::split_finish(m.payload, ev) || ev.id != id) return;
      p->complete({}, std::move(ev.result));
    };
    // Waiting for the subscription is bounded (a subscriber that cannot
    // connect, or may not subscribe, must not hold the caller): without it
    // we still poll.
    subscription sub;
    {
      using namespace asio::experimental::awaitable_operators;
      auto soon = clock_type::now() + std::chrono::seconds(1);
      asio::steady_timer limit(impl->cl.get_executor(), std::min(deadline, soon));
      auto r = co_await (detail::subscribe_notifications(impl->cl, impl->finish_channel,
                                                         std::move(cb), use_nothrow) ||
                         limit.async_wait(use_nothrow));
      if (r.index() == 0) sub = std::move(std::get<1>(std::get<0>(r)));
    }
    const std::string key = impl->names.job_result_key(id);
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
      eo.timeout =
          std::clamp(left, std::chrono::milliseconds(1000), std::chrono::milliseconds(60000));
      auto [ec, resp] = co_await detail::exec_co(impl->cl, req, key, eo);
      if (p->done) break;
      if (ec) co_return std::tuple{op_status(ec), std::string{}};
      if (!resp.empty() && resp[0].is_error())
        co_return std::tuple{detail::reply_status(resp[0]), std::string{}};
      if (!resp.empty() && resp[0].is_string())
        co_return std::tuple{op_status{}, std::move(resp[0].str)};
      auto now = clock_type::now();
      if (now >= deadline) co_return std::tuple{op_status(error::result_timeout), std::string{}};
      auto next =
          deadline - now > impl->opts.poll_interval ? now + impl->opts.poll_interval : deadline;
      p->timer.expires_at(next);
      auto [wec] = co_await p->timer.async_wait(use_nothrow);
      if (p->done) break;
      if (wec) co_return std::tuple{op_status(asio::error::operation_aborted), std::string{}};
    }
    co_return std::tuple{op_status(p->ec), std::move(p->value)};
  };
  detail::spawn_op(client_->get_executor(), op(detail::shared_impl(core_), std::move(id), timeout),
                   std::move(h));
}

// ---- maintenance ------------------------------------------------------------------

void job_queue::start_maintain(maintenance_options opts, handler<maintenance_report> h) {
  detail::spawn_op(client_->get_executor(),
                   job_queue_impl::maintain(detail::shared_impl(core_), std::move(opts)),
                   std::move(h));
}

void job_queue::start_run_maintenance(std::chrono::milliseconds interval, maintenance_options opts,
                                      handler<> h) {
  detail::spawn_op(
      client_->get_executor(),
      job_queue_impl::run_maintenance(detail::shared_impl(core_), interval, std::move(opts)),
      std::move(h));
}

}  // namespace thoonk
