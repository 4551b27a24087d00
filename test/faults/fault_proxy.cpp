#include "fault_proxy.hpp"

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/redirect_error.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <algorithm>
#include <array>
#include <vector>

namespace thoonk::faults {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using boost::system::error_code;

fault_plan::action fault_plan::on_read(direction d, std::size_t n, bool first) noexcept {
  action a;
  if (d == direction::to_server && first && refusals_ > 0) {
    --refusals_;
    ++refused_;
    a.reset = true;
    return a;
  }
  if (mode_ == fault_mode::blackhole) return a;  // dropped
  a.forward = n;
  a.chunk = mode_ == fault_mode::trickle ? 1 : n;
  if (d == direction::to_client && cut_armed_) {
    if (n >= cut_remaining_) {
      a.forward = cut_remaining_;
      a.reset = true;
      cut_armed_ = false;
      ++cuts_;
    } else {
      cut_remaining_ -= n;
    }
  }
  return a;
}

namespace {

// One proxied connection: the client's socket and the server's.
struct link {
  tcp::socket client, server;
  explicit link(tcp::socket c) : client(std::move(c)), server(client.get_executor()) {}
  // SO_LINGER 0: close() sends RST, as a crashed peer or a middlebox would.
  void reset() {
    error_code ignored;
    for (auto* s : {&client, &server}) {
      if (!s->is_open()) continue;
      s->set_option(asio::socket_base::linger(true, 0), ignored);
      s->close(ignored);
    }
  }
};

}  // namespace

struct fault_proxy::state {
  explicit state(asio::any_io_executor ex) : acceptor(ex) {}
  tcp::acceptor acceptor;
  unsigned short upstream = 0;
  unsigned short port = 0;
  fault_plan plan;
  std::vector<std::weak_ptr<link>> links;
  std::uint64_t accepted = 0;
  bool stopped = false;
};

namespace {

asio::awaitable<void> pump(std::shared_ptr<fault_proxy::state> st, std::shared_ptr<link> l,
                           direction d) {
  auto& from = d == direction::to_server ? l->client : l->server;
  auto& to = d == direction::to_server ? l->server : l->client;
  std::array<char, 16384> buf;
  for (bool first = true;; first = false) {
    error_code ec;
    const std::size_t n = co_await from.async_read_some(
        asio::buffer(buf), asio::redirect_error(asio::use_awaitable, ec));
    if (ec) break;
    const auto a = st->plan.on_read(d, n, first);
    for (std::size_t off = 0; off < a.forward && !ec; off += a.chunk) {
      const std::size_t len = std::min(a.chunk, a.forward - off);
      co_await asio::async_write(to, asio::buffer(buf.data() + off, len),
                                 asio::redirect_error(asio::use_awaitable, ec));
      // One byte per write is only worth something if the reader sees the
      // bytes apart: let the other side run between them.
      if (a.chunk == 1) co_await asio::post(asio::use_awaitable);
    }
    if (ec || a.reset) break;
  }
  // Either side ending ends the link, the way a dead middlebox would: RST.
  l->reset();
}

asio::awaitable<void> serve(std::shared_ptr<fault_proxy::state> st, std::shared_ptr<link> l) {
  error_code ec;
  co_await l->server.async_connect(tcp::endpoint(asio::ip::address_v4::loopback(), st->upstream),
                                   asio::redirect_error(asio::use_awaitable, ec));
  if (ec) {
    l->reset();
    co_return;
  }
  l->server.set_option(tcp::no_delay(true), ec);
  l->client.set_option(tcp::no_delay(true), ec);
  using namespace asio::experimental::awaitable_operators;
  co_await (pump(st, l, direction::to_server) && pump(st, l, direction::to_client));
}

asio::awaitable<void> accept_loop(std::shared_ptr<fault_proxy::state> st) {
  for (;;) {
    error_code ec;
    tcp::socket s =
        co_await st->acceptor.async_accept(asio::redirect_error(asio::use_awaitable, ec));
    if (ec || st->stopped) co_return;
    ++st->accepted;
    auto l = std::make_shared<link>(std::move(s));
    std::erase_if(st->links, [](const auto& w) { return w.expired(); });
    st->links.push_back(l);
    asio::co_spawn(st->acceptor.get_executor(), serve(st, l), asio::detached);
  }
}

}  // namespace

fault_proxy::fault_proxy(asio::any_io_executor ex, unsigned short upstream_port)
    : st_(std::make_shared<state>(ex)) {
  st_->upstream = upstream_port;
  const tcp::endpoint ep(asio::ip::address_v4::loopback(), 0);
  st_->acceptor.open(ep.protocol());
  st_->acceptor.set_option(tcp::acceptor::reuse_address(true));
  st_->acceptor.bind(ep);
  st_->acceptor.listen();
  st_->port = st_->acceptor.local_endpoint().port();
  asio::co_spawn(ex, accept_loop(st_), asio::detached);
}

fault_proxy::~fault_proxy() { stop(); }

unsigned short fault_proxy::port() const noexcept { return st_->port; }

fault_plan& fault_proxy::plan() noexcept { return st_->plan; }

std::uint64_t fault_proxy::accepted() const noexcept { return st_->accepted; }

void fault_proxy::reset_all() {
  for (auto& w : st_->links)
    if (auto l = w.lock()) l->reset();
  st_->links.clear();
}

void fault_proxy::stop() {
  if (st_->stopped) return;
  st_->stopped = true;
  error_code ignored;
  st_->acceptor.close(ignored);
  reset_all();
}

}  // namespace thoonk::faults
