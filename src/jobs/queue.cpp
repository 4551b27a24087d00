// thoonk::queue: the contract's "Queue" with non-blocking, coalesced gets.
#include <thoonk/queue.hpp>

#include "detail/spawn.hpp"
#include "feeds/common.hpp"
#include "jobs/fetcher.hpp"
#include "jobs/job_keys.hpp"
#include "jobs/queue_core.hpp"
#include "jobs/reply_parse.hpp"
#include "scripts/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

namespace thoonk {
namespace detail {

using namespace jobs;  // NOLINT

namespace {
const queue_kind queue_layout{
    feed_type::queue, [](const feed_names& n) { return queue_keys(n).keys; }, &scripts::queues_put};
}  // namespace

class queue_impl final : public queue_core {
 public:
  queue_impl(std::shared_ptr<client_core> c, std::string_view name, const queue_options& o)
      : queue_core(c, name, queue_layout, o), opts(o) {}

  void init() {
    std::weak_ptr<queue_impl> weak = std::static_pointer_cast<queue_impl>(shared_from_this());
    gets = std::make_shared<fetcher<queue_item>>(
        cl.get_executor(), opts.poll_interval, opts.max_fetch_batch, opts.max_fetches_in_flight,
        [weak](std::size_t n) { return get_batch(weak.lock(), n); },
        [weak](std::vector<queue_item> items) { return give_back(weak.lock(), std::move(items)); },
        [weak]() { return prepare(weak.lock()); });
    init_puts();
  }

  void close() override {
    if (closed) return;
    gets->close(asio::error::operation_aborted);
    queue_core::close();
  }

  void poke() override { gets->notify(); }

  static asio::awaitable<void> prepare(std::shared_ptr<queue_impl> self) {
    if (!self || self->closed) co_return;
    // Bounded: if the subscriber cannot connect, gets still work (polling).
    co_await self->ensure_wake(std::chrono::milliseconds(1000));
  }

  static asio::awaitable<op_result<std::vector<queue_item>>> get_batch(
      std::shared_ptr<queue_impl> self, std::size_t n) {
    std::vector<queue_item> out;
    if (!self) co_return std::tuple{op_status(asio::error::operation_aborted), std::move(out)};
    std::vector<std::string> args{std::to_string(n)};
    auto [st, v] =
        co_await run_script(self->cl, scripts::queues_get(), self->keys, std::move(args));
    if (st) co_return std::tuple{std::move(st), std::move(out)};
    auto& e = v.elements;
    out.reserve(e.size() / 2);
    for (std::size_t i = 0; i + 1 < e.size(); i += 2)
      out.push_back(queue_item{std::move(e[i].str), std::move(e[i + 1].str)});
    co_return std::tuple{op_status{}, std::move(out)};
  }

  static asio::awaitable<void> give_back(std::shared_ptr<queue_impl> self,
                                         std::vector<queue_item> items) {
    if (!self || items.empty()) co_return;
    std::vector<std::string> args;
    args.reserve(1 + 2 * items.size());
    args.push_back(self->wake_channel);
    for (auto& i : items) {
      args.push_back(std::move(i.id));
      args.push_back(std::move(i.item));
    }
    // On failure the items are lost: the queue is at-most-once.
    co_await run_script(self->cl, scripts::queues_give_back(), self->keys, std::move(args));
  }

  // queues/read.lua: 'len' (a number) or 'ids' (the waiting ids).
  asio::awaitable<op_result<resp3::value>> read(std::string what) {
    if (name_ec) co_return std::tuple{op_status(name_ec), resp3::value{}};
    std::vector<std::string> args{std::move(what)};
    co_return co_await run_script(cl, scripts::queues_read(), keys, std::move(args));
  }

  queue_options opts;
  std::shared_ptr<fetcher<queue_item>> gets;
};

namespace {

queue_impl& plain_impl_of(const std::shared_ptr<queue_core>& core) {
  return static_cast<queue_impl&>(*core);
}

std::shared_ptr<queue_core> make_queue(const std::shared_ptr<client_core>& c, std::string_view name,
                                       const queue_options& o) {
  auto impl = std::make_shared<queue_impl>(c, name, o);
  impl->init();
  return impl;
}

}  // namespace
}  // namespace detail

namespace asio = boost::asio;
using boost::system::error_code;
using detail::op_result;
using detail::op_status;

queue::queue(client& c, std::string name, queue_options opts)
    : queue_base(detail::make_queue(detail::client_access::core(c), name, opts)) {}

void queue::start_open(handler<queue> h) { detail::start_open_handle(*this, core_, std::move(h)); }

void queue::start_create_or_open(settings s, handler<queue> h) {
  detail::start_create_or_open_handle(*this, core_, s.to_fields(), std::move(h));
}

void queue::start_read_settings(handler<settings> h) {
  detail::start_read_settings_of<settings>(core_, {}, std::move(h));
}

void queue::start_get(std::chrono::milliseconds timeout, handler<queue_item> h) {
  // No coroutine per get: the waiter holds h.
  if (core_->name_ec) {
    detail::post_handler(std::move(h), client_core_->get_executor(), core_->name_ec, queue_item{});
    return;
  }
  detail::plain_impl_of(core_).gets->wait(timeout, std::move(h.handler), h.diag);
}

void queue::start_get_item(std::string id, handler<std::optional<std::string>> h) {
  auto op = [](std::shared_ptr<detail::queue_core> core,
               std::string id) -> asio::awaitable<op_result<std::optional<std::string>>> {
    auto ec = core->name_ec;
    if (!ec) ec = detail::validate_id(core->cl.get_config(), id);
    if (ec) co_return std::tuple{op_status(ec), std::optional<std::string>{}};
    request req;
    detail::push_type_check(req, core->names);
    req.push("HGET", core->keys[2], id);  // feed.items (layouts/queue.lua K_ITEMS)
    auto [st, resp] = co_await detail::exec_checked(core->cl, core->names, req, core->type);
    if (st) co_return std::tuple{std::move(st), std::optional<std::string>{}};
    co_return std::tuple{op_status{}, detail::as_opt_string(resp[1])};
  };
  detail::spawn_op(client_core_, op(core_, std::move(id)), std::move(h));
}

void queue::start_get_ids(handler<std::vector<std::string>> h) {
  auto op = [](std::shared_ptr<detail::queue_core> core)
      -> asio::awaitable<op_result<std::vector<std::string>>> {
    auto [st, v] = co_await detail::plain_impl_of(core).read("ids");
    if (st) co_return std::tuple{std::move(st), std::vector<std::string>{}};
    co_return std::tuple{op_status{}, detail::jobs::as_strings(std::move(v))};
  };
  detail::spawn_op(client_core_, op(core_), std::move(h));
}

void queue::start_length(handler<std::size_t> h) {
  auto op =
      [](std::shared_ptr<detail::queue_core> core) -> asio::awaitable<op_result<std::size_t>> {
    auto [st, v] = co_await detail::plain_impl_of(core).read("len");
    if (st) co_return std::tuple{std::move(st), std::size_t{0}};
    co_return std::tuple{op_status{}, static_cast<std::size_t>(detail::jobs::as_int(v))};
  };
  detail::spawn_op(client_core_, op(core_), std::move(h));
}

}  // namespace thoonk
