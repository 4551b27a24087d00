// How every public asynchronous function of the library turns an Asio
// completion token into a type-erased handler, so that the operation itself
// is implemented once, out of line, in src/ (see Asio's type-erasure
// example). Headers stay light: no operation logic is instantiated in user
// translation units, only this small adapter.
#pragma once

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/async_result.hpp>

#include <utility>

namespace thoonk::detail {

/// Initiates an operation with completion signature `Signature`.
/// `start` is invoked (at initiation time: immediately for callbacks and
/// use_awaitable, when the deferred operation is launched for `deferred`)
/// with an `any_completion_handler<Signature>`. Capture arguments by value
/// in `start` so deferred initiation never sees dangling references.
template <class Signature, class CompletionToken, class Start>
auto initiate(CompletionToken&& token, Start&& start) {
  return boost::asio::async_initiate<CompletionToken, Signature>(
      [](auto handler, auto start_fn) {
        std::move(start_fn)(boost::asio::any_completion_handler<Signature>(std::move(handler)));
      },
      token, std::forward<Start>(start));
}

}  // namespace thoonk::detail
