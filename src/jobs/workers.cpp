// The worker registry on thoonk::job_queue (docs/jobs.md "Workers and the
// runner", worker liveness): listing the workers and failing one on demand. The
// decisions live in the scripts (jobs/get_workers.lua, jobs/fail_worker.lua
// and the registry functions of includes/workers.lua); this is their I/O.
// job_queue::run (jobs/runner/) registers, renews and removes workers.
#include <thoonk/job_queue.hpp>

#include "detail/spawn.hpp"
#include "jobs/job_queue_impl.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/json/parse.hpp>

namespace thoonk {
namespace detail {

namespace asio = boost::asio;

boost::system::error_code validate_worker_name(const config& cfg, std::string_view name) {
  // Worker names sit in the registry's members (`worker\0id\0token`): the
  // rules of ids (no NUL, bounded) keep those unambiguous.
  if (name.size() > 200) return error::invalid_name;
  if (validate_id(cfg, name)) return error::invalid_name;
  return {};
}

asio::awaitable<op_result<job_queue_impl::fail_worker_result>> job_queue_impl::fail_workers(
    std::shared_ptr<job_queue_impl> self, std::string name, std::size_t batch) {
  fail_worker_result r;
  std::vector<std::string> args{std::to_string(jobs::clamp_batch(batch)), self->wake_channel};
  // (No temporaries in the co_await expression: g++ 12 mishandles them.)
  std::vector<std::string> after;
  if (!name.empty()) after.push_back(std::move(name));
  auto call = self->call_with_dlq(scripts::jobs_fail_worker(), std::move(args), std::move(after));
  auto [st, v] = co_await std::move(call);
  if (st) co_return std::tuple{std::move(st), r};
  if (v.elements.size() != 3) co_return std::tuple{op_status(error::unexpected_type), r};
  r.workers = jobs::as_int(v.elements[0]);
  r.requeued = jobs::as_int(v.elements[1]);
  r.dead_lettered = jobs::as_int(v.elements[2]);
  co_return std::tuple{op_status{}, r};
}

}  // namespace detail

namespace asio = boost::asio;
using detail::job_queue_impl;
using detail::op_result;
using detail::op_status;

void job_queue::start_get_workers(handler<std::vector<worker_info>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl)
      -> asio::awaitable<op_result<std::vector<worker_info>>> {
    std::vector<worker_info> out;
    if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), std::move(out)};
    auto [st, v] = co_await impl->call(detail::scripts::jobs_get_workers(), {});
    if (st) co_return std::tuple{std::move(st), std::move(out)};
    auto& e = v.elements;
    if (e.empty()) co_return std::tuple{op_status(error::unexpected_type), std::move(out)};
    const auto now = detail::jobs::as_int(e[0]);
    // Per worker: name, lapses_at, description, n, then n id/token pairs.
    std::size_t i = 1;
    while (i + 3 < e.size()) {
      worker_info w;
      w.name = std::move(e[i].str);
      w.lapses_at = detail::jobs::as_int(e[i + 1]);
      w.server_now = now;
      w.description = std::move(e[i + 2].str);
      const auto n =
          static_cast<std::size_t>(std::max<std::int64_t>(0, detail::jobs::as_int(e[i + 3])));
      i += 4;
      if (i + 2 * n > e.size())
        co_return std::tuple{op_status(error::unexpected_type), std::vector<worker_info>{}};
      for (std::size_t k = 0; k < n; ++k, i += 2)
        w.claims.push_back(claim_ref(std::move(e[i].str), detail::jobs::as_int(e[i + 1])));
      // The description carries the time to live the worker registered with.
      boost::system::error_code jec;
      auto j = boost::json::parse(w.description, jec);
      if (!jec && j.is_object()) {
        if (auto* ttl = j.as_object().if_contains("ttl_ms"); ttl && ttl->is_int64())
          w.last_heartbeat = w.lapses_at - ttl->as_int64();
      }
      out.push_back(std::move(w));
    }
    co_return std::tuple{op_status{}, std::move(out)};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_)), std::move(h));
}

void job_queue::start_fail_worker(std::string name, handler<std::int64_t> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               std::string name) -> asio::awaitable<op_result<std::int64_t>> {
    if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), std::int64_t{0}};
    if (name.empty() || detail::validate_worker_name(impl->cl.get_config(), name))
      co_return std::tuple{op_status(error::invalid_name), std::int64_t{0}};
    auto [st, r] = co_await job_queue_impl::fail_workers(impl, std::move(name), 1);
    if (st) co_return std::tuple{std::move(st), std::int64_t{0}};
    if (r.workers == 0) co_return std::tuple{op_status(error::worker_not_found), std::int64_t{0}};
    co_return std::tuple{op_status{}, r.requeued + r.dead_lettered};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(name)), std::move(h));
}

}  // namespace thoonk
