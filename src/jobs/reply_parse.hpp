// What the job and queue scripts' replies and statuses mean: integers and
// strings of a reply, and whether an error says the connection, not the
// request, failed. No I/O; as_int is unit-tested (test/unit/values_test.cpp).
#pragma once

#include <thoonk/resp3/value.hpp>

#include <boost/system/error_code.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace thoonk::detail::jobs {

// Scripts run with detail::run_script and their errors map with
// detail::reply_error (scripts/script_exec.hpp): one runner and one mapper
// for feeds and jobs.

/// Integer of a number reply, a decimal string (detail::parse_int's rule)
/// or a double reply (truncated toward zero); `fallback` otherwise, and for
/// a double outside std::int64_t (or NaN, infinite): such a value is not
/// one the library wrote, and no cast of it is made.
std::int64_t as_int(const resp3::value& v, std::int64_t fallback = 0);
/// String elements of an array reply (null elements become "").
std::vector<std::string> as_strings(resp3::value&& v);
/// Whether `ec` says the connection, not the request, failed: the
/// runner's rounds and heartbeats and a handle's hand-off check are tried
/// again after one.
bool is_transient(const boost::system::error_code& ec);

}  // namespace thoonk::detail::jobs
