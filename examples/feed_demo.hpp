// Example part: feeds. Creates a feed (create_or_open), subscribes to it, publishes, edits
// and retracts items, and prints the events it receives. Called by
// examples/example.cpp with a connected client.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_events.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <iostream>
#include <string>

inline boost::asio::awaitable<void> run_feed_demo(thoonk::client& c) {
  namespace asio = boost::asio;
  using namespace std::chrono_literals;

  // A feed that keeps its 3 newest items. The name is unique per run so
  // concurrent demos do not meet.
  const std::string name = "demo.feed." + c.instance_id().substr(0, 8);
  thoonk::feed::settings settings;
  settings.max_length = 3;
  auto news = co_await thoonk::feed::async_create_or_open(c, name, settings, asio::use_awaitable);
  std::cout << "feed demo: created feed " << name << " (max_length 3)\n";

  int events = 0;
  auto print = [&events](const thoonk::feed_event& e) {
    ++events;
    static const char* kinds[] = {"publish", "edit", "retract", "position"};
    std::cout << "feed demo: event " << kinds[e.kind] << " id=" << e.id;
    if (e.kind == thoonk::feed_event::publish || e.kind == thoonk::feed_event::edit)
      std::cout << " item=\"" << e.item << "\"";
    std::cout << (e.replayed ? " (replayed)" : "") << "\n";
  };
  thoonk::feed_subscribe_options opts;
  opts.catch_up = true;  // survive subscriber reconnects without missing items
  auto sub = co_await news.async_subscribe(print, opts, asio::use_awaitable);

  auto first = co_await news.async_publish("hello", asio::use_awaitable);  // generated id
  std::cout << "feed demo: published " << first.id << "\n";
  co_await news.async_publish(thoonk::item_id("greeting"), "hi there", asio::use_awaitable);
  // The same id again: an edit.
  co_await news.async_publish(thoonk::item_id("greeting"), "hi there, edited", asio::use_awaitable);
  co_await news.async_publish(thoonk::item_id("a"), "one", asio::use_awaitable);
  // A fourth id: evicts the oldest.
  auto r = co_await news.async_publish(thoonk::item_id("b"), "two", asio::use_awaitable);
  for (const auto& id : r.evicted) std::cout << "feed demo: max_length evicted " << id << "\n";
  bool retracted = co_await news.async_retract("a", asio::use_awaitable);
  std::cout << "feed demo: retract a -> " << std::boolalpha << retracted << "\n";

  // 7 events are on their way (5 publish/edit, 2 retract): wait for them.
  asio::steady_timer t(co_await asio::this_coro::executor);
  for (int i = 0; i < 200 && events < 7; ++i) {
    t.expires_after(5ms);
    co_await t.async_wait(asio::use_awaitable);
  }

  auto all = co_await news.async_get_all(asio::use_awaitable);
  std::cout << "feed demo: feed now holds";
  for (const auto& it : all) std::cout << " " << it.id << "=\"" << it.item << "\"";
  std::cout << "\n";

  sub.reset();
  co_await c.async_delete_feed(name, asio::use_awaitable);
  std::cout << "feed demo: deleted " << name << "\n";
}
