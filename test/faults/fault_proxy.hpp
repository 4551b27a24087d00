// A TCP proxy on 127.0.0.1 that sits between a client and redis-server and
// misbehaves on demand: drops everything (a dead peer), resets every
// connection, resets the next connections at their first command, forwards
// one byte per write, or cuts the connection after a given number of bytes
// from the server (in the middle of a large reply).
//
// fault_plan decides, without I/O, what happens to the bytes one read
// produced; fault_proxy is the thin coroutine loop that carries it out.
#pragma once

#include <boost/asio/any_io_executor.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace thoonk::faults {

/// What the proxy does with the bytes it reads.
enum class fault_mode {
  pass,       ///< forwards every byte as read
  blackhole,  ///< reads and drops everything, both ways; connections stay open
  trickle,    ///< forwards every byte in a write of its own
};

/// Which way bytes flow.
enum class direction { to_server, to_client };

/// The proxy's decisions. Not thread-safe; no I/O.
class fault_plan {
 public:
  /// What to do with `n` bytes just read.
  struct action {
    std::size_t forward = 0;  ///< bytes to forward (the first ones), the rest dropped
    std::size_t chunk = 0;    ///< forward them in writes of at most this many bytes
    bool reset = false;       ///< after forwarding, reset both sides of the connection
  };

  void set_mode(fault_mode m) noexcept { mode_ = m; }
  fault_mode mode() const noexcept { return mode_; }

  /// Arms a one-shot cut: after `bytes` more bytes towards the client (any
  /// connection), the connection carrying the last of them is reset and
  /// the cut disarms itself.
  void arm_cut(std::size_t bytes) noexcept {
    cut_armed_ = true;
    cut_remaining_ = bytes;
  }
  bool cut_armed() const noexcept { return cut_armed_; }
  /// Cuts made so far.
  std::uint64_t cuts() const noexcept { return cuts_; }

  /// Arms `connections` one-shot refusals: each of the next connections to
  /// send a first byte is reset there, unanswered and with nothing
  /// forwarded (what a TLS port does to a plain client, and a proxy
  /// restarting to a setup in flight).
  void refuse_next(int connections) noexcept { refusals_ = connections; }
  /// Refusals made so far.
  std::uint64_t refused() const noexcept { return refused_; }

  /// What to do with `n` bytes just read; `first`: the connection's first
  /// read in direction `d`.
  action on_read(direction d, std::size_t n, bool first = false) noexcept;

 private:
  fault_mode mode_ = fault_mode::pass;
  bool cut_armed_ = false;
  std::size_t cut_remaining_ = 0;
  std::uint64_t cuts_ = 0;
  int refusals_ = 0;
  std::uint64_t refused_ = 0;
};

/// Listens on 127.0.0.1 (a free port) and connects each accepted client to
/// `upstream_port` on 127.0.0.1. Runs on `ex` (one thread); it stops, closing
/// every connection, when stop() is called or the object is destroyed.
class fault_proxy {
 public:
  fault_proxy(boost::asio::any_io_executor ex, unsigned short upstream_port);
  ~fault_proxy();
  fault_proxy(const fault_proxy&) = delete;
  fault_proxy& operator=(const fault_proxy&) = delete;

  unsigned short port() const noexcept;
  fault_plan& plan() noexcept;
  /// Resets (RST) every open connection now, in both directions.
  void reset_all();
  std::uint64_t accepted() const noexcept;
  void stop();

  /// The loop's shared state (fault_proxy.cpp), kept alive by its coroutines.
  struct state;

 private:
  std::shared_ptr<state> st_;
};

}  // namespace thoonk::faults
