// Helpers for the feed integration tests: raw pub/sub capture on a separate
// subscriber, polling waits (bounded by the test deadline), key names.
#pragma once

#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_events.hpp>
#include <thoonk/sorted_feed.hpp>
#include <thoonk/subscriber.hpp>

#include <boost/asio.hpp>
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <map>
#include <sstream>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace feedtest {

namespace asio = boost::asio;
using namespace std::chrono_literals;
using thoonk::test::cmd;
using thoonk::test::run_coro;
using thoonk::test::sleep_for;
using thoonk::test::test_config;
using thoonk::test::unique_name;

/// Completion token giving (error_code, values...) tuples.
inline constexpr auto tok = asio::as_tuple(asio::use_awaitable);

using msg = std::pair<std::string, std::string>;  // channel, payload

/// Every message seen by a raw subscriber on some patterns, in order.
struct capture {
  std::vector<msg> msgs;
  std::vector<thoonk::subscription> subs;

  std::vector<msg> on(std::string_view channel) const {
    std::vector<msg> out;
    for (const auto& m : msgs)
      if (m.first == channel) out.push_back(m);
    return out;
  }
};

/// Subscribes a raw capture to `patterns` (PSUBSCRIBE) on `sub`.
/// (Variadic: g++ 12 rejects braced lists inside co_await expressions.)
template <class... Patterns>
asio::awaitable<std::shared_ptr<capture>> capture_patterns(thoonk::subscriber& sub,
                                                           Patterns... ps) {
  std::vector<std::string> patterns;
  (patterns.emplace_back(std::move(ps)), ...);
  auto cap = std::make_shared<capture>();
  for (const auto& p : patterns) {
    auto s = co_await sub.psubscribe(
        p,
        [cap](const thoonk::message& m) {
          cap->msgs.emplace_back(std::string(m.channel), std::string(m.payload));
        },
        asio::use_awaitable);
    cap->subs.push_back(std::move(s));
  }
  co_return cap;
}

/// Polls `pred` every 2 ms until it holds or `max` passes; returns pred().
template <class Pred>
asio::awaitable<bool> wait_until(Pred pred, std::chrono::milliseconds max = 10s) {
  auto until = std::chrono::steady_clock::now() + max;
  while (!pred() && std::chrono::steady_clock::now() < until) co_await sleep_for(2ms);
  co_return pred();
}

/// Lets in-flight pub/sub messages arrive (for "nothing more came" checks).
inline asio::awaitable<void> settle() { co_await sleep_for(50ms); }

inline std::string nul_join(std::string_view a, std::string_view b) {
  std::string s(a);
  s.push_back('\0');
  s.append(b);
  return s;
}

inline std::string key(std::string_view what, std::string_view feed) {
  return "feed." + std::string(what) + ":" + std::string(feed);
}

/// A recorded typed event (owning copies).
struct rec {
  thoonk::feed_event::kind_t kind;
  std::string id, item, where;
  bool replayed = false;
  friend bool operator==(const rec&, const rec&) = default;
};

inline rec to_rec(const thoonk::feed_event& e) {
  return rec{e.kind, std::string(e.id), std::string(e.item),
             e.kind == thoonk::feed_event::position ? e.where.to_string() : std::string{},
             e.replayed};
}

inline std::ostream& operator<<(std::ostream& os, const rec& r) {
  static const char* names[] = {"publish", "edit", "retract", "position"};
  return os << "{" << names[r.kind] << " " << r.id << " [" << r.item << "] " << r.where
            << (r.replayed ? " replayed" : "") << "}";
}

/// {{"max_length", n}}
inline thoonk::feed_config max_len(int n) { return {{"max_length", std::to_string(n)}}; }

/// Creates a feed with a unique name and returns the name.
inline asio::awaitable<std::string> make_feed(thoonk::client& c, std::string_view prefix,
                                              thoonk::feed_type type,
                                              thoonk::feed_config cfg = {}) {
  auto name = unique_name(prefix);
  co_await c.create_feed(name, type, std::move(cfg), asio::use_awaitable);
  co_return name;
}

inline std::int64_t ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace feedtest

namespace Catch {
template <>
struct StringMaker<feedtest::rec> {
  static std::string convert(const feedtest::rec& r) {
    std::ostringstream os;
    feedtest::operator<<(os, r);
    return os.str();
  }
};
}  // namespace Catch
