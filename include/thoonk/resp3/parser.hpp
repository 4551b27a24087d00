// Incremental RESP3/RESP2 parser. No I/O.
//
// The caller keeps a buffer of received bytes and presents the unconsumed
// part to consume() each time more bytes arrive. consume() takes only
// complete tokens (a header line with its CRLF, or a bulk payload with its
// CRLF), so a partially received token simply stays in the caller's buffer.
// Aggregates are built across calls on an explicit stack, so a large array
// arriving in many reads is never re-parsed.
//
// Any error is final: the stream cannot be resynchronised, the connection
// that owns the parser must be closed (docs/design.md §2).
#pragma once

#include <thoonk/export.hpp>
#include <thoonk/resp3/value.hpp>

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace thoonk::resp3 {

/// Hard limits applied while parsing. Every length on the wire is checked
/// against them before any memory is reserved.
struct THOONK_API parser_limits {
  std::size_t max_bulk_length = 512u * 1024 * 1024;  ///< bytes in one bulk string/error/verbatim
  /// Elements of one array/set/push; pairs of one map.
  std::size_t max_aggregate_elements = 4u * 1024 * 1024;
  std::size_t max_depth = 32;  ///< nesting of aggregates (top level is depth 1)
  std::size_t max_reply_bytes = 1024u * 1024 * 1024;  ///< wire bytes of one top-level reply
  std::size_t max_line_length = 64u * 1024;  ///< a header or simple string/error line, without CRLF
  /// Values in one top-level reply: every scalar, null and aggregate, the
  /// reply itself and attribute entries included. Bounds the nodes of a
  /// reply of small values: each value is a resp3::value node (64 bytes on
  /// x86-64 with libstdc++) however few wire bytes it had (`_\r\n` is 3),
  /// so wire bytes alone let a hostile reply take 21 times its size. At the
  /// default a reply's nodes take at most about 64 MiB (more for a moment
  /// while the largest list's storage is being regrown). Fails with
  /// error::reply_too_many_values.
  std::size_t max_reply_values = 1024u * 1024;
  /// Estimated heap memory of the replies held at once: the reply being
  /// parsed plus those its owner reports as still held (set_held_memory).
  /// A connection holds the replies already received for its oldest
  /// unanswered request (a request of several commands gets all its replies
  /// together, with the last one), so on a connection this bounds the
  /// memory of the replies it holds, not of each reply alone. The estimate
  /// counts the storage of every element list (value_list::storage_bytes of
  /// its capacity) and every string too long for the small-string buffer;
  /// it is checked before each allocation, so it never exceeds the limit.
  /// Fails with error::reply_memory_exceeded.
  std::size_t max_reply_memory = 1024u * 1024 * 1024;
};

/// True for the errors a parser reports (malformed replies and exceeded
/// limits): the connection that saw one closes, and the request whose reply
/// it was gets it.
THOONK_API bool is_parse_error(const boost::system::error_code& ec) noexcept;

/// An incremental RESP3/RESP2 parser: feed it bytes as they arrive, take complete replies as trees
/// of resp3::value. No I/O. Not thread-safe: one parser per connection, used by one thread at a
/// time. Malformed input and the limits of parser_limits are errors (resp3 parse errors,
/// is_parse_error()).
class THOONK_API parser {
 public:
  explicit parser(parser_limits limits = {});  ///< a parser enforcing `limits`

  /// Consumes complete tokens from the front of `data` and returns how many
  /// bytes were consumed. Stops as soon as a top-level value is complete
  /// (then ready() is true), when only an incomplete token is left, or on
  /// error (then `ec` is set and the parser must not be used again except
  /// after reset()).
  std::size_t consume(std::string_view data, boost::system::error_code& ec);

  /// True when a complete top-level value is waiting to be taken.
  bool ready() const noexcept { return ready_; }

  /// Takes the completed top-level value. Precondition: ready().
  value take();

  /// The memory estimate (see max_reply_memory) of the value waiting to be
  /// taken. Valid while ready(): read it before take().
  std::size_t ready_memory() const noexcept { return ready_memory_; }

  /// Memory (in the estimate of max_reply_memory) that values taken
  /// earlier still hold for the owner: a connection reports the replies it
  /// keeps for its oldest unanswered request. The reply being parsed may
  /// take max_reply_memory minus this. The owner sets it before each
  /// consume(); reset() sets it to 0.
  void set_held_memory(std::size_t bytes) noexcept { held_memory_ = bytes; }
  /// The memory the parser counts as held (checked against the limits).
  std::size_t held_memory() const noexcept { return held_memory_; }

  /// Forgets any partial state (after an error or a reconnect).
  void reset();

  /// The limits given at construction.
  const parser_limits& limits() const noexcept { return limits_; }

 private:
  // One open aggregate on the explicit stack. An attribute map (`|N`) is
  // parsed like a map but, when complete, its elements become
  // pending_attributes_ instead of an element of the enclosing aggregate.
  struct frame {
    value v;                // the aggregate being filled
    std::size_t remaining;  // elements still expected
    bool attribute;         // true for an attribute map
  };

  // Result of looking for one CRLF-terminated line at the front of the input.
  enum class line_status : std::uint8_t { complete, incomplete, failed };

  // Each parse_* helper looks at one token at the front of `data` (never
  // empty) and returns the bytes it consumed: 0 when the token is still
  // incomplete, or when it failed (then error_ is set).
  std::size_t parse_token(std::string_view data);
  std::size_t parse_simple(std::string_view data);
  std::size_t parse_bulk(std::string_view data, resp3::type t);
  std::size_t parse_aggregate(std::string_view data);
  // Finds the CRLF ending the line that starts at data[0] (the type byte);
  // `line` receives the text between the type byte and the CRLF.
  line_status find_line(std::string_view data, std::string_view& line, std::size_t& token_len);

  // Places a finished value into the innermost open aggregate, or makes it
  // the finished top-level value.
  // Returns false (error_ set) when an element list it must grow would
  // exceed max_reply_memory.
  bool finish_value(value&& v);
  // Counts one more value holding a string of `string_bytes`; false (error_
  // set) when that exceeds max_reply_values or max_reply_memory.
  bool admit_value(std::size_t string_bytes);
  // What max_reply_memory leaves for the current reply to take.
  std::size_t memory_left() const noexcept;
  // Gives `v` the attribute map that preceded it, if any.
  void attach_attributes(value& v);
  // Makes `ec` the parser's (sticky) error; returns 0, the bytes a failed
  // token consumes.
  std::size_t fail(boost::system::error_code ec);
  // Finishes a token that is one whole value of `len` wire bytes (with the
  // attributes before it) and returns `len`.
  std::size_t finish_token(value&& v, std::size_t len);

  parser_limits limits_;
  std::vector<frame> stack_;
  value_list pending_attributes_;  // attribute map read but not yet attached
  std::size_t reply_bytes_ = 0;    // wire bytes of the current top-level reply
  std::size_t reply_values_ = 0;   // values of the current top-level reply
  std::size_t reply_memory_ = 0;   // estimated heap bytes of the current reply
  std::size_t held_memory_ = 0;    // what the owner holds of earlier replies
  std::size_t ready_memory_ = 0;   // estimated heap bytes of result_
  value result_;
  boost::system::error_code error_;  // sticky: set once, cleared only by reset()
  bool ready_ = false;
};

/// Parses a buffer that holds whole replies (tests, tools) and returns the
/// values in order. Malformed input sets `ec` to the parser's error; a buffer
/// that ends inside a reply sets `ec` to error::missing_crlf (truncated).
THOONK_API std::vector<value> parse_all(std::string_view data, boost::system::error_code& ec,
                                        parser_limits limits = {});

}  // namespace thoonk::resp3
