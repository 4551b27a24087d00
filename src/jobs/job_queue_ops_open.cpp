// thoonk::job_queue's handles and settings: making a handle, open,
// create_or_open and read_settings, and the settings' conversion to and
// from the queue's config fields.
#include "jobs/job_queue_ops.hpp"

namespace thoonk {

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
    : queue_base(detail::make_job_queue(detail::client_access::core(c), name, std::move(opts))) {}

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
    detail::post_handler(std::move(h), client_core_->get_executor(),
                         error_code(error::invalid_argument), job_queue{});
    return;
  }
  if (s.dead_letter_queue && detail::impl_of(core_).other_slot(*s.dead_letter_queue)) {
    detail::post_handler(std::move(h), client_core_->get_executor(),
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
  detail::spawn_op(client_core_, op(core_), std::move(h));
}

}  // namespace thoonk
