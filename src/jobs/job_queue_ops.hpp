// What the files of thoonk::job_queue's operations (job_queue_ops_*.cpp)
// include, and the names they use unqualified. For those files only: the
// using-declarations below are made in namespace thoonk.
#pragma once

#include <thoonk/job_queue.hpp>

#include "detail/spawn.hpp"
#include "detail/unix_time.hpp"
#include "feeds/common.hpp"
#include "jobs/job_queue_impl.hpp"
#include "thoonk_lua_scripts.hpp"

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;
using detail::job_queue_impl;
using detail::op_result;
using detail::op_status;
using detail::use_nothrow;
using namespace detail::jobs;  // NOLINT
namespace scripts = detail::scripts;

}  // namespace thoonk
