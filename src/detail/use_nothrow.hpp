// The completion token of the library's own coroutines: an awaited
// operation gives its error_code in a tuple instead of throwing, so failure
// paths are ordinary code.
#pragma once

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace thoonk::detail {

inline constexpr auto use_nothrow = boost::asio::as_tuple(boost::asio::use_awaitable);

}  // namespace thoonk::detail
