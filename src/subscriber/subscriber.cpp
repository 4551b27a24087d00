// The public subscriber and subscription classes: forward to
// subscriber_impl on its executor.
#include <thoonk/subscriber.hpp>

#include "detail/executor_util.hpp"
#include "subscriber/subscriber_impl.hpp"

namespace thoonk {

namespace asio = boost::asio;

// ---- subscription ------------------------------------------------------------

subscription::subscription(subscription&& o) noexcept
    : owner_(std::move(o.owner_)), kind_(o.kind_), name_(std::move(o.name_)), id_(o.id_) {
  o.id_ = 0;
}

subscription& subscription::operator=(subscription&& o) noexcept {
  if (this != &o) {
    reset();
    owner_ = std::move(o.owner_);
    kind_ = o.kind_;
    name_ = std::move(o.name_);
    id_ = o.id_;
    o.id_ = 0;
  }
  return *this;
}

subscription::~subscription() { reset(); }

void subscription::reset() {
  if (id_ == 0) return;
  if (auto owner = owner_.lock()) {
    auto& ex = owner->executor();
    asio::dispatch(ex, [owner = std::move(owner), k = kind_, n = std::move(name_), id = id_] {
      owner->remove(k, n, id);
    });
  }
  owner_.reset();
  id_ = 0;
}

// ---- subscriber --------------------------------------------------------------

subscriber::subscriber(executor_type ex, config cfg)
    : impl_(std::make_shared<detail::subscriber_impl>(std::move(ex), std::move(cfg))) {
  impl_->init();
}

subscriber::~subscriber() {
  if (impl_) stop();
}

subscriber::executor_type subscriber::get_executor() const noexcept { return impl_->executor(); }

void subscriber::start_connect(std::shared_ptr<detail::subscriber_impl> impl, connect_handler h) {
  auto& ex = impl->executor();
  asio::dispatch(ex, [impl = std::move(impl), h = std::move(h.handler)]() mutable {
    impl->async_connect(std::move(h));
  });
}

void subscriber::start_subscribe(std::shared_ptr<detail::subscriber_impl> impl,
                                 subscription::kind k, std::string name, callback cb,
                                 subscribe_handler h) {
  auto& ex = impl->executor();
  asio::dispatch(ex, [impl = std::move(impl), k, n = std::move(name), cb = std::move(cb),
                      h = std::move(h)]() mutable {
    impl->async_subscribe(k, std::move(n), std::move(cb), std::move(h));
  });
}

subscription subscriber::on_event(std::function<void(const subscriber_event&)> listener) {
  return impl_->add_listener(std::move(listener));
}

void subscriber::on_callback_error(std::function<void(std::exception_ptr)> handler) {
  impl_->set_error_handler(std::move(handler));
}

void subscriber::stop() {
  asio::dispatch(impl_->executor(), [impl = impl_] { impl->stop(); });
}

bool subscriber::is_connected() const noexcept { return impl_->connected(); }
subscriber_stats subscriber::stats() const noexcept { return impl_->stats(); }

}  // namespace thoonk
