// A feed publisher: publishes items to a feed and exits.
//
//   THOONK_REDIS_URL=redis://127.0.0.1:6379 ./feed_publisher [feed] item...
//
// Creates the feed `feed` (default "examples.news") when it does not exist,
// keeping its 100 newest items, publishes each argument as an item under a
// generated id, and prints the ids and how many items the feed holds.
// Subscribers (examples/feed_subscriber.cpp) get a publish event per item.
#include <thoonk/thoonk.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;

namespace {

asio::awaitable<void> publish(thoonk::client& client, std::string name,
                              std::vector<std::string> items) {
  co_await client.async_connect();
  thoonk::feed::settings settings;
  settings.max_length = 100;  // the feed keeps its 100 newest items
  auto news = co_await thoonk::feed::async_create_or_open(client, name, settings);
  for (auto& item : items) {
    auto published = co_await news.async_publish(item);
    std::cout << "publisher: published \"" << item << "\" as " << published.id << "\n";
  }
  std::cout << "publisher: " << name << " holds " << co_await news.async_length() << " items\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "examples.news";
  std::vector<std::string> items(argv + (argc > 1 ? 2 : 1), argv + argc);
  if (items.empty()) items = {"hello", "world"};
  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), thoonk::config::from_env());
  int status = 1;
  asio::co_spawn(ioc, publish(client, name, std::move(items)), [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "publisher: " << ex.what() << "\n";
      }
    } else {
      status = 0;
    }
    client.stop();
  });
  ioc.run();
  return status;
}
