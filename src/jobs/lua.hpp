// The Lua scripts of queues and job queues (docs/design.md §3: one atomic script
// per multi-step operation; every key in KEYS, every datum in ARGV, ms
// timestamps from the client, notifications PUBLISHed inside the script).
// The KEYS/ARGV layout of each script is documented next to its source in
// lua.cpp; the C++ callers build them with the helpers in job_keys.hpp.
#pragma once

#include <thoonk/script.hpp>

namespace thoonk::detail::jobs::lua {

// queue
const script& queue_put();
const script& queue_get();
const script& queue_give_back();
const script& queue_read();  // length / ids

// job queue
const script& job_put();
const script& job_claim();
const script& job_release();
const script& job_finish();
const script& job_cancel();
const script& job_stall();
const script& job_heartbeat();
const script& job_retry();
const script& job_retract();
const script& job_read();  // failures / ids / counts / type check

// maintenance
const script& maint_expire();
const script& maint_scan();
const script& maint_requeue_unaccounted();
const script& maint_orphans();
const script& maint_store_suspects();
const script& maint_unlock();

}  // namespace thoonk::detail::jobs::lua
