// The public connection class: forwards to connection_impl on its executor.
#include <thoonk/connection.hpp>

#include "connection/connection_impl.hpp"
#include "detail/executor_util.hpp"

namespace thoonk {

namespace asio = boost::asio;

connection::connection(executor_type ex, config cfg)
    : impl_(std::make_shared<detail::connection_impl>(std::move(ex), std::move(cfg))) {}

connection::~connection() {
  if (impl_) stop();
}

connection::executor_type connection::get_executor() const noexcept { return impl_->executor(); }
const config& connection::get_config() const noexcept { return impl_->cfg(); }

void connection::start_connect(std::shared_ptr<detail::connection_impl> impl, connect_handler h) {
  auto& ex = impl->executor();
  asio::dispatch(ex, [impl = std::move(impl), h = std::move(h.handler)]() mutable {
    impl->async_connect(std::move(h));
  });
}

void connection::start_exec(std::shared_ptr<detail::connection_impl> impl, const request& req,
                            exec_options opts, exec_handler h) {
  // Fast path: on the connection's own thread the request is serialized
  // straight into the write buffer. From another thread its bytes are copied
  // first, because the caller may destroy `req` as soon as we return.
  if (detail::running_in(impl->executor())) {
    impl->async_exec(req, opts, std::move(h.handler));
    return;
  }
  auto& ex = impl->executor();
  asio::post(ex, [impl = std::move(impl), bytes = req.payload(), c = req.commands(),
                  n = req.expected_replies(), opts, h = std::move(h.handler)]() mutable {
    impl->async_exec_bytes(std::move(bytes), c, n, opts, std::move(h));
  });
}

void connection::stop() {
  asio::dispatch(impl_->executor(), [impl = impl_] { impl->stop(); });
}

bool connection::is_connected() const noexcept { return impl_->connected(); }
int connection::protocol() const noexcept { return impl_->protocol(); }
connection_stats connection::stats() const noexcept { return impl_->stats(); }

void connection::on_event(std::function<void(const connection_event&)> listener) {
  asio::dispatch(impl_->executor(), [impl = impl_, l = std::move(listener)]() mutable {
    impl->add_listener(std::move(l));
  });
}

}  // namespace thoonk
