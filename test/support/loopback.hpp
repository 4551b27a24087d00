// Loopback peers for the cases a real redis-server cannot be made to
// produce: malformed bytes, a server without HELLO, a HELLO refused by the
// ACL (Redis 6), a LOADING reply at connect time, and ports nothing listens on.
#pragma once

#include <thoonk/config.hpp>

#include <boost/asio/awaitable.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>

#include <memory>
#include <string>
#include <vector>

namespace thoonk::test {

/// The replies of one accepted connection, in order: each answers the
/// client's next write, whatever it was.
using peer_session = std::vector<std::string>;

/// A scripted TCP peer on a free loopback port. It accepts connections one
/// after the other, plays one session on each, then holds the socket open
/// until the client closes it or sends more. Not a Redis stand-in: it sends
/// only the bytes each case needs.
///
/// Starts at construction (on `ioc`, when someone runs it). The accepted
/// sockets live in the peer's coroutine, so the peer may be destroyed before
/// `ioc`; not thread-safe.
class scripted_peer {
 public:
  scripted_peer(boost::asio::io_context& ioc, std::vector<peer_session> sessions);

  /// test_config() pointed at the peer, with no client name, no health
  /// checks (the peer answers no PING) and a 2 s connect timeout.
  thoonk::config config() const;

  /// Every byte the client sent so far.
  const std::string& received() const noexcept;

 private:
  struct state;
  static boost::asio::awaitable<void> play(std::shared_ptr<state> st,
                                           std::vector<peer_session> sessions);
  std::shared_ptr<state> state_;
};

/// A loopback TCP port that was free a moment ago: nothing listens there.
unsigned short free_port(boost::asio::io_context& ioc);

}  // namespace thoonk::test
