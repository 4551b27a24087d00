// The scripts of queues and job queues, by the names the job code uses.
// Each is the embedded script of one file of src/lua (docs/architecture.md
// "Scripts": one file per script, named after the operation it implements,
// the shared prelude and the key layout of its kind prepended at build
// time). The KEYS each takes are its layout's (src/lua/layouts/queue.lua,
// job.lua, lock.lua; built by job_keys.hpp); its ARGV are documented at the
// top of its file.
#pragma once

#include <thoonk/script.hpp>

#include "thoonk_lua_scripts.hpp"

namespace thoonk::detail::jobs::lua {

namespace files = thoonk::detail::scripts;

// queue
inline const script& queue_put() { return files::queues_put(); }
inline const script& queue_get() { return files::queues_get(); }
inline const script& queue_give_back() { return files::queues_give_back(); }
inline const script& queue_read() { return files::queues_read(); }  // length / ids

// job queue
inline const script& job_put() { return files::jobs_put(); }
inline const script& job_claim() { return files::jobs_claim(); }
inline const script& job_release() { return files::jobs_release(); }
inline const script& job_finish() { return files::jobs_finish(); }
inline const script& job_cancel() { return files::jobs_cancel(); }
inline const script& job_stall() { return files::jobs_stall(); }
inline const script& job_heartbeat() { return files::jobs_heartbeat(); }
inline const script& job_retry() { return files::jobs_retry(); }
inline const script& job_retract() { return files::jobs_retract(); }
inline const script& job_read() { return files::jobs_read(); }  // failures / ids / counts / type

// maintenance
inline const script& maint_expire() { return files::maintenance_expire(); }
inline const script& maint_scan() { return files::maintenance_scan(); }
inline const script& maint_requeue_unaccounted() {
  return files::maintenance_requeue_unaccounted();
}
inline const script& maint_orphans() { return files::maintenance_orphans(); }
inline const script& maint_store_suspects() { return files::maintenance_store_suspects(); }
inline const script& maint_unlock() { return files::maintenance_unlock(); }

}  // namespace thoonk::detail::jobs::lua
