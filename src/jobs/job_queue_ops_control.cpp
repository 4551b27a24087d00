// Queue control on thoonk::job_queue (docs/jobs.md §12): abort a claimed
// job from any client, progress reports of the claim holder, pause and
// resume, retry and retract of any job. The decisions live in the scripts (jobs/abort.lua,
// progress.lua, pause.lua, resume.lua and includes/claim_control.lua claim_allowance, which every
// claim script calls); this is their I/O.
#include "jobs/job_queue_ops.hpp"

namespace thoonk {
namespace detail {
namespace {

// A `job.abort` payload is the job id; an empty one is malformed.
bool split_abort(std::string_view payload, std::string& out) {
  if (payload.empty()) return false;
  out.assign(payload);
  return true;
}

// A queue-wide script (no id): the status only.
boost::asio::awaitable<op_result<>> queue_script(std::shared_ptr<job_queue_impl> impl,
                                                 const script& s, std::vector<std::string> args) {
  if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec)};
  auto [st, v] = co_await impl->call(s, std::move(args));
  co_return std::tuple{std::move(st)};
}

}  // namespace
}  // namespace detail

void job_queue::start_abort(std::string id, abort_options o, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string id,
               abort_options o) -> boost::asio::awaitable<op_result<>> {
    if (auto ec = detail::check_id(*impl, id)) co_return std::tuple{op_status(ec)};
    if (auto ec = detail::validate_item(impl->cl.get_config(), o.error))
      co_return std::tuple{op_status(ec)};
    const bool failed = o.outcome == abort_options::outcome_t::failed;
    std::vector<std::string> args;
    args.reserve(9);
    args.push_back(std::move(id));
    args.push_back(detail::unix_ms_string());
    args.push_back(failed ? "failed" : "cancelled");
    args.push_back(failed ? std::move(o.error) : std::string{});
    args.push_back(o.permanent ? "1" : "0");
    args.push_back(std::to_string(detail::backoff_jitter()));
    args.push_back(impl->wake_channel);
    auto [st, v] = co_await impl->call_with_dlq(scripts::jobs_abort(), std::move(args), {});
    if (st) co_return std::tuple{std::move(st)};
    if (v.elements.size() != 1 || v.elements[0].str != "ok")
      co_return std::tuple{op_status(error::unexpected_type)};
    co_return std::tuple{op_status{}};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(id), std::move(o)),
                   std::move(h));
}

void job_queue::start_progress(claim_ref claim, std::string text, handler<> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, claim_ref c,
               std::string text) -> boost::asio::awaitable<op_result<>> {
    if (auto ec = detail::validate_item(impl->cl.get_config(), text))
      co_return std::tuple{op_status(ec)};
    std::vector<std::string> args{std::to_string(c.token), std::move(text)};
    co_return co_await detail::job_script_status(impl, scripts::jobs_progress(), std::move(c.id),
                                                 std::move(args));
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(claim), std::move(text)),
                   std::move(h));
}

void job_queue::start_subscribe_aborts(std::function<void(const std::string&)> on_abort,
                                       handler<subscription> h) {
  auto& impl = detail::impl_of(core_);
  detail::subscribe_split<std::string>(*client_core_, impl,
                                       detail::jobs::job_keys(impl.names).abort_channel,
                                       &detail::split_abort, std::move(on_abort), std::move(h));
}

// pause and resume change the config: announced on conffeed as
// client::set_config does (`name\0instance uuid`).
void job_queue::start_pause(handler<> h) {
  std::vector<std::string> args{core_->names.name(), client_core_->instance_id(),
                                std::string(detail::conffeed_channel)};
  detail::spawn_op(
      client_core_->get_executor(),
      detail::queue_script(detail::shared_impl(core_), scripts::jobs_pause(), std::move(args)),
      std::move(h));
}

void job_queue::start_resume(handler<> h) {
  std::vector<std::string> args{core_->wake_channel, core_->names.name(),
                                client_core_->instance_id(), std::string(detail::conffeed_channel)};
  detail::spawn_op(
      client_core_->get_executor(),
      detail::queue_script(detail::shared_impl(core_), scripts::jobs_resume(), std::move(args)),
      std::move(h));
}

// Any job: retry a failed or dead one, retract one.
void job_queue::start_retry(std::string id, handler<> h) {
  std::vector<std::string> args{detail::unix_ms_string(), core_->wake_channel};
  detail::spawn_op(client_core_,
                   detail::job_script_status(detail::shared_impl(core_), scripts::jobs_retry(),
                                             std::move(id), std::move(args)),
                   std::move(h));
}

void job_queue::start_retract(std::string id, handler<> h) {
  detail::spawn_op(client_core_,
                   detail::job_script_status(detail::shared_impl(core_), scripts::jobs_retract(),
                                             std::move(id), {}),
                   std::move(h));
}

}  // namespace thoonk
