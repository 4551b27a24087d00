// A request: one or more Redis commands serialized as RESP arrays of bulk
// strings, sent together (a pipeline) and answered with one reply each.
#pragma once

#include <charconv>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <ranges>
#include <span>
#include <string>
#include <string_view>
#include <thoonk/export.hpp>

namespace thoonk {

/// Builds the wire form of one or more commands. No I/O.
///
/// \code
///   thoonk::request req;
///   req.push("SET", "key", "value");
///   req.push("INCRBY", "counter", 5);
///   auto resp = co_await conn.exec(req, asio::use_awaitable);  // resp.size() == 2
/// \endcode
///
/// Arguments may be anything convertible to std::string_view or any
/// integral type. Binary data (including NUL) is fine: every argument is a
/// length-prefixed bulk string.
///
/// Commands of the SUBSCRIBE family get their confirmations as pushes, not
/// as replies, so they do not count in expected_replies(); they are meant for
/// the subscriber connection.
class THOONK_API request {
 public:
  /// Appends one command.
  template <class... Args>
  void push(std::string_view command, const Args&... args) {
    begin_command(1 + sizeof...(Args), command);
    append_arg(command);
    (append_arg(args), ...);
  }

  /// Appends one command whose trailing arguments come from a range
  /// (`keys` before `values`, both may be empty). The range is read twice
  /// (count, then bytes), so it must be a forward range.
  template <std::ranges::forward_range Range>
  void push_range(std::string_view command, std::span<const std::string_view> head,
                  const Range& tail) {
    std::size_t n = 1 + head.size();
    for (const auto& x : tail) {
      (void)x;
      ++n;
    }
    begin_command(n, command);
    append_arg(command);
    for (auto h : head) append_arg(h);
    for (const auto& x : tail) append_arg(x);
  }

  /// Number of commands pushed.
  std::size_t commands() const noexcept { return commands_; }
  /// Number of replies the server sends for this request.
  std::size_t expected_replies() const noexcept { return expected_replies_; }
  /// The serialized bytes.
  const std::string& payload() const noexcept { return payload_; }
  bool empty() const noexcept { return commands_ == 0; }  ///< true when no command was pushed

  /// Removes every command; the buffer keeps its capacity for reuse.
  void clear() noexcept {
    payload_.clear();
    commands_ = 0;
    expected_replies_ = 0;
  }
  /// Reserves `bytes` of payload buffer.
  void reserve(std::size_t bytes) { payload_.reserve(bytes); }

  // -- low-level building blocks (used by push; public for generated code) --
  /// Starts a command of `argc` arguments (the command name included).
  void begin_command(std::size_t argc, std::string_view command);
  /// Appends one argument of the command begun with begin_command().
  void append_arg(std::string_view s) {
    append_header('$', s.size());
    payload_.append(s.data(), s.size());
    payload_.append("\r\n", 2);
  }
  /// Appends an integer argument, in decimal.
  template <std::integral I>
  requires(!std::same_as<I, bool> && !std::same_as<I, char>) void append_arg(I v) {
    char buf[24];
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    append_arg(std::string_view(buf, static_cast<std::size_t>(r.ptr - buf)));
  }
  /// As append_arg(std::string_view).
  void append_arg(const char* s) { append_arg(std::string_view(s)); }
  /// As append_arg(std::string_view).
  void append_arg(const std::string& s) { append_arg(std::string_view(s)); }

 private:
  void append_header(char prefix, std::size_t n) {
    char buf[24];
    buf[0] = prefix;
    auto r = std::to_chars(buf + 1, buf + sizeof buf - 2, n);
    *r.ptr++ = '\r';
    *r.ptr++ = '\n';
    payload_.append(buf, static_cast<std::size_t>(r.ptr - buf));
  }

  std::string payload_;
  std::size_t commands_ = 0;
  std::size_t expected_replies_ = 0;
};

}  // namespace thoonk
