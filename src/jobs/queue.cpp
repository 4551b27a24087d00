// thoonk::queue: contract 002 "Queue" with non-blocking, coalesced gets.
#include <thoonk/queue.hpp>

#include "detail/spawn.hpp"
#include "jobs/common.hpp"
#include "jobs/job_keys.hpp"
#include "thoonk_lua_scripts.hpp"
#include "jobs/wake.hpp"

namespace thoonk {
namespace detail {

using namespace jobs;  // NOLINT

class queue_impl : public std::enable_shared_from_this<queue_impl> {
 public:
  queue_impl(client& c, std::string name, queue_options o)
      : cl(c),
        name_ec(validate_name(c.get_config(), name)),
        k(feed_names(c.get_config(), name)),
        opts(o) {}

  void init() {
    std::weak_ptr<queue_impl> weak = weak_from_this();
    auto ex = cl.get_executor();
    gets = std::make_shared<fetcher<queue_item>>(
        ex, opts.poll_interval, opts.max_fetch_batch, opts.max_fetches_in_flight,
        [weak](std::size_t n) -> asio::awaitable<std::tuple<error_code, std::vector<queue_item>>> {
          return get_batch(weak.lock(), n);
        },
        [weak](std::vector<queue_item> items) -> asio::awaitable<void> {
          return give_back(weak.lock(), std::move(items));
        },
        [weak]() -> asio::awaitable<void> { return prepare(weak.lock()); });
    for (int high = 0; high < 2; ++high) {
      puts[high] = std::make_shared<batcher<std::string, std::string>>(
          ex, opts.max_put_batch, opts.max_puts_in_flight,
          [weak, high](std::vector<std::string> items)
              -> asio::awaitable<std::tuple<error_code, std::vector<std::string>>> {
            return put_batch(weak.lock(), high != 0, std::move(items));
          });
    }
  }

  void close() {
    if (closed) return;
    closed = true;
    gets->close(asio::error::operation_aborted);
    for (auto& p : puts) p->close(asio::error::operation_aborted);
    wake.close();
  }

  static asio::awaitable<void> prepare(std::shared_ptr<queue_impl> self) {
    if (!self || self->closed) co_return;
    // Bounded: if the subscriber cannot connect, gets still work (polling).
    co_await self->wake.ensure(self->cl, self->k.wake_channel,
                               std::weak_ptr<fetcher<queue_item>>(self->gets),
                               std::chrono::milliseconds(1000));
  }

  static asio::awaitable<std::tuple<error_code, std::vector<std::string>>> put_batch(
      std::shared_ptr<queue_impl> self, bool high, std::vector<std::string> items) {
    if (!self)
      co_return std::tuple{error_code(asio::error::operation_aborted), std::vector<std::string>{}};
    const std::size_t n = items.size();
    std::vector<std::string> args;
    args.reserve(n + 3);
    args.push_back(now_ms_string());
    args.push_back(high ? "1" : "0");
    args.push_back(self->k.wake_channel);
    for (auto& i : items) args.push_back(std::move(i));
    auto [ec, v] = co_await run_script(self->cl, scripts::queues_put(), self->k.keys, std::move(args));
    if (ec) co_return std::tuple{ec, std::vector<std::string>{}};
    auto ids = as_strings(std::move(v));
    if (ids.size() != n) co_return std::tuple{error_code(error::unexpected_type), std::move(ids)};
    co_return std::tuple{error_code{}, std::move(ids)};
  }

  static asio::awaitable<std::tuple<error_code, std::vector<queue_item>>> get_batch(
      std::shared_ptr<queue_impl> self, std::size_t n) {
    if (!self)
      co_return std::tuple{error_code(asio::error::operation_aborted), std::vector<queue_item>{}};
    std::vector<std::string> args{std::to_string(n)};
    auto [ec, v] = co_await run_script(self->cl, scripts::queues_get(), self->k.keys, std::move(args));
    std::vector<queue_item> out;
    if (ec) co_return std::tuple{ec, std::move(out)};
    auto& e = v.elements;
    out.reserve(e.size() / 2);
    for (std::size_t i = 0; i + 1 < e.size(); i += 2)
      out.push_back(queue_item{std::move(e[i].str), std::move(e[i + 1].str)});
    co_return std::tuple{error_code{}, std::move(out)};
  }

  static asio::awaitable<void> give_back(std::shared_ptr<queue_impl> self,
                                         std::vector<queue_item> items) {
    if (!self || items.empty()) co_return;
    std::vector<std::string> args;
    args.reserve(1 + 2 * items.size());
    args.push_back(self->k.wake_channel);
    for (auto& i : items) {
      args.push_back(std::move(i.id));
      args.push_back(std::move(i.item));
    }
    // On failure the items are lost: the queue is at-most-once.
    co_await run_script(self->cl, scripts::queues_give_back(), self->k.keys, std::move(args));
  }

  client& cl;
  error_code name_ec;
  queue_keys k;
  queue_options opts;
  std::shared_ptr<fetcher<queue_item>> gets;
  std::shared_ptr<batcher<std::string, std::string>> puts[2];
  wake_subscription wake;
  bool closed = false;
};

}  // namespace detail

namespace asio = boost::asio;
using boost::system::error_code;
using namespace detail::jobs;  // NOLINT
namespace scripts = detail::scripts;

queue::queue(client& c, std::string name, queue_options opts)
    : client_(&c), impl_(std::make_shared<detail::queue_impl>(c, std::move(name), opts)) {
  impl_->init();
  closer_ = close_when_released(impl_, c.get_executor());
}

queue::~queue() = default;

const std::string& queue::name() const noexcept { return impl_->k.names.name(); }

void queue::start_open(handler<> h) {
  auto op =
      [](std::shared_ptr<detail::queue_impl> impl) -> asio::awaitable<std::tuple<error_code>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec};
    std::vector<std::string> args{"len"};
    auto [ec, v] = co_await detail::run_script(impl->cl, scripts::queues_read(), impl->k.keys,
                                                std::move(args));
    if (ec) co_return std::tuple{ec};
    auto sec = co_await impl->wake.ensure(impl->cl, impl->k.wake_channel,
                                          std::weak_ptr<fetcher<queue_item>>(impl->gets),
                                          std::chrono::milliseconds::max());
    co_return std::tuple{sec};
  };
  detail::spawn_op(client_->get_executor(), op(impl_), std::move(h));
}

void queue::start_put(std::string item, priority p, handler<std::string> h) {
  auto op = [](std::shared_ptr<detail::queue_impl> impl, std::string item,
               priority p) -> asio::awaitable<std::tuple<error_code, std::string>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec, std::string{}};
    if (auto ec = detail::validate_item(impl->cl.get_config(), item))
      co_return std::tuple{ec, std::string{}};
    co_return co_await impl->puts[p == priority::high ? 1 : 0]->submit(std::move(item));
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(item), p), std::move(h));
}

void queue::start_put_many(std::vector<std::string> items, priority p,
                           handler<std::vector<std::string>> h) {
  auto op = [](std::shared_ptr<detail::queue_impl> impl, std::vector<std::string> items,
               priority p) -> asio::awaitable<std::tuple<error_code, std::vector<std::string>>> {
    std::vector<std::string> ids;
    if (impl->name_ec) co_return std::tuple{impl->name_ec, std::move(ids)};
    for (const auto& i : items)
      if (auto ec = detail::validate_item(impl->cl.get_config(), i))
        co_return std::tuple{ec, std::move(ids)};
    const bool high = p == priority::high;
    const std::size_t chunk = clamp_batch(impl->opts.max_put_batch);
    const std::size_t nchunks = (items.size() + chunk - 1) / chunk;
    std::vector<std::vector<std::string>> per_chunk(nchunks);
    // High priority: the last chunk goes first, so the first item ends up
    // next out.
    for (std::size_t c = 0; c < nchunks; ++c) {
      std::size_t idx = high ? nchunks - 1 - c : c;
      auto first = items.begin() + static_cast<std::ptrdiff_t>(idx * chunk);
      auto last =
          items.begin() + static_cast<std::ptrdiff_t>(std::min(items.size(), (idx + 1) * chunk));
      std::vector<std::string> part(std::make_move_iterator(first), std::make_move_iterator(last));
      auto [ec, got] = co_await detail::queue_impl::put_batch(impl, high, std::move(part));
      if (ec) {
        for (auto& pc : per_chunk)
          for (auto& id : pc) ids.push_back(std::move(id));
        co_return std::tuple{ec, std::move(ids)};
      }
      per_chunk[idx] = std::move(got);
    }
    for (auto& pc : per_chunk)
      for (auto& id : pc) ids.push_back(std::move(id));
    co_return std::tuple{error_code{}, std::move(ids)};
  };
  detail::spawn_op(client_->get_executor(), op(impl_, std::move(items), p), std::move(h));
}

void queue::start_get(std::chrono::milliseconds timeout, handler<queue_item> h) {
  // No coroutine per get: the waiter holds h.
  if (impl_->name_ec) {
    detail::post_handler(std::move(h), client_->get_executor(), impl_->name_ec, queue_item{});
    return;
  }
  impl_->gets->wait(timeout, std::move(h));
}

void queue::start_get_ids(handler<std::vector<std::string>> h) {
  auto op = [](std::shared_ptr<detail::queue_impl> impl)
      -> asio::awaitable<std::tuple<error_code, std::vector<std::string>>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec, std::vector<std::string>{}};
    std::vector<std::string> args{"ids"};
    auto [ec, v] = co_await detail::run_script(impl->cl, scripts::queues_read(), impl->k.keys,
                                                std::move(args));
    if (ec) co_return std::tuple{ec, std::vector<std::string>{}};
    co_return std::tuple{error_code{}, as_strings(std::move(v))};
  };
  detail::spawn_op(client_->get_executor(), op(impl_), std::move(h));
}

void queue::start_length(handler<std::size_t> h) {
  auto op = [](std::shared_ptr<detail::queue_impl> impl)
      -> asio::awaitable<std::tuple<error_code, std::size_t>> {
    if (impl->name_ec) co_return std::tuple{impl->name_ec, std::size_t{0}};
    std::vector<std::string> args{"len"};
    auto [ec, v] = co_await detail::run_script(impl->cl, scripts::queues_read(), impl->k.keys,
                                                std::move(args));
    if (ec) co_return std::tuple{ec, std::size_t{0}};
    co_return std::tuple{error_code{}, static_cast<std::size_t>(as_int(v))};
  };
  detail::spawn_op(client_->get_executor(), op(impl_), std::move(h));
}

}  // namespace thoonk
