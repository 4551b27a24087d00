// The short names the benchmark programs use at file scope (job_bench,
// job_engine_bench, peer_scenarios): Asio and the benchmark support by
// short namespace names, the clock, and the completion token that gives
// (error_code, values...) instead of throwing.
#pragma once

#include "support/bench_support.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>

namespace asio = boost::asio;
namespace bench = thoonk::bench;
using boost::system::error_code;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;
inline constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);
