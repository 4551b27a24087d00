// The tutorial of docs/feeds.md, compiled and run against the test server,
// plus a check that the document shows exactly this code, and a run of the
// example program's feed part (examples/feed_demo.hpp).
#include "support/doc_snippet.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include "../../examples/feed_demo.hpp"

#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>

// tutorial-begin
#include <thoonk/client.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/sorted_feed.hpp>

#include <boost/asio.hpp>

#include <ostream>
#include <string>
#include <vector>

namespace asio = boost::asio;

asio::awaitable<void> tutorial(thoonk::client& client, std::string name, std::ostream& out) {
  // 1. Get a handle: create_or_open creates the feed (keeping its 100 newest
  //    items) unless it exists, and checks that it is a `feed`. Settings
  //    are typed; feed::open would only open an existing feed.
  thoonk::feed::settings settings;
  settings.max_length = 100;
  thoonk::feed news =
      co_await thoonk::feed::async_create_or_open(client, name, settings, asio::use_awaitable);

  // 2. Subscribe. With catch_up, a subscriber reconnect loses nothing: what
  //    was published meanwhile is replayed from the feed before live events.
  thoonk::feed_subscribe_options opts;
  opts.catch_up = true;
  std::vector<std::string> seen;
  thoonk::feed_subscription sub = co_await news.async_subscribe(
      [&seen](const thoonk::feed_event& e) {
        // Views are valid during the callback only: copy what you keep.
        seen.push_back(std::string(e.id) + (e.kind == thoonk::feed_event::edit ? " edited" : ""));
      },
      opts, asio::use_awaitable);

  // 3. Publish with a generated id, then with our own id (an item_id, so
  //    id and item cannot be swapped by mistake); publishing an id again is
  //    an edit.
  thoonk::publish_result first = co_await news.async_publish("first post", asio::use_awaitable);
  co_await news.async_publish(thoonk::item_id("post-2"), "second post", asio::use_awaitable);
  thoonk::publish_result again = co_await news.async_publish(
      thoonk::item_id("post-2"), "second post, corrected", asio::use_awaitable);
  out << "generated id: " << first.id.size() << " chars; edited: " << again.edited << "\n";

  // 4. Read it back, oldest first.
  std::vector<thoonk::feed_item> items = co_await news.async_get_all(asio::use_awaitable);
  for (const thoonk::feed_item& it : items) out << it.item << "\n";

  // 5. Errors are error codes. With as_tuple nothing throws.
  auto [ec, removed] =
      co_await news.async_retract("no-such-id", asio::as_tuple(asio::use_awaitable));
  out << "retract missing: " << (ec ? ec.message() : "ok") << ", removed " << removed << "\n";
  auto [ec2, wrong] =
      co_await thoonk::sorted_feed::async_open(client, name, asio::as_tuple(asio::use_awaitable));
  out << "open as sorted feed: " << ec2.message() << "\n";  // error::wrong_feed_type

  // 6. A sorted feed: you choose the order.
  thoonk::sorted_feed todo = co_await thoonk::sorted_feed::async_create_or_open(
      client, name + ".todo", asio::use_awaitable);
  std::string milk = co_await todo.async_append("buy milk", asio::use_awaitable);    // "1"
  std::string bread = co_await todo.async_append("buy bread", asio::use_awaitable);  // "2"
  co_await todo.async_move_to_begin(bread, asio::use_awaitable);
  co_await todo.async_publish_after(thoonk::item_id(milk), "buy eggs", asio::use_awaitable);  // "3"
  std::vector<std::string> order = co_await todo.async_get_ids(asio::use_awaitable);
  for (const std::string& id : order) out << id << " ";  // 2 1 3
  out << "\n";

  // 7. Events arrive asynchronously; by now ours may still be in flight.
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (seen.size() < 3) {
    timer.expires_after(std::chrono::milliseconds(5));
    co_await timer.async_wait(asio::use_awaitable);
  }
  for (const std::string& s : seen) out << "event: " << s << "\n";

  // 8. Clean up. Dropping (or resetting) the handle unsubscribes.
  sub.reset();
  co_await client.async_delete_feed(todo.name(), asio::use_awaitable);
  co_await client.async_delete_feed(name, asio::use_awaitable);
}
// tutorial-end

TEST_CASE("feeds tutorial: docs/feeds.md shows exactly the code compiled here",
          "[feed][feed_docs]") {
  thoonk::test::check_tutorial_shown(__FILE__, "docs/feeds.md");
}

TEST_CASE("feeds tutorial: runs against a real server", "[feed][feed_docs]") {
  const auto text = thoonk::test::run_tutorial(tutorial, "tutorial");
  using Catch::Matchers::Contains;
  CHECK_THAT(text, Contains("generated id: 36 chars; edited: 1\n") &&
                       Contains("first post\nsecond post, corrected\n") &&
                       Contains("retract missing: ok, removed 0\n") &&
                       Contains("open as sorted feed: " +
                                make_error_code(thoonk::error::wrong_feed_type).message()) &&
                       Contains("2 1 3 \n") && Contains("event: post-2\nevent: post-2 edited\n"));
}

TEST_CASE("feeds example: the feed part of the example program runs", "[feed][feed_docs]") {
  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), thoonk::test::test_config());
  thoonk::test::run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await client.async_connect(asio::use_awaitable);
    co_await run_feed_demo(client);
    client.stop();
  });
}
