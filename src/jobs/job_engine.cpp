// The job engine's operations on thoonk::job_queue (docs/jobs.md): puts
// with options (scheduling, de-duplication by id, held puts), fail with
// retries and dead letters, listings, typed job events. The decisions live
// in the scripts (src/lua/includes/: schedule, hold, retry, dead_letter); this is their I/O.
#include <thoonk/job_queue.hpp>

#include "detail/parse_int.hpp"
#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "feeds/common.hpp"
#include "jobs/job_queue_impl.hpp"
#include "jobs/time_limits.hpp"
#include "thoonk_lua_scripts.hpp"

#include <boost/json.hpp>

#include <array>
#include <random>

namespace thoonk {
namespace detail {
namespace {

namespace asio = boost::asio;
using boost::system::error_code;
using jobs::as_int;

constexpr std::int64_t max_exact = jobs::max_time_ms;  // 2^53 - 1: what Lua holds exactly

std::optional<std::int64_t> opt_int(const std::string& s) { return parse_int<std::int64_t>(s); }

std::optional<std::chrono::milliseconds> opt_ms(const std::string& s) {
  if (auto v = opt_int(s)) return std::chrono::milliseconds(*v);
  return std::nullopt;
}

// The update flags as the scripts read them: four letters.
std::string flag_letters(const update_flags& f) {
  std::string s = "raRk";
  s[0] = f.data == update_flags::data_mode::keep ? 'k' : 'r';
  switch (f.run_at) {
    case update_flags::run_at_mode::always: s[1] = 'a'; break;
    case update_flags::run_at_mode::if_later: s[1] = 'l'; break;
    case update_flags::run_at_mode::if_earlier: s[1] = 'e'; break;
    case update_flags::run_at_mode::never: s[1] = 'n'; break;
  }
  s[2] = f.strategy == update_flags::strategy_mode::keep ? 'k' : 'r';
  s[3] = f.counters == update_flags::counters_mode::reset ? 'r' : 'k';
  return s;
}

update_flags parse_flag_letters(const boost::json::object& f) {
  update_flags out;
  auto letter = [&](const char* key) -> char {
    auto* v = f.if_contains(key);
    return v && v->is_string() && !v->as_string().empty() ? v->as_string()[0] : ' ';
  };
  if (letter("d") == 'k') out.data = update_flags::data_mode::keep;
  switch (letter("ra")) {
    case 'l': out.run_at = update_flags::run_at_mode::if_later; break;
    case 'e': out.run_at = update_flags::run_at_mode::if_earlier; break;
    case 'n': out.run_at = update_flags::run_at_mode::never; break;
    default: break;
  }
  if (letter("s") == 'k') out.strategy = update_flags::strategy_mode::keep;
  if (letter("c") == 'r') out.counters = update_flags::counters_mode::reset;
  return out;
}

// A held put as the scripts store it (JSON: d item, ra run_at, f flags).
std::optional<held_put> parse_held(const std::string& text) {
  if (text.empty()) return std::nullopt;
  boost::system::error_code ec;
  auto jv = boost::json::parse(text, ec);
  if (ec || !jv.is_object()) return std::nullopt;
  const auto& o = jv.as_object();
  held_put h;
  if (auto* d = o.if_contains("d"); d && d->is_string()) h.item = std::string(d->as_string());
  if (auto* ra = o.if_contains("ra"); ra && ra->is_number())
    h.run_at = int_of_double(ra->to_number<double>()).value_or(0);
  if (auto* f = o.if_contains("f"); f && f->is_object())
    h.update = parse_flag_letters(f->as_object());
  return h;
}

// Why a retry strategy would be refused, or empty.
std::string strategy_problem(const retry_strategy& r) {
  auto out_of = [](std::int64_t v, std::int64_t lo) { return v < lo || v > max_exact; };
  if (r.max_retries && out_of(*r.max_retries, 1)) return "max_retries must be at least 1";
  if (r.max_stalls && out_of(*r.max_stalls, 1)) return "max_stalls must be at least 1";
  if (r.min_backoff && out_of(r.min_backoff->count(), 0)) return "min_backoff must not be negative";
  if (r.max_backoff && out_of(r.max_backoff->count(), 0)) return "max_backoff must not be negative";
  if (r.min_backoff && r.max_backoff && *r.max_backoff < *r.min_backoff)
    return "max_backoff must not be less than min_backoff";
  return {};
}

std::string opt_string(const std::optional<std::int64_t>& v) {
  return v ? std::to_string(*v) : std::string{};
}

std::string opt_string(const std::optional<std::chrono::milliseconds>& v) {
  return v ? std::to_string(v->count()) : std::string{};
}

constexpr std::array<std::string_view, 12> event_names = {
    "put",     "updated",       "held",     "claimed",  "finished", "failed", "retry_scheduled",
    "stalled", "dead_lettered", "promoted", "progress", "aborted"};

// Splits a `job.event` payload, `kind\0id\0detail`; false when malformed.
bool split_event(std::string_view payload, job_event& out) {
  const auto a = payload.find('\0');
  if (a == std::string_view::npos) return false;
  const auto b = payload.find('\0', a + 1);
  if (b == std::string_view::npos || b == a + 1) return false;
  const auto kind = payload.substr(0, a);
  for (std::size_t i = 0; i < event_names.size(); ++i) {
    if (event_names[i] != kind) continue;
    out.kind = static_cast<job_event::kind_t>(i);
    out.id.assign(payload.substr(a + 1, b - a - 1));
    out.detail.assign(payload.substr(b + 1));
    return true;
  }
  return false;
}

}  // namespace

double backoff_jitter() {
  thread_local std::mt19937_64 gen{std::random_device{}()};
  return std::uniform_real_distribution<double>(0.0, 1.0)(gen);
}

boost::asio::awaitable<op_result<fail_result>> job_queue_impl::fail_job(
    std::shared_ptr<job_queue_impl> self, claim_ref c, std::string text, fail_options o,
    std::string worker) {
  fail_result r;
  if (auto ec = check_id(*self, c.id)) co_return std::tuple{op_status(ec), r};
  if (auto ec = validate_item(self->cl.get_config(), text)) co_return std::tuple{op_status(ec), r};
  if (!jobs::time_in_range(o.retry_at)) co_return std::tuple{op_status(error::invalid_argument), r};
  std::vector<std::string> args;
  args.reserve(12);
  args.push_back(std::move(c.id));
  args.push_back(std::to_string(c.token));
  args.push_back(unix_ms_string());
  args.push_back(std::move(text));
  args.push_back(o.retry_at ? std::to_string(*o.retry_at) : std::string{});
  args.push_back(o.permanent ? "1" : "0");
  args.push_back(std::to_string(backoff_jitter()));
  args.push_back(self->wake_channel);
  // call_with_dlq appends the dead-letter queue's name and wake channel
  // (ARGV 9, 10); the worker follows as ARGV 11.
  std::vector<std::string> after;
  if (!worker.empty()) after.push_back(worker);
  auto [st, v] =
      co_await self->call_with_dlq(scripts::jobs_fail(), std::move(args), std::move(after));
  if (st) co_return std::tuple{std::move(st), r};
  if (v.elements.size() != 3) co_return std::tuple{op_status(error::unexpected_type), r};
  r.outcome = v.elements[0].str == "dead" ? fail_result::outcome_t::dead_lettered
                                          : fail_result::outcome_t::retry_scheduled;
  r.run_at = as_int(v.elements[1]);
  r.retry_count = as_int(v.elements[2]);
  co_return std::tuple{op_status{}, r};
}

job_info parse_job(resp3::value* g) {
  job_info j;
  j.id = std::move(g[0].str);
  j.item = std::move(g[1].str);
  const auto& s = g[2].str;
  j.state = s == "claimed"     ? job_state::claimed
            : s == "stalled"   ? job_state::stalled
            : s == "scheduled" ? job_state::scheduled
                               : job_state::waiting;
  j.failures = as_int(g[3]);
  j.run_at = as_int(g[4]);
  j.retry_count = as_int(g[5]);
  j.stall_count = as_int(g[6]);
  j.retry.max_retries = opt_int(g[7].str);
  j.retry.max_stalls = opt_int(g[8].str);
  j.retry.min_backoff = opt_ms(g[9].str);
  j.retry.max_backoff = opt_ms(g[10].str);
  j.last_error = std::move(g[11].str);
  j.held = parse_held(g[12].str);
  j.progress = std::move(g[13].str);
  return j;
}

}  // namespace detail

using detail::job_queue_impl;
using detail::op_result;
using detail::op_status;
namespace scripts = detail::scripts;

std::string_view to_string(job_event::kind_t k) noexcept {
  const auto i = static_cast<std::size_t>(k);
  return i < detail::event_names.size() ? detail::event_names[i] : std::string_view("unknown");
}

void job_queue::start_put_with_options(std::string item, put_options o, handler<put_result> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string item,
               put_options o) -> boost::asio::awaitable<op_result<put_result>> {
    put_result r;
    if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), r};
    const auto& cfg = impl->cl.get_config();
    if (o.id)
      if (auto ec = detail::validate_id(cfg, *o.id)) co_return std::tuple{op_status(ec), r};
    if (auto ec = detail::validate_item(cfg, item)) co_return std::tuple{op_status(ec), r};
    if (o.retry && !detail::strategy_problem(*o.retry).empty())
      co_return std::tuple{op_status(error::invalid_argument), r};
    const epoch_ms now = now_epoch_ms();
    // run_at, delay and now + delay within what a Lua number holds exactly.
    const auto run_at = detail::jobs::put_run_at(now, o.run_at, o.delay);
    if (!run_at) co_return std::tuple{op_status(error::invalid_argument), r};
    std::vector<std::string> args;
    args.reserve(12);
    args.push_back(std::to_string(now));
    args.push_back(impl->wake_channel);
    args.push_back(o.id.value_or(std::string{}));
    args.push_back(std::move(item));
    args.push_back(std::to_string(*run_at));
    args.push_back(detail::flag_letters(o.update));
    args.push_back(o.high_priority ? "1" : "0");
    args.push_back(o.retry ? "1" : "0");
    const retry_strategy s = o.retry.value_or(retry_strategy{});
    args.push_back(detail::opt_string(s.max_retries));
    args.push_back(detail::opt_string(s.max_stalls));
    args.push_back(detail::opt_string(s.min_backoff));
    args.push_back(detail::opt_string(s.max_backoff));
    auto [st, v] = co_await impl->call(scripts::jobs_put_with_options(), std::move(args));
    if (st) co_return std::tuple{std::move(st), r};
    if (v.elements.size() != 2) co_return std::tuple{op_status(error::unexpected_type), r};
    r.id = std::move(v.elements[0].str);
    const auto& what = v.elements[1].str;
    r.outcome = what == "held"      ? put_result::outcome_t::held
                : what == "updated" ? put_result::outcome_t::updated
                                    : put_result::outcome_t::added;
    co_return std::tuple{op_status{}, std::move(r)};
  };
  detail::spawn_op(client_core_, op(detail::shared_impl(core_), std::move(item), std::move(o)),
                   std::move(h));
}

void job_queue::start_fail(claim_ref claim, std::string error_text, fail_options o,
                           handler<fail_result> h) {
  detail::spawn_op(client_core_,
                   job_queue_impl::fail_job(detail::shared_impl(core_), std::move(claim),
                                            std::move(error_text), std::move(o), std::string{}),
                   std::move(h));
}

void job_queue::start_list(std::string which, std::string cursor, std::size_t count,
                           handler<job_page> h) {
  auto op = [](std::shared_ptr<job_queue_impl> impl, std::string which, std::string cursor,
               std::size_t count) -> boost::asio::awaitable<op_result<job_page>> {
    job_page page;
    if (impl->name_ec) co_return std::tuple{op_status(impl->name_ec), std::move(page)};
    std::vector<std::string> args{std::move(which), std::move(cursor),
                                  std::to_string(detail::jobs::clamp_batch(count))};
    auto [st, v] = co_await impl->call(scripts::jobs_list(), std::move(args));
    if (st) co_return std::tuple{std::move(st), std::move(page)};
    if (v.elements.empty() || (v.elements.size() - 1) % 14 != 0)
      co_return std::tuple{op_status(error::unexpected_type), std::move(page)};
    page.next = std::move(v.elements[0].str);
    page.jobs = detail::parse_jobs(std::move(v), 1);
    co_return std::tuple{op_status{}, std::move(page)};
  };
  detail::spawn_op(client_core_,
                   op(detail::shared_impl(core_), std::move(which), std::move(cursor), count),
                   std::move(h));
}

void job_queue::start_subscribe_events(std::function<void(const job_event&)> on_event,
                                       handler<subscription> h) {
  auto& impl = detail::impl_of(core_);
  detail::subscribe_split<job_event>(*client_core_, impl,
                                     detail::jobs::job_keys(impl.names).event_channel,
                                     &detail::split_event, std::move(on_event), std::move(h));
}

}  // namespace thoonk
