// Shared by the admin server's tests: a small HTTP/1.1 client (Beast), a
// server run under a cancellation signal, and a job queue seeded with jobs
// in every state, plus a plain queue, a feed and a sorted feed.
#pragma once

#include "support/helpers.hpp"

#include <thoonk/admin/server.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/queue.hpp>
#include <thoonk/sorted_feed.hpp>

#include <boost/asio/cancellation_signal.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <boost/json.hpp>

#include <map>
#include <string>

namespace thoonk::test::admin {

namespace beast = boost::beast;
namespace http = beast::http;
namespace json = boost::json;

struct reply {
  unsigned status = 0;
  std::string body;
  http::fields headers;
  /// The body parsed as JSON (null when it is not JSON).
  json::value json;
  /// json["error"]["code"], or "" when there is none.
  std::string code() const {
    if (!json.is_object()) return {};
    auto* e = json.as_object().if_contains("error");
    if (!e || !e->is_object()) return {};
    auto* c = e->as_object().if_contains("code");
    return c && c->is_string() ? std::string(c->as_string()) : std::string();
  }
};

/// One request on a connection of its own (Connection: close), within
/// `timeout_s` seconds. `headers` are added as given; a Host header for
/// 127.0.0.1:port is set unless `headers` has one. (No defaulted
/// arguments on the coroutine itself: g++ 12 copies class-type defaults
/// bitwise; the plain wrappers below supply them.)
inline asio::awaitable<reply> call_for(unsigned short port, http::verb method, std::string target,
                                       std::string body, std::map<std::string, std::string> headers,
                                       int timeout_s) {
  beast::tcp_stream s(co_await asio::this_coro::executor);
  s.expires_after(std::chrono::seconds(timeout_s));
  co_await s.async_connect(asio::ip::tcp::endpoint(asio::ip::make_address("127.0.0.1"), port),
                           asio::use_awaitable);
  http::request<http::string_body> req{method, target, 11};
  if (!headers.count("Host")) req.set(http::field::host, "127.0.0.1:" + std::to_string(port));
  for (const auto& [k, v] : headers) req.set(k, v);
  req.keep_alive(false);
  if (!body.empty() || method == http::verb::post) {
    req.set(http::field::content_type, "application/json");
    req.body() = std::move(body);
    req.prepare_payload();
  }
  co_await http::async_write(s, req, asio::use_awaitable);
  beast::flat_buffer buf;
  http::response_parser<http::string_body> parser;
  parser.body_limit(64 * 1024 * 1024);  // screenshots
  co_await http::async_read(s, buf, parser, asio::use_awaitable);
  auto res = parser.release();
  reply r;
  r.status = res.result_int();
  r.body = std::move(res.body());
  r.headers = res.base();
  boost::system::error_code ec;
  r.json = json::parse(r.body, ec);
  if (ec) r.json = nullptr;
  co_return r;
}

inline asio::awaitable<reply> call(unsigned short port, http::verb method, std::string target,
                                   std::string body = {},
                                   std::map<std::string, std::string> headers = {}) {
  return call_for(port, method, std::move(target), std::move(body), std::move(headers), 10);
}

inline asio::awaitable<reply> get(unsigned short port, std::string target,
                                  std::map<std::string, std::string> headers = {}) {
  return call_for(port, http::verb::get, std::move(target), {}, std::move(headers), 10);
}

/// A write as the dashboard sends it (with the CSRF header).
inline asio::awaitable<reply> post(unsigned short port, std::string target, std::string body = "{}",
                                   std::map<std::string, std::string> headers = {}) {
  headers.emplace("X-Thoonk-Admin", "1");
  return call_for(port, http::verb::post, std::move(target), std::move(body), std::move(headers),
                  10);
}

/// A server listening on a free loopback port, run until stop().
class running_server {
 public:
  running_server(thoonk::client& c, thoonk::admin::options opts) : srv_(c, prepare(opts)) {
    auto ec = srv_.listen();
    if (ec) throw boost::system::system_error(ec, "admin server listen");
    srv_.async_run(asio::bind_cancellation_slot(stop_.slot(), [this](boost::system::error_code e) {
      done_ = true;
      result_ = e;
    }));
  }
  unsigned short port() const { return srv_.local_endpoint().port(); }
  /// Cancels async_run and waits (at most 5 s) for it to complete; returns
  /// its error code (operation_aborted expected).
  asio::awaitable<boost::system::error_code> stop() {
    stop_.emit(asio::cancellation_type::terminal);
    bool ended = co_await wait_until([this] { return done_; }, std::chrono::seconds(5));
    if (!ended) throw std::runtime_error("the admin server did not stop within 5 s");
    co_return result_;
  }
  bool done() const { return done_; }

 private:
  static thoonk::admin::options prepare(thoonk::admin::options o) {
    o.port = 0;
    return o;
  }
  thoonk::admin::server srv_;
  asio::cancellation_signal stop_;
  bool done_ = false;
  boost::system::error_code result_;
};

/// The names the seed made.
struct seeded {
  std::string jobs;    ///< job queue: jobs in every state
  std::string plain;   ///< plain queue, 2 items
  std::string feed;    ///< feed, 3 items, one hostile
  std::string sorted;  ///< sorted feed, 2 items
};

/// The hostile item: shown as text it is harmless; run as HTML it calls
/// alert().
inline const std::string hostile = "<img src=x onerror=alert(1)>";

/// Job queue `jobs`: dead letter "d1" (error "boom"), claimed "c1" with a
/// held put for it, waiting "w1", "w2" and "wx" (the hostile item), scheduled
/// "s1" (in an hour). Claims last an hour (no lapse during a test).
inline asio::awaitable<seeded> seed(thoonk::client& c) {
  seeded s;
  s.jobs = unique_name("adm-jobs");
  s.plain = unique_name("adm-plain");
  s.feed = unique_name("adm-feed");
  s.sorted = unique_name("adm-sorted");
  thoonk::job_queue::settings set;
  set.claim_timeout = std::chrono::hours(1);
  auto q = co_await thoonk::job_queue::async_create_or_open(c, s.jobs, set, asio::use_awaitable);
  auto put_id = [&](std::string id, std::string item,
                    std::optional<std::chrono::milliseconds> delay) -> asio::awaitable<void> {
    thoonk::put_options o;
    o.id = std::move(id);
    o.delay = delay;
    co_await q.async_put(std::move(item), o, asio::use_awaitable);
  };
  co_await put_id("d1", "to be dead", std::nullopt);
  auto d = co_await q.async_claim(std::chrono::seconds(1), asio::use_awaitable);
  thoonk::fail_options perm;
  perm.permanent = true;
  co_await q.async_fail(d, "boom", perm, asio::use_awaitable);
  co_await put_id("c1", "being worked on", std::nullopt);
  auto cl = co_await q.async_claim(std::chrono::seconds(1), asio::use_awaitable);
  co_await put_id("c1", "next version", std::nullopt);  // held: c1 is claimed
  co_await put_id("w1", "first waiting", std::nullopt);
  co_await put_id("w2", "second waiting", std::nullopt);
  co_await put_id("wx", hostile, std::nullopt);
  co_await put_id("s1", "later", std::chrono::hours(1));
  (void)cl;

  auto pq = co_await thoonk::queue::async_create_or_open(c, s.plain, asio::use_awaitable);
  co_await pq.async_put("p-one", asio::use_awaitable);
  co_await pq.async_put("p-two", asio::use_awaitable);

  auto f = co_await thoonk::feed::async_create_or_open(c, s.feed, asio::use_awaitable);
  co_await f.async_publish(thoonk::item_id("n1"), "oldest news", asio::use_awaitable);
  co_await f.async_publish(thoonk::item_id("n2"), "middle news", asio::use_awaitable);
  co_await f.async_publish(thoonk::item_id("n3"), hostile, asio::use_awaitable);

  auto sf = co_await thoonk::sorted_feed::async_create_or_open(c, s.sorted, asio::use_awaitable);
  co_await sf.async_append("first", asio::use_awaitable);
  co_await sf.async_append("second", asio::use_awaitable);
  co_return s;
}

}  // namespace thoonk::test::admin
