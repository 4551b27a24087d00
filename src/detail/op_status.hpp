// An operation's error code together with the server's error text, so the
// text can reach the caller's thoonk::diagnostics (capture_diagnostics).
#pragma once

#include <boost/system/error_code.hpp>

#include <string>
#include <tuple>
#include <utility>

namespace thoonk::detail {

/// The outcome of one step or of a whole operation. Converts from and to
/// error_code, so code that does not care about the text reads as before;
/// the runners (run_script, exec_checked, the subscriber) fill in
/// `server_message` when the error came from a server reply.
struct op_status {
  boost::system::error_code ec;
  std::string server_message;

  op_status() = default;
  op_status(boost::system::error_code e) noexcept : ec(e) {}  // NOLINT: implicit by design
  template <class E>
  requires boost::system::is_error_code_enum<E>::value op_status(E e)
  noexcept : ec(e) {}  // NOLINT: as error_code's own
  op_status(boost::system::error_code e, std::string message)
      : ec(e), server_message(std::move(message)) {}

  explicit operator bool() const noexcept { return static_cast<bool>(ec); }
  operator boost::system::error_code() const noexcept { return ec; }  // NOLINT
  // Only against error enums (error::lost_claim ...): comparing with another
  // op_status or an error_code goes through the conversion above.
  template <class E>
  requires boost::system::is_error_code_enum<E>::value bool operator==(E e) const noexcept {
    return ec == e;
  }
};

/// What an operation coroutine yields: its status and its results.
template <class... Ts>
using op_result = std::tuple<op_status, Ts...>;

}  // namespace thoonk::detail
