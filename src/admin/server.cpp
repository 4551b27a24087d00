// The admin server's I/O: an acceptor loop and one coroutine per
// connection (Boost.Beast HTTP/1.1), on the client's executor. Decisions
// (routes, access, limits) come from admin/rules.hpp; answers from
// admin/api.hpp and the embedded page (admin/page.hpp).
#include <thoonk/admin/server.hpp>

#include "admin/api.hpp"
#include "admin/page.hpp"
#include "admin/rules.hpp"
#include "detail/spawn.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <thoonk/diagnostics.hpp>
#include <thoonk/job_queue.hpp>

#include <iterator>
#include <memory>
#include <string>
#include <unordered_set>

namespace thoonk::admin {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

class admin_category_impl : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "thoonk.admin"; }
  std::string message(int ev) const override {
    switch (static_cast<errc>(ev)) {
      case errc::token_required:
        return "the admin server listens on a non-loopback address: set options::token (at "
               "least 16 bytes) so that only holders of the token can use it";
      case errc::token_too_short:
        return "options::token is shorter than 16 bytes: use a long random token";
      case errc::invalid_address:
        return "options::address is not an IPv4 or IPv6 address (host names are not resolved)";
      case errc::invalid_limit:
        return "a limit in thoonk::admin::options is 0 or out of range (max_retry_batch: 1 to "
               "1000; the others at least 1)";
      case errc::cluster_not_supported:
        return "the admin server serves a single Redis server, not a cluster (config::cluster): "
               "point it at one server's client";
    }
    return "unknown thoonk.admin error";
  }
};

constexpr auto nothrow = asio::as_tuple(asio::deferred);

using request_t = http::request<http::string_body>;
using response_t = http::response<http::string_body>;

}  // namespace

const boost::system::error_category& admin_category() noexcept {
  static const admin_category_impl cat;
  return cat;
}

boost::system::error_code make_error_code(errc e) noexcept {
  return {static_cast<int>(e), admin_category()};
}

class server::impl : public std::enable_shared_from_this<impl> {
 public:
  impl(client& c, options opts)
      : client_(c),
        opts_(std::move(opts)),
        acceptor_(c.get_executor()),
        router_(detail::make_router()),
        api_(c, opts_),
        slot_free_(c.get_executor()),
        drained_(c.get_executor()) {}

  boost::system::error_code listen() {
    if (acceptor_.is_open()) return {};
    boost::system::error_code ec;
    auto addr = asio::ip::make_address(opts_.address, ec);
    if (ec) return errc::invalid_address;
    if (opts_.max_body_bytes == 0 || opts_.max_header_bytes == 0 || opts_.max_header_fields == 0 ||
        opts_.max_connections == 0 || opts_.request_timeout.count() <= 0 ||
        opts_.max_retry_batch == 0 || opts_.max_retry_batch > 1000)
      return errc::invalid_limit;
    if (client_.get_config().cluster) return errc::cluster_not_supported;
    if (!addr.is_loopback() && opts_.token.empty()) return errc::token_required;
    if (!opts_.token.empty() && opts_.token.size() < 16) return errc::token_too_short;
    tcp::endpoint ep(addr, opts_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (ec) {
      boost::system::error_code ignored;
      acceptor_.close(ignored);
      return ec;
    }
    policy_.emplace(opts_.token, opts_.read_only, addr.is_loopback(),
                    acceptor_.local_endpoint().port());
    return {};
  }

  asio::any_io_executor executor() const { return client_.get_executor(); }

  tcp::endpoint local_endpoint() const {
    boost::system::error_code ec;
    auto ep = acceptor_.local_endpoint(ec);
    return ec ? tcp::endpoint{} : ep;
  }

  /// run(), keeping the server's state alive until it completes.
  static asio::awaitable<std::tuple<boost::system::error_code>> run_owned(
      std::shared_ptr<impl> self) {
    co_return co_await self->run();
  }

  asio::awaitable<std::tuple<boost::system::error_code>> run() {
    co_await asio::this_coro::throw_if_cancelled(false);
    co_await asio::this_coro::reset_cancellation_state(asio::enable_total_cancellation());
    if (running_) co_return std::tuple{boost::system::error_code(asio::error::already_started)};
    if (auto ec = listen()) co_return std::tuple{ec};
    running_ = true;
    boost::system::error_code result;
    for (;;) {
      auto cs = co_await asio::this_coro::cancellation_state;
      if (cs.cancelled() != asio::cancellation_type::none) {
        result = asio::error::operation_aborted;
        break;
      }
      if (sessions_.size() >= opts_.max_connections) {
        // Full: leave further clients in the backlog until one closes.
        slot_free_.expires_at(asio::steady_timer::time_point::max());
        co_await slot_free_.async_wait(nothrow);
        continue;
      }
      // Accepted into a socket of our own (not a returned one): g++ 12
      // mishandles a socket moved out of an awaited tuple.
      tcp::socket sock(client_.get_executor());
      auto [ec] = co_await acceptor_.async_accept(sock, nothrow);
      if (ec) {
        cs = co_await asio::this_coro::cancellation_state;
        if (ec == asio::error::operation_aborted ||
            cs.cancelled() != asio::cancellation_type::none) {
          result = asio::error::operation_aborted;
          break;
        }
        // Out of descriptors or a client that left before the accept:
        // transient; wait a little rather than spin.
        if (ec == asio::error::connection_aborted || ec == asio::error::no_descriptors ||
            ec == asio::error::no_buffer_space || ec == asio::error::no_memory) {
          asio::steady_timer t(client_.get_executor(), std::chrono::milliseconds(50));
          co_await t.async_wait(nothrow);
          continue;
        }
        result = ec;
        break;
      }
      auto stream = std::make_shared<beast::tcp_stream>(std::move(sock));
      sessions_.insert(stream.get());
      asio::co_spawn(client_.get_executor(), session(shared_from_this(), std::move(stream)),
                     [](std::exception_ptr) {});
    }
    // Stop: no more accepts; cut every connection and wait for their
    // coroutines to end (each removes itself from sessions_).
    co_await asio::this_coro::reset_cancellation_state();
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    for (auto* s : sessions_) s->socket().close(ignored);
    while (!sessions_.empty()) {
      drained_.expires_at(asio::steady_timer::time_point::max());
      co_await drained_.async_wait(nothrow);
    }
    running_ = false;
    co_return std::tuple{result};
  }

 private:
  // The connections being served (owned by their session coroutines), so
  // that a stop can close them.
  using session_set = std::unordered_set<beast::tcp_stream*>;

  static asio::awaitable<void> session(std::shared_ptr<impl> self,
                                       std::shared_ptr<beast::tcp_stream> stream) {
    co_await self->serve(*stream);
    boost::system::error_code ignored;
    stream->socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream->socket().close(ignored);
    self->sessions_.erase(stream.get());
    self->slot_free_.cancel();
    if (self->sessions_.empty()) self->drained_.cancel();
  }

  asio::awaitable<void> serve(beast::tcp_stream& stream) {
    beast::flat_buffer buffer;
    for (;;) {
      http::request_parser<http::string_body> parser;
      parser.header_limit(static_cast<std::uint32_t>(opts_.max_header_bytes));
      parser.body_limit(opts_.max_body_bytes);
      // One deadline for the whole request, not per read: a client that
      // trickles a byte at a time is cut when it passes.
      stream.expires_after(opts_.request_timeout);
      auto [ec, n] = co_await http::async_read(stream, buffer, parser, nothrow);
      if (ec) {
        if (ec == http::error::body_limit)
          co_await write(stream,
                         plain_error(413, "body_too_large",
                                     "the request body is larger than the server takes", 11),
                         false);
        else if (ec == http::error::header_limit)
          co_await write(stream,
                         plain_error(431, "header_too_large",
                                     "the request's headers are larger than the server "
                                     "takes",
                                     11),
                         false);
        else if (ec != http::error::end_of_stream && ec != beast::error::timeout &&
                 ec != asio::error::operation_aborted && ec != asio::error::connection_reset &&
                 ec != asio::error::eof && ec != asio::error::bad_descriptor)
          co_await write(stream,
                         plain_error(400, "bad_request", "the request is not valid HTTP/1.1", 11),
                         false);
        co_return;
      }
      auto req = parser.release();
      const bool keep = req.keep_alive();
      std::optional<std::string> events_queue;
      response_t res = co_await answer(req, events_queue);
      if (events_queue) {
        // The connection becomes an event stream until either side ends it.
        co_await stream_events(stream, std::move(*events_queue), req.version());
        co_return;
      }
      res.keep_alive(keep);
      if (!co_await write(stream, std::move(res), keep)) co_return;
      if (!keep) co_return;
    }
  }

  response_t plain_error(unsigned status, std::string_view code, std::string_view message,
                         unsigned version) {
    auto e = detail::error_response(status, code, message);
    return json_response(status, std::move(e.body), version);
  }

  static response_t json_response(unsigned status, std::string body, unsigned version) {
    response_t res{static_cast<http::status>(status), version};
    res.set(http::field::content_type, "application/json; charset=utf-8");
    res.set(http::field::cache_control, "no-store");
    res.set("X-Content-Type-Options", "nosniff");
    res.body() = std::move(body);
    res.prepare_payload();
    return res;
  }

  asio::awaitable<bool> write(beast::tcp_stream& stream, response_t res, bool keep) {
    if (!keep) res.keep_alive(false);
    stream.expires_after(opts_.request_timeout);
    auto [ec, n] = co_await http::async_write(stream, res, nothrow);
    co_return !ec;
  }

  /// The state of one /api/queues/{q}/events connection, used by the
  /// subscription's callback and the read that watches for the client
  /// leaving.
  struct event_session {
    explicit event_session(const asio::any_io_executor& ex) : wake(ex) {}
    detail::event_buffer frames{1000};
    asio::steady_timer wake;
    bool gone = false;  // the client closed (or the server stopped)
    char sink[256] = {};
    subscription sub;
  };

  /// /api/queues/{q}/events: the queue's job events as Server-Sent Events
  /// (job_queue::async_subscribe_events), until the client goes away or the
  /// server stops; a comment line every 15 s keeps proxies from timing out
  /// and finds a client that left.
  asio::awaitable<void> stream_events(beast::tcp_stream& stream, std::string name,
                                      unsigned version) {
    auto st = std::make_shared<event_session>(client_.get_executor());
    co_await run_events(stream, st, std::move(name), version);
    // The subscription's callback points at *st: end the subscription, and
    // let its removal (which may be posted) run before *st can go.
    st->sub.reset();
    co_await asio::post(client_.get_executor(), asio::as_tuple(asio::deferred));
  }

  asio::awaitable<void> run_events(beast::tcp_stream& stream, std::shared_ptr<event_session> st,
                                   std::string name, unsigned version) {
    job_queue q(client_, name);
    thoonk::diagnostics diag;
    // (Results kept in tuples, not structured bindings assigned later: g++
    // 12 mishandles those in coroutine frames.)
    std::tuple<boost::system::error_code, job_queue::settings> settings =
        co_await q.async_read_settings(capture_diagnostics(diag, nothrow));
    boost::system::error_code ec = std::get<0>(settings);
    if (!ec) {
      std::tuple<boost::system::error_code, subscription> sub = co_await q.async_subscribe_events(
          // A plain pointer, not a shared_ptr: stream_events keeps *st
          // alive until the subscription is gone.
          [raw = st.get()](const job_event& e) {
            boost::json::object o;
            o["kind"] = to_string(e.kind);
            o["id"] = e.id;
            o["detail"] = e.detail;
            raw->frames.push(detail::sse_frame("job", boost::json::serialize(o)));
            raw->wake.cancel();
          },
          capture_diagnostics(diag, nothrow));
      ec = std::get<0>(sub);
      st->sub = std::move(std::get<1>(sub));
    }
    if (ec) {
      auto e = detail::error_response(detail::status_for(ec), detail::code_for(ec), ec.message(),
                                      diag.server_message());
      co_await write(stream, json_response(e.status, std::move(e.body), version), false);
      co_return;
    }
    http::response<http::empty_body> res{http::status::ok, version};
    res.set(http::field::content_type, "text/event-stream");
    res.set(http::field::cache_control, "no-store");
    res.set("X-Content-Type-Options", "nosniff");
    res.keep_alive(false);
    http::response_serializer<http::empty_body> sr(res);
    stream.expires_after(opts_.request_timeout);
    std::tuple<boost::system::error_code, std::size_t> head =
        co_await http::async_write_header(stream, sr, nothrow);
    if (std::get<0>(head)) co_return;
    // The first frame says whether events will come at all: the scripts
    // publish them only with the queue's `events` setting.
    boost::json::object ready;
    ready["queue"] = name;
    ready["events"] = std::get<1>(settings).events.value_or(false);
    std::string out = detail::sse_frame("ready", boost::json::serialize(ready));
    // The client sends nothing more: a read completes only when it closes
    // the connection (or the server stops), and wakes the loop.
    stream.socket().async_read_some(asio::buffer(st->sink),
                                    [st](boost::system::error_code, std::size_t) {
                                      st->gone = true;
                                      st->wake.cancel();
                                    });
    for (;;) {
      if (!out.empty()) {
        stream.expires_after(opts_.request_timeout);
        std::tuple<boost::system::error_code, std::size_t> w =
            co_await asio::async_write(stream, asio::buffer(out), nothrow);
        if (std::get<0>(w)) co_return;
        out.clear();
      }
      if (st->frames.empty()) {
        st->wake.expires_after(std::chrono::seconds(15));
        stream.expires_never();
        // Wait for an event, the keep-alive time, or the client leaving.
        co_await st->wake.async_wait(nothrow);
        if (st->gone) co_return;
        if (st->frames.empty()) {
          out = ": keep-alive\n\n";
          continue;
        }
      }
      out = st->frames.take();
    }
  }

  asio::awaitable<response_t> answer(const request_t& req,
                                     std::optional<std::string>& events_queue) {
    const unsigned v = req.version();
    if (static_cast<std::size_t>(std::distance(req.begin(), req.end())) > opts_.max_header_fields)
      co_return plain_error(431, "too_many_headers",
                            "the request has more header fields than the server takes", v);
    auto t = detail::parse_target(req.target());
    if (!t.ok)
      co_return plain_error(400, "bad_target", "the request target is not a valid path", v);
    auto m = router_.match(req.method_string(), t.segments);
    if (m.result == detail::route_match::outcome::not_found) {
      // The page's files, by name (/app.js, /style.css).
      if (req.method() == http::verb::get && t.segments.size() == 1)
        if (auto res = page_file("/" + t.segments[0], v)) co_return std::move(*res);
      co_return plain_error(404, "not_found", "no such page or API route", v);
    }
    if (m.result == detail::route_match::outcome::method_not_allowed) {
      auto res = plain_error(405, "method_not_allowed", "this path takes only " + m.allow, v);
      res.set(http::field::allow, m.allow);
      co_return res;
    }
    detail::request_facts f;
    f.write = m.r->write;
    f.api = m.r->id != detail::route_id::page;
    f.authorization = req[http::field::authorization];
    f.has_csrf_header = req.find(detail::csrf_header) != req.end();
    f.host = req[http::field::host];
    if (auto refused = policy_->check(f)) {
      auto res = plain_error(refused->status, refused->code, refused->message, v);
      if (refused->status == 401) res.set(http::field::www_authenticate, "Bearer");
      co_return res;
    }
    if (m.r->id == detail::route_id::page) co_return std::move(*page_file("/index.html", v));
    if (m.r->id == detail::route_id::events) {
      if (auto refused = co_await api_.check_job_queue(m.params.at(0)))
        co_return json_response(refused->status, std::move(refused->body), v);
      events_queue = m.params.at(0);
      co_return response_t{};
    }
    detail::api_request ar;
    ar.id = m.r->id;
    ar.params = std::move(m.params);
    ar.t = std::move(t);
    ar.body = req.body();
    auto out = co_await api_.handle(std::move(ar));
    co_return json_response(out.status, std::move(out.body), v);
  }

  std::optional<response_t> page_file(const std::string& path, unsigned version) {
    for (const auto& f : detail::page_files()) {
      if (f.path != path) continue;
      response_t res{http::status::ok, version};
      res.set(http::field::content_type, f.content_type);
      res.set(http::field::cache_control, "no-cache");
      res.set("X-Content-Type-Options", "nosniff");
      res.set("X-Frame-Options", "DENY");
      res.set("Referrer-Policy", "no-referrer");
      // Only the page's own files run; no inline script, no other origin.
      res.set("Content-Security-Policy",
              "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
              "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'");
      res.body() = std::string(f.body);
      res.prepare_payload();
      return res;
    }
    return std::nullopt;
  }

  client& client_;
  options opts_;
  tcp::acceptor acceptor_;
  detail::router router_;
  detail::api api_;
  std::optional<detail::access_policy> policy_;
  session_set sessions_;
  asio::steady_timer slot_free_;
  asio::steady_timer drained_;
  bool running_ = false;
};

server::server(client& c, options opts) : impl_(std::make_shared<impl>(c, std::move(opts))) {}

server::~server() = default;

boost::system::error_code server::listen() { return impl_->listen(); }

tcp::endpoint server::local_endpoint() const { return impl_->local_endpoint(); }

void server::start_run(asio::any_completion_handler<void(boost::system::error_code)> h) {
  auto self = impl_;
  ::thoonk::detail::spawn_op(self->executor(), impl::run_owned(self), std::move(h));
}

}  // namespace thoonk::admin
