// Running library scripts from the library's own coroutines.
#pragma once

#include <thoonk/connection.hpp>
#include <thoonk/script.hpp>

#include <boost/asio/awaitable.hpp>

#include <span>
#include <string_view>
#include <tuple>

namespace thoonk::detail {

/// EVALSHA with transparent SCRIPT LOAD on NOSCRIPT. The views must stay
/// valid until the awaitable completes (they live in the caller's frame).
/// The value is the script's reply (an error value on a Lua error).
boost::asio::awaitable<std::tuple<boost::system::error_code, resp3::value>> eval_script(
    connection& conn, const script& s, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts = {});

/// Awaitable form of connection::exec for the library's coroutines.
boost::asio::awaitable<std::tuple<boost::system::error_code, response>> exec_co(
    connection& conn, const request& req, exec_options opts = {});

}  // namespace thoonk::detail
