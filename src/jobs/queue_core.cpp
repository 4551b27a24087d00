// What queue and job_queue share: the handle (detail::queue_base), puts,
// put_many, wake-ups, open and create-or-open.
#include "jobs/queue_core.hpp"

#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "feeds/common.hpp"

#include <thoonk/detail/queue_base.hpp>

#include <array>

namespace thoonk::detail {

using namespace jobs;  // NOLINT

queue_core::queue_core(std::shared_ptr<client_core> c, std::string_view name,
                       const queue_kind& kind, const queue_options_base& o)
    : client(std::move(c)),
      cl(*client),
      name_ec(validate_name(cl.get_config(), name)),
      names(cl.get_config(), name),
      type(kind.type),
      keys(kind.layout(names)),
      wake_channel(names.channel("wake")),
      put_script(kind.put_script()),
      max_put_batch(clamp_batch(o.max_put_batch)),
      max_puts_in_flight(o.max_puts_in_flight) {}

void queue_core::init_puts() {
  std::weak_ptr<queue_core> weak = weak_from_this();
  for (int high = 0; high < 2; ++high) {
    puts[high] = std::make_shared<batcher<std::string, put_result>>(
        cl.get_executor(), max_put_batch, max_puts_in_flight,
        [weak, high](std::vector<std::string> items) {
          return put_results(put_batch(weak.lock(), high != 0, std::move(items)));
        });
  }
}

void queue_core::close() {
  if (closed) return;
  closed = true;
  for (auto& p : puts) p->close(asio::error::operation_aborted);
  wake.close();
}

asio::awaitable<op_status> queue_core::ensure_wake(std::chrono::milliseconds max_wait) {
  std::weak_ptr<queue_core> weak = weak_from_this();
  return wake.ensure(
      cl, wake_channel,
      [weak] {
        if (auto self = weak.lock()) self->poke();
      },
      max_wait);
}

asio::awaitable<op_status> queue_core::open() {
  if (name_ec) co_return name_ec;
  request req;
  push_type_check(req, names);
  auto [st, resp] = co_await exec_checked(cl, names, req, type);
  if (st) co_return std::move(st);
  co_return co_await ensure_wake(std::chrono::milliseconds::max());
}

asio::awaitable<op_status> queue_core::create_or_open(feed_config fields) {
  if (name_ec) co_return name_ec;
  // Refused before any I/O (create_or_open_feed checks again on its side).
  for (const auto& [f, v] : fields)
    if (auto r = validate_config_field(f, v)) co_return r.ec;
  diagnostics diag;
  auto [st, created] = co_await create_or_open_feed(cl, names.name(), type, std::move(fields));
  if (st) co_return std::move(st);
  co_return co_await ensure_wake(std::chrono::milliseconds::max());
}

asio::awaitable<op_result<std::vector<std::optional<std::string>>>> queue_core::read_fields(
    std::vector<std::string_view> fields) {
  std::vector<std::optional<std::string>> out;
  if (name_ec) co_return std::tuple{op_status(name_ec), std::move(out)};
  request req;
  push_type_check(req, names);
  const std::string config_key = names.key("config");
  std::array<std::string_view, 1> head{config_key};
  if (!fields.empty()) req.push_range("HMGET", head, fields);
  auto [st, resp] = co_await exec_checked(cl, names, req, type);
  if (st) co_return std::tuple{std::move(st), std::move(out)};
  if (fields.empty()) co_return std::tuple{op_status{}, std::move(out)};
  if (resp.size() < 2 || resp[1].elements.size() != fields.size())
    co_return std::tuple{op_status(error::unexpected_type), std::move(out)};
  out.reserve(fields.size());
  for (const auto& v : resp[1].elements) out.push_back(as_opt_string(v));
  co_return std::tuple{op_status{}, std::move(out)};
}

asio::awaitable<op_result<std::vector<put_result>>> queue_core::put_results(
    asio::awaitable<op_result<std::vector<std::string>>> ids) {
  auto [st, v] = co_await std::move(ids);
  std::vector<put_result> out;
  out.reserve(v.size());
  for (auto& id : v) out.push_back(put_result{std::move(id), put_result::added});
  co_return std::tuple{std::move(st), std::move(out)};
}

asio::awaitable<op_result<std::vector<std::string>>> queue_core::put_batch(
    std::shared_ptr<queue_core> self, bool high, std::vector<std::string> items) {
  if (!self)
    co_return std::tuple{op_status(asio::error::operation_aborted), std::vector<std::string>{}};
  const std::size_t n = items.size();
  std::vector<std::string> args;
  args.reserve(n + 3);
  args.push_back(unix_ms_string());
  args.push_back(high ? "1" : "0");
  args.push_back(self->wake_channel);
  for (auto& i : items) args.push_back(std::move(i));
  auto [st, v] = co_await run_script(self->cl, self->put_script, self->keys, std::move(args));
  if (st) co_return std::tuple{std::move(st), std::vector<std::string>{}};
  auto ids = as_strings(std::move(v));
  if (ids.size() != n) co_return std::tuple{op_status(error::unexpected_type), std::move(ids)};
  co_return std::tuple{op_status{}, std::move(ids)};
}

asio::awaitable<op_result<std::vector<std::string>>> queue_core::put_many(
    std::shared_ptr<queue_core> self, std::vector<std::string> items, priority p) {
  std::vector<std::string> ids;
  if (self->name_ec) co_return std::tuple{op_status(self->name_ec), std::move(ids)};
  for (const auto& i : items)
    if (auto ec = validate_item(self->cl.get_config(), i))
      co_return std::tuple{op_status(ec), std::move(ids)};
  const bool high = p == priority::high;
  const std::size_t chunk = self->max_put_batch;
  const std::size_t nchunks = (items.size() + chunk - 1) / chunk;
  std::vector<std::vector<std::string>> per_chunk(nchunks);
  // High priority: the last chunk goes first, so the first item ends up
  // next out.
  op_status failed;
  for (std::size_t c = 0; c < nchunks && !failed; ++c) {
    const std::size_t idx = high ? nchunks - 1 - c : c;
    auto first = items.begin() + static_cast<std::ptrdiff_t>(idx * chunk);
    auto last =
        items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), (idx + 1) * chunk));
    std::vector<std::string> part(std::make_move_iterator(first), std::make_move_iterator(last));
    auto [st, got] = co_await put_batch(self, high, std::move(part));
    if (st) failed = std::move(st);
    else per_chunk[idx] = std::move(got);
  }
  for (auto& pc : per_chunk)
    for (auto& id : pc) ids.push_back(std::move(id));
  co_return std::tuple{std::move(failed), std::move(ids)};
}

// ---- queue_base -------------------------------------------------------------

queue_base::queue_base(std::shared_ptr<queue_core> core)
    : client_core_(core->client),
      core_(std::move(core)),
      closer_(close_when_released(core_, client_core_->get_executor())) {}

const std::string& queue_base::name() const noexcept { return core_->names.name(); }

void queue_base::start_put(std::string item, priority p, handler<put_result> h) {
  // No coroutine per put: the request goes straight to the batcher, which
  // completes h (validation fails before any I/O).
  auto ec = core_->name_ec;
  if (!ec) ec = validate_item(client_core_->get_config(), item);
  if (ec) {
    post_handler(std::move(h), client_core_->get_executor(), ec, put_result{});
    return;
  }
  core_->puts[p == priority::high ? 1 : 0]->submit(std::move(item), std::move(h.handler), h.diag);
}

void queue_base::start_put_id(std::string item, priority p, handler<std::string> h) {
  // The deprecated form: the put's id alone. The handler keeps the
  // caller's cancellation slot and executor.
  auto id_only = adapt_handler(std::move(h.handler), client_core_->get_executor(),
                               [](auto h, boost::system::error_code ec, put_result r) {
                                 std::move(h)(ec, std::move(r.id));
                               });
  start_put(std::move(item), p, handler<put_result>(std::move(id_only), h.diag));
}

void queue_base::start_put_many(std::vector<std::string> items, priority p,
                                handler<std::vector<std::string>> h) {
  spawn_op(client_core_, queue_core::put_many(core_, std::move(items), p), std::move(h));
}

}  // namespace thoonk::detail
