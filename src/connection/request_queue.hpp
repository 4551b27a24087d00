// The multiplexer's bookkeeping, without I/O: which requests are waiting to
// be written, which were written and await replies, how replies match them,
// and what happens to each on cancellation, disconnect and stop.
//
// Requests are serialized into one staging buffer when they are queued, so a
// write takes everything queued with a single buffer swap (no per-request
// copy or gather at write time) and the caller's request object need not
// outlive the initiation.
#pragma once

#include "detail/executor_util.hpp"

#include <thoonk/connection.hpp>

#include <boost/asio/any_completion_handler.hpp>

#include <cstdint>
#include <deque>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::detail {

using exec_handler = boost::asio::any_completion_handler<void(boost::system::error_code, response)>;

/// A finished request whose handler the I/O layer must invoke.
struct completion {
  handler_box<void(boost::system::error_code, response)> handler;
  boost::system::error_code ec;
  response replies;
  /// Set for requests pushed with `retain`: what push() needs to queue the
  /// same request again (see request_queue::push_again).
  struct retained_request {
    std::uint64_t seq = 0;
    std::string payload;
    std::size_t expected = 0;
    bool wait_for_connection = true;
    std::shared_ptr<void> guard;
    unsigned retries = 0;  ///< times it was already queued again
  };
  std::unique_ptr<retained_request> retained;
};

class request_queue {
 public:
  /// Queues a request. `handler` may be empty for internal requests whose
  /// replies are discarded (health-check PINGs). `guard` is kept alive as
  /// long as the entry (a per-request timeout timer, for example).
  /// `retain`: keep a copy of the bytes, so that the completion can give
  /// the request back to push_again() (a reply said it was not executed).
  std::uint64_t push(std::string_view payload, std::size_t expected_replies, exec_handler handler,
                     bool wait_for_connection, std::shared_ptr<void> guard = {},
                     bool retain = false);
  /// Queues a retained request again, under its first sequence number (so
  /// its timeout and cancellation still find it), with `handler`.
  void push_again(completion::retained_request r, exec_handler handler);

  bool has_unwritten() const noexcept { return written_ < entries_.size(); }
  /// Written and not yet fully answered (abandoned ones included).
  std::size_t in_flight() const noexcept { return written_; }
  std::size_t size() const noexcept { return entries_.size(); }

  /// Marks every queued request as written and returns the bytes to write
  /// (valid until the next take_batch()). Requests that expect no reply are
  /// completed by on_batch_written().
  const std::string& take_batch();

  /// Completes written requests at the front that expect no reply
  /// (SUBSCRIBE family), appending them to `out`.
  void on_batch_written(std::vector<completion>& out);

  /// Matches one reply to the oldest written request. Returns false when no
  /// written request is waiting (a protocol desync: the caller closes the
  /// connection). Appends a completion when the request got its last reply
  /// and was not abandoned. `memory` is the reply's memory estimate
  /// (resp3::parser::ready_memory): held_memory() counts it while the
  /// request waits for more replies.
  bool on_reply(resp3::value&& v, std::vector<completion>& out, std::size_t memory = 0);

  /// The memory estimate of the replies kept for requests that still wait
  /// for more (only the oldest written request can: replies arrive in
  /// order). A request's replies stop counting when it completes, fails or
  /// is abandoned. The connection's parser takes it as its held memory.
  std::size_t held_memory() const noexcept { return held_memory_; }

  /// Cancels request `seq`: a queued one is removed (its bytes are never
  /// sent), a written one is abandoned (its replies will be discarded).
  /// Appends the completion with `ec`. No-op when `seq` already completed.
  void cancel(std::uint64_t seq, boost::system::error_code ec, std::vector<completion>& out);

  /// The connection was lost. Written requests fail with
  /// error::unknown_outcome (abandoned ones vanish), except the oldest one,
  /// which gets `front_ec` when that is set (the reply that could not be
  /// parsed was its own: bulk_too_large says more than unknown_outcome).
  /// Queued requests stay for the next connection except those that asked
  /// not to wait, which fail with error::not_connected.
  void on_disconnect(std::vector<completion>& out, boost::system::error_code front_ec = {});

  /// Queued requests that asked not to wait fail with error::not_connected
  /// (used while no connection is up).
  void fail_non_waiting(std::vector<completion>& out);

  /// Stop: everything completes; queued with `unwritten_ec`, written with
  /// error::unknown_outcome.
  void fail_all(boost::system::error_code unwritten_ec, std::vector<completion>& out);

 private:
  struct entry {
    std::uint64_t seq = 0;
    std::size_t offset = 0;  // position in staging_ while unwritten
    std::size_t size = 0;
    std::size_t expected = 0;
    bool wait_for_connection = true;
    std::size_t received = 0;  // replies seen, including discarded ones
    bool abandoned = false;
    response replies;
    std::size_t reply_memory = 0;  // memory estimate of `replies`
    handler_box<void(boost::system::error_code, response)> handler;
    std::shared_ptr<void> guard;
    bool retain = false;
    std::string retained_bytes;  // retain: a copy of the request's bytes
    unsigned retries = 0;
  };

  // Removes a not-yet-written entry's bytes from staging_.
  void erase_unwritten(std::size_t index);
  // Completes `e` (hands its handler the replies, or `ec`); its replies no
  // longer count in held_memory_.
  void finish(entry& e, boost::system::error_code ec, std::vector<completion>& out);

  std::deque<entry> entries_;  // [0, written_) written, [written_, size) queued
  std::size_t written_ = 0;
  std::size_t held_memory_ = 0;  // sum of the entries' reply_memory
  std::uint64_t next_seq_ = 1;
  std::string staging_;  // bytes of the queued entries, in order
  std::string writing_;  // the batch being written
};

}  // namespace thoonk::detail
