// Helpers shared by the integration tests: a config for the test server,
// unique names, and one-line commands.
#pragma once

#include <thoonk/config.hpp>
#include <thoonk/connection.hpp>
#include <thoonk/request.hpp>
#include <thoonk/resp3/value.hpp>

#include <boost/asio/awaitable.hpp>

#include <string>
#include <string_view>

namespace thoonk::test {

/// A config pointing at the shared test server (or THOONK_REDIS_URL), with
/// short timeouts so a failure shows within a test's deadline.
thoonk::config test_config();

/// `prefix` + '-' + a random suffix, so tests never collide on a server.
std::string unique_name(std::string_view prefix);

/// Runs `req` (one command) and returns its reply; throws
/// boost::system::system_error on a transport error.
boost::asio::awaitable<resp3::value> exec_one(connection& c, request req);

/// `co_await cmd(conn, "HGET", key, field)`. Not a coroutine itself: the
/// request is built before the awaitable starts, so temporaries are safe.
template <class... Args>
boost::asio::awaitable<resp3::value> cmd(connection& c, std::string_view name,
                                         const Args&... args) {
  request r;
  r.push(name, args...);
  return exec_one(c, std::move(r));
}

}  // namespace thoonk::test
