// Error conditions: the groups of error codes an application decides on.
//
// thoonk::error names every failure precisely and grows with the library; a
// `switch` over it in application code breaks (or silently misses a case)
// when a release adds a code. Decide on a condition instead:
//
//     catch (const boost::system::system_error& e) {
//       if (e.code() == thoonk::condition::transient) retry_later();
//       else if (e.code() == thoonk::condition::not_found) create_it();
//       else throw;
//     }
//
// Every thoonk::error code belongs to exactly one condition, and so do the
// transport codes the library passes through (boost::asio::error::*,
// system errors) and cancellation. A new code joins an existing condition;
// conditions are only ever added in a major release. docs/errors.md lists
// the codes of each condition.
#pragma once

#include <boost/system/error_code.hpp>
#include <thoonk/export.hpp>

#include <type_traits>

namespace thoonk {

/// What kind of failure an error code is. Compare a code with one
/// (`ec == thoonk::condition::transient`); thoonk::condition_of names the
/// condition of a code.
enum class condition {
  /// The operation may succeed if tried again later, unchanged: the
  /// connection was lost or not yet up, a timeout passed, the server was
  /// loading or a cluster was moving slots (error::unknown_outcome is here:
  /// the operation may have run; check before repeating a non-idempotent
  /// one). Transport codes (boost::asio::error::*, system errors) are too.
  transient = 1,
  /// Cancelled by the caller (boost::asio::error::operation_aborted) or
  /// ended by client::stop (error::client_stopped).
  cancelled,
  /// The server sent something the client refuses (a malformed or
  /// oversized reply, one no request waited for). The connection was
  /// closed; the operation failed. Repeating may work on a new connection;
  /// a persistent one points at a server or proxy that is not Redis, or at
  /// a limit (config::parser_limits) set too low.
  protocol,
  /// The application's input was refused before any I/O: a bad name or
  /// id, an item over the size limit, an argument out of range, a URL that
  /// does not parse, a configuration that cannot work. Repeating it
  /// unchanged fails again.
  invalid_input,
  /// What the operation names does not exist: a feed, an item id, a job,
  /// a worker; or nothing arrived in time (queue_empty, result_timeout).
  not_found,
  /// It exists but is in another state or of another kind: a feed that
  /// exists already or has another type, a job that is not claimed or not
  /// stalled, a claim token that ended, a worker name in use.
  wrong_state,
  /// The server (its ACL) or the TLS peer refused this client: a missing
  /// permission, a wrong password, a refused subscription, a certificate
  /// that does not verify. Nothing was changed.
  permission,
  /// The server answered with an error the typed API does not expect, or a
  /// script of the library failed on the server; the server's text is in
  /// thoonk::diagnostics.
  server_refused,
};

/// The category of thoonk::condition ("thoonk.condition").
THOONK_API const boost::system::error_category& condition_category() noexcept;

/// Makes a boost::system::error_condition of `c`.
inline boost::system::error_condition make_error_condition(condition c) noexcept {
  return {static_cast<int>(c), condition_category()};
}

/// The condition of `ec`; for a code of no known category (an application's
/// own, say), condition::server_refused. Undefined for a success.
THOONK_API condition condition_of(const boost::system::error_code& ec) noexcept;

/// Whether the operation may succeed if tried again later unchanged
/// (`ec == condition::transient`): error::unknown_outcome, not_connected,
/// connect_timeout, request_timeout, health_check_timeout, not_primary,
/// cluster_redirect_limit, cluster_topology_unavailable, and transport
/// codes (boost::asio::error::*, system errors). False for a success.
THOONK_API bool is_transient(const boost::system::error_code& ec) noexcept;

}  // namespace thoonk

namespace boost::system {
template <>
struct is_error_condition_enum<thoonk::condition> : std::true_type {};
}  // namespace boost::system
