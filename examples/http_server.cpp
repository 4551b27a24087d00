// The library next to an HTTP server (Boost.Beast) on one io_context: a
// web front end that puts jobs and reports the queue's counts.
//
//   THOONK_REDIS_URL=redis://127.0.0.1:6379 ./http_server [port] [queue]
//
// Listens on 127.0.0.1:`port` (default 8080; 0 picks a free port, printed at
// startup) and answers:
//
//   POST /jobs     the request body becomes a job on `queue` (default
//                  "examples.jobs"): 201 and {"id":"..."}
//   GET  /counts   the queue's counts as JSON
//   GET  /health   "ok" while the Redis connection is up, else 503
//
// Everything (the HTTP sessions, the thoonk client and its connections) runs
// on one single-threaded io_context, so no handler needs a lock. SIGTERM or
// SIGINT stops accepting, lets the open sessions end and exits with status 0.
#include <thoonk/thoonk.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/value.hpp>

#include <chrono>
#include <csignal>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

using request = http::request<http::string_body>;
using response = http::response<http::string_body>;

response make_response(const request& req, http::status status, std::string body,
                       const char* type = "application/json") {
  response res(status, req.version());
  res.set(http::field::content_type, type);
  res.keep_alive(req.keep_alive());
  res.body() = std::move(body);
  res.prepare_payload();
  return res;
}

// Answers one request; the queue operations are awaited like any other I/O.
asio::awaitable<response> route(thoonk::client& client, thoonk::job_queue& jobs,
                                const request& req) {
  if (req.target() == "/health" && req.method() == http::verb::get) {
    bool up = client.conn().is_connected();
    co_return make_response(req, up ? http::status::ok : http::status::service_unavailable,
                            up ? "ok\n" : "redis unavailable\n", "text/plain");
  }
  if (req.target() == "/jobs" && req.method() == http::verb::post) {
    // Errors become a 503 with the library's message (say, the server went away).
    auto [ec, put] = co_await jobs.async_put(req.body(), asio::as_tuple(asio::use_awaitable));
    if (ec)
      co_return make_response(req, http::status::service_unavailable,
                              boost::json::serialize(boost::json::value{{"error", ec.message()}}));
    co_return make_response(req, http::status::created,
                            boost::json::serialize(boost::json::value{{"id", put.id}}));
  }
  if (req.target() == "/counts" && req.method() == http::verb::get) {
    auto [ec, c] = co_await jobs.async_counts(asio::as_tuple(asio::use_awaitable));
    if (ec)
      co_return make_response(req, http::status::service_unavailable,
                              boost::json::serialize(boost::json::value{{"error", ec.message()}}));
    boost::json::value v{{"waiting", c.waiting},
                         {"claimed", c.claimed},
                         {"stalled", c.stalled},
                         {"puts", c.puts},
                         {"finishes", c.finishes}};
    co_return make_response(req, http::status::ok, boost::json::serialize(v));
  }
  co_return make_response(req, http::status::not_found, "not found\n", "text/plain");
}

// One HTTP/1.1 connection: requests answered in order until the peer closes
// it, does not keep it alive, or stays silent for 30 s.
asio::awaitable<void> session(tcp::socket socket, thoonk::client& client, thoonk::job_queue jobs) {
  beast::tcp_stream stream(std::move(socket));
  beast::flat_buffer buffer;
  for (;;) {
    request req;
    stream.expires_after(30s);
    auto [rec, n] =
        co_await http::async_read(stream, buffer, req, asio::as_tuple(asio::use_awaitable));
    if (rec) break;  // closed, timed out or malformed: end the session
    response res = co_await route(client, jobs, req);
    auto [wec, m] = co_await http::async_write(stream, res, asio::as_tuple(asio::use_awaitable));
    if (wec || !res.keep_alive()) break;
  }
  beast::error_code ignored;
  stream.socket().shutdown(tcp::socket::shutdown_send, ignored);
}

asio::awaitable<void> serve(thoonk::client& client, tcp::acceptor& acceptor, std::string name) {
  co_await client.async_connect();
  auto jobs = co_await thoonk::job_queue::async_create_or_open(client, name);
  std::cout << "http_server: listening on 127.0.0.1:" << acceptor.local_endpoint().port()
            << ", queue " << name << std::endl;
  for (;;) {
    auto [ec, socket] = co_await acceptor.async_accept(asio::as_tuple(asio::use_awaitable));
    if (ec) break;  // the acceptor was closed: stop serving
    asio::co_spawn(acceptor.get_executor(), session(std::move(socket), client, jobs),
                   asio::detached);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int port = argc > 1 ? std::atoi(argv[1]) : 8080;
  const std::string name = argc > 2 ? argv[2] : "examples.jobs";
  if (port < 0 || port > 65535) {
    std::cerr << "http_server: port must be 0 .. 65535\n";
    return 2;
  }
  asio::io_context ioc;  // one thread runs both the HTTP server and the client
  thoonk::client client(ioc.get_executor(), thoonk::config::from_env());
  tcp::acceptor acceptor(ioc,
                         {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(port)});

  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int signo) {
    if (ec) return;
    std::cout << "http_server: signal " << signo << ", stopping" << std::endl;
    acceptor.close();  // serve() ends; open sessions end when their peers close
  });

  int status = 1;
  asio::co_spawn(ioc, serve(client, acceptor, name), [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "http_server: " << ex.what() << "\n";
      }
    } else {
      status = 0;
    }
    signals.cancel();
    client.stop();
  });
  ioc.run();
  return status;
}
