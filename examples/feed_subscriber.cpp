// A feed subscriber with catch-up: it resumes where it stopped last time.
//
//   THOONK_REDIS_URL=redis://127.0.0.1:6379 ./feed_subscriber feed cursor-file count
//
// Subscribes to `feed` with catch-up (feed_subscribe_options::catch_up). If
// `cursor-file` holds a cursor saved by an earlier run, the subscription
// resumes from it: the items published while this program was not running
// are replayed first (marked "replayed"), in order, then live events follow.
// After `count` publish events (replayed or live) and, when it resumed, the
// catch-up's report, or on SIGTERM/SIGINT, it saves the subscription's
// cursor to `cursor-file` and exits with status 0.
// The same replay happens by itself after a lost subscriber connection.
#include <thoonk/thoonk.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

namespace asio = boost::asio;

namespace {

std::optional<std::uint64_t> read_cursor(const std::string& path) {
  std::ifstream in(path);
  std::uint64_t cursor = 0;
  if (in >> cursor) return cursor;
  return std::nullopt;  // first run: start from now
}

class subscriber_app {
 public:
  subscriber_app(asio::io_context& ioc, std::string feed, std::string cursor_file, int count)
      : client_(ioc.get_executor(), thoonk::config::from_env()),
        feed_(std::move(feed)),
        cursor_file_(std::move(cursor_file)),
        count_(count),
        done_(ioc, asio::steady_timer::time_point::max()) {}

  asio::awaitable<void> run() {
    co_await client_.async_connect();
    auto news = co_await thoonk::feed::async_create_or_open(client_, feed_);
    thoonk::feed_subscribe_options options;
    options.catch_up = true;
    options.resume_from = read_cursor(cursor_file_);
    // A resumed subscription reports its catch-up once the replay is done;
    // the program waits for that report before it counts itself done.
    catching_up_ = options.resume_from.has_value();
    options.on_catch_up = [this](const thoonk::catch_up_info& info) {
      std::cout << "subscriber: caught up " << info.items << " items (cursor " << info.from
                << " -> " << info.to << ")" << std::endl;
      catching_up_ = false;
      maybe_done();
    };
    auto sub = co_await news.async_subscribe([this](const thoonk::feed_event& e) { on_event(e); },
                                             options);
    std::cout << "subscriber: subscribed to " << feed_
              << (options.resume_from
                      ? " (resuming from cursor " + std::to_string(*options.resume_from) + ")"
                      : " (from now)")
              << std::endl;
    // Wait until on_event has seen `count` items, or a signal cancels it.
    co_await done_.async_wait(asio::as_tuple(asio::use_awaitable));
    std::ofstream(cursor_file_) << sub.cursor() << "\n";
    std::cout << "subscriber: saved cursor " << sub.cursor() << " after " << seen_ << " items"
              << std::endl;
    sub.reset();
  }

  void stop() { done_.cancel(); }
  thoonk::client& client() { return client_; }

 private:
  void on_event(const thoonk::feed_event& e) {
    if (e.kind != thoonk::feed_event::publish) return;
    ++seen_;
    std::cout << "subscriber: item " << e.id << " \"" << e.item << "\""
              << (e.replayed ? " (replayed)" : " (live)") << std::endl;
    maybe_done();
  }

  void maybe_done() {
    if (seen_ >= count_ && !catching_up_) done_.cancel();
  }

  thoonk::client client_;
  std::string feed_;
  std::string cursor_file_;
  int count_;
  int seen_ = 0;
  bool catching_up_ = false;
  asio::steady_timer done_;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4 || std::atoi(argv[3]) < 1) {
    std::cerr << "usage: feed_subscriber feed cursor-file count\n";
    return 2;
  }
  asio::io_context ioc;
  subscriber_app app(ioc, argv[1], argv[2], std::atoi(argv[3]));
  asio::signal_set signals(ioc, SIGTERM, SIGINT);
  signals.async_wait([&](const boost::system::error_code& ec, int) {
    if (!ec) app.stop();
  });
  int status = 1;
  asio::co_spawn(ioc, app.run(), [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "subscriber: " << ex.what() << "\n";
      }
    } else {
      status = 0;
    }
    signals.cancel();
    app.client().stop();
  });
  ioc.run();
  return status;
}
