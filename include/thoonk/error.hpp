// Error codes of thoonk-asio.
//
// Every asynchronous operation in the library completes with a
// boost::system::error_code. Codes from this header belong to one category,
// "thoonk"; transport failures keep their system/asio codes (for example
// boost::asio::error::connection_refused) and cancellation is reported as
// boost::asio::error::operation_aborted. Every message says what went wrong
// and, where there is something to do, what to do about it.
#pragma once

#include <thoonk/export.hpp>

#include <boost/system/error_code.hpp>

#include <type_traits>

namespace thoonk {

enum class error {
  // ---- RESP3 protocol (fatal to the connection that saw them) ----------
  invalid_type_byte = 1,  ///< a reply started with a byte that is no RESP type
  invalid_length,         ///< a length/count was not a valid decimal, negative (other than -1) or
                          ///< overflowed
  invalid_number,         ///< an integer reply was not a valid 64-bit decimal
  invalid_double,         ///< a double reply did not parse
  invalid_boolean,        ///< a boolean reply was neither #t nor #f
  missing_crlf,           ///< a token was not terminated by CRLF where the protocol requires it
  bulk_too_large,         ///< a bulk length exceeded parser_limits::max_bulk_length
  too_many_elements,      ///< an aggregate exceeded parser_limits::max_aggregate_elements
  nesting_too_deep,       ///< aggregates nested deeper than parser_limits::max_depth
  reply_too_large,        ///< one reply exceeded parser_limits::max_reply_bytes
  line_too_long,          ///< a header line exceeded parser_limits::max_line_length
  unsupported_streamed,   ///< a streamed string/aggregate ($?, *?) which Redis does not send
  unexpected_reply,       ///< a reply arrived with no request waiting for it

  // ---- connection --------------------------------------------------------
  unknown_outcome,       ///< the connection died after the request was written
  not_connected,         ///< the request asked to fail rather than wait for a connection
  connect_timeout,       ///< connect + handshake did not finish within connect_timeout
  health_check_timeout,  ///< the server stayed silent past the health-check deadline
  request_timeout,       ///< the request did not complete within its timeout
  handshake_failed,      ///< HELLO/SELECT/SETNAME returned an error
  auth_failed,           ///< AUTH (or HELLO AUTH) was rejected
  client_stopped,        ///< the client was stopped while the operation was pending
  invalid_url,           ///< a redis:// URL (e.g. THOONK_REDIS_URL) did not parse
  subscribe_refused,     ///< the server refused SUBSCRIBE/PSUBSCRIBE (ACL channel permissions?)

  // ---- replies -----------------------------------------------------------
  server_error,     ///< the server answered with an error reply (its text: thoonk::diagnostics)
  unexpected_type,  ///< the reply had a type the typed API did not expect
  script_error,     ///< a Lua script of the library failed on the server (its text:
                    ///< thoonk::diagnostics)

  // ---- names and sizes (checked before any I/O) ---------------------------
  invalid_name,      ///< empty, too long, contains NUL or unrequested braces
  invalid_id,        ///< empty, too long or contains NUL
  item_too_large,    ///< item larger than the configured max_item_size
  invalid_argument,  ///< another argument is out of range

  // ---- feeds -------------------------------------------------------------
  feed_exists,      ///< create_feed on a name that exists
  feed_not_found,   ///< the feed does not exist (create it first)
  wrong_feed_type,  ///< the feed exists with another type
  id_not_found,     ///< the item id does not exist in the feed

  // ---- queues and jobs ---------------------------------------------------
  queue_empty,       ///< nothing arrived within the timeout
  job_not_found,     ///< no job with that id
  job_not_claimed,   ///< the job is not claimed (finish/cancel/stall/heartbeat)
  job_not_stalled,   ///< retry of a job that is not stalled
  lost_claim,        ///< the claim token is no longer current: the job was reclaimed
  result_timeout,    ///< no result was stored within the timeout
  worker_exists,     ///< a live worker is registered under this name (job_queue::run)
  worker_not_found,  ///< no worker is registered under this name (job_queue::fail_worker)

  // ---- permissions (Redis ACL; nothing was changed) ----------------------
  no_permission,          ///< NOPERM for a command this operation needs
  no_script_permission,   ///< the user may not run the library's scripts (EVALSHA / SCRIPT LOAD)
  no_channel_permission,  ///< the user may not PUBLISH on the operation's notification channel
  no_key_permission,      ///< the user may not access the feed's or queue's keys

  // ---- TLS (connection setup; the reason: connection_event::server_message) --
  tls_handshake_failed,      ///< the TLS handshake failed (plain port? protocol version? client
                             ///< certificate refused?)
  tls_certificate_rejected,  ///< the server's certificate failed verification (CA, host name,
                             ///< validity dates)
  tls_config_invalid,        ///< the configured CA, certificate or key could not be loaded
  tls_required,  ///< a plain connection was answered as a TLS port answers one (use rediss://)

  // ---- reply memory (fatal to the connection, like the RESP3 errors above) --
  reply_too_many_values,  ///< one reply held more values than parser_limits::max_reply_values
  reply_memory_exceeded,  ///< a request's replies needed more memory than
                          ///< parser_limits::max_reply_memory

  // ---- replicas and failover ---------------------------------------------
  not_primary,  ///< the server is a replica (ROLE, or a READONLY reply): another address is tried

  // ---- Redis Cluster (docs/cluster.md) --------------------------------------
  cluster_redirect_limit,        ///< a request was redirected (MOVED/ASK) or deferred (TRYAGAIN,
                                 ///< CLUSTERDOWN) more times than allowed; it did not run
  cluster_topology_unavailable,  ///< no node answered CLUSTER SHARDS / CLUSTER SLOTS, or the
                                 ///< map left the request's slot without a primary
  cluster_cross_slot,            ///< the operation needs keys of two hash slots (a job queue and a
                                 ///< dead-letter queue of another slot); it did not run
};

/// The category of thoonk::error codes ("thoonk").
THOONK_API const boost::system::error_category& category() noexcept;

inline boost::system::error_code make_error_code(error e) noexcept {
  return {static_cast<int>(e), category()};
}

}  // namespace thoonk

namespace boost::system {
template <>
struct is_error_code_enum<thoonk::error> : std::true_type {};
}  // namespace boost::system

// Conditions group the codes above (condition.hpp).
#include <thoonk/condition.hpp>
