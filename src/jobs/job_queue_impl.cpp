// job_queue_impl: the state behind a thoonk::job_queue handle (claim and
// finish batchers, the claim hand-off, the dead-letter queue's slot) and the
// helpers its operations share. The handle's operations are in
// job_queue_ops_*.cpp, the runner in runner/, maintenance in maintenance.cpp.
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

job_queue_impl::job_queue_impl(std::shared_ptr<client_core> c, std::string_view name,
                               job_queue_options o)
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

std::shared_ptr<queue_core> make_job_queue(const std::shared_ptr<client_core>& c,
                                           std::string_view name, job_queue_options o) {
  auto impl = std::make_shared<job_queue_impl>(c, name, std::move(o));
  impl->init();
  return impl;
}

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
}  // namespace detail
}  // namespace thoonk
