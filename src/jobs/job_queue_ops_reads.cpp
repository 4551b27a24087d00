// thoonk::job_queue's reads of any job and of the queue: failures,
// get_job, get_jobs, get_ids, counts (jobs/read.lua, jobs/inspect.lua).
#include "jobs/job_queue_ops.hpp"

namespace thoonk {

namespace detail {
namespace {

// jobs/read.lua's queries without an id ('ids', 'counts').
asio::awaitable<op_result<resp3::value>> read_query(std::shared_ptr<job_queue_impl> impl,
                                                    std::string what) {
  if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), resp3::value{}};
  std::vector<std::string> args{std::move(what)};
  co_return co_await impl->call(scripts::jobs_read(), std::move(args));
}

}  // namespace
}  // namespace detail

void job_queue::start_failures(std::string id, handler<std::int64_t> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl,
               std::string id) -> asio::awaitable<op_result<std::int64_t>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{op_status(ec), std::int64_t{0}};
    std::vector<std::string> args{"failures", std::move(id)};
    auto [st, v] = co_await impl->call(scripts::jobs_read(), std::move(args));
    co_return std::tuple{std::move(st), st ? std::int64_t{0} : as_int(v)};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(id)), std::move(h));
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
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(id)), std::move(h));
}

void job_queue::start_get_jobs(handler<std::vector<job_info>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl)
      -> asio::awaitable<op_result<std::vector<job_info>>> {
    if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), std::vector<job_info>{}};
    auto [st, v] = co_await impl->call(scripts::jobs_inspect(), {});
    if (st) co_return std::tuple{std::move(st), std::vector<job_info>{}};
    co_return std::tuple{op_status{}, detail::parse_jobs(std::move(v))};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_)), std::move(h));
}

void job_queue::start_get_ids(handler<std::vector<std::string>> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl)
      -> asio::awaitable<op_result<std::vector<std::string>>> {
    auto [st, v] = co_await detail::read_query(std::move(impl), "ids");
    if (st) co_return std::tuple{std::move(st), std::vector<std::string>{}};
    co_return std::tuple{op_status{}, as_strings(std::move(v))};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_)), std::move(h));
}

void job_queue::start_counts(handler<job_counts> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl) -> asio::awaitable<op_result<job_counts>> {
    auto [st, v] = co_await detail::read_query(std::move(impl), "counts");
    job_counts c;
    if (st) co_return std::tuple{std::move(st), c};
    if (!detail::parse_counts(v, c)) co_return std::tuple{op_status(error::unexpected_type), c};
    co_return std::tuple{op_status{}, c};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_)), std::move(h));
}

}  // namespace thoonk
