// Waiting for replicas to acknowledge an operation's writes (WAIT).
#pragma once

#include <boost/system/error_code.hpp>
#include <thoonk/export.hpp>

#include <chrono>
#include <type_traits>
#include <utility>

namespace thoonk {

/// What to wait for after an operation, and (filled in before its handler
/// runs) what the replicas acknowledged.
///
/// Pass it with thoonk::with_durability to an operation of a client, feed,
/// sorted feed, queue or job queue (put, put_many, finish, publish, ...).
/// When the operation succeeds, the library sends `WAIT replicas timeout`
/// on the client's command connection (in cluster mode: the connection of
/// the feed's primary; operations of the client itself are refused there
/// with error::invalid_argument), the connection the operation's
/// writes went through, so the count covers them, and completes the
/// operation's handler when WAIT answers. **What it guarantees**: when
/// `acknowledged >= replicas`, that many replicas had received the writes
/// when WAIT returned. It does not make them durable on disk (that is
/// appendfsync on each server), nor survive every failover: replication is
/// asynchronous, and a replica that did not acknowledge may still be
/// promoted. A shortfall is not an error: the operation did happen on the
/// primary; check `acknowledged` (or satisfied()).
///
/// **Cost**: WAIT holds the connection it is sent on until it answers, so
/// every request behind it on that shared connection waits too: about one
/// replication round trip with healthy replicas, up to `timeout` when fewer
/// than `replicas` are connected. Give durable writers a client of their
/// own when other callers must not wait. docs/reliability.md has figures.
///
/// **Lifetime**: must outlive the operation. **Threading**: written on the
/// client's executor just before the handler runs.
struct THOONK_API durability {
  /// How many replicas must acknowledge: 1 or more.
  int replicas = 1;
  /// How long WAIT may hold the connection: more than 0 (WAIT 0 would block
  /// forever) and less than config::health_check_timeout when health checks
  /// are on (a silent connection is closed after that long). An operation
  /// asked with another value fails with error::invalid_argument before any
  /// I/O.
  std::chrono::milliseconds timeout{100};

  /// Out: replicas that acknowledged the writes; -1 when no WAIT was sent
  /// (the operation failed, or was refused before it started).
  int acknowledged = -1;
  /// Out: why WAIT itself failed while the operation succeeded
  /// (error::no_permission without +wait, error::server_error on a replica,
  /// error::unknown_outcome when the connection was lost, operation_aborted
  /// when the wait was cancelled); empty otherwise.
  boost::system::error_code error;

  /// WAIT answered and at least `replicas` acknowledged.
  bool satisfied() const noexcept { return !error && acknowledged >= replicas; }
};

/// A completion token adapter: `token` completes as before, after WAIT
/// answered, and `ack` receives the count. Combines with
/// thoonk::capture_diagnostics in either order:
///
///     thoonk::durability ack{.replicas = 1, .timeout = 50ms};
///     auto id = co_await jobs.put(payload, thoonk::with_durability(ack, asio::use_awaitable));
///     if (!ack.satisfied()) log("only", ack.acknowledged, "replicas have it");
///
/// Works on the operations of thoonk::client, feeds, queues and job queues
/// (not on connection::async_exec: there is no client to wait through).
template <class CompletionToken>
struct with_durability_t {
  using token_type = CompletionToken;  ///< the wrapped token's type
  durability* ack;        ///< receives the acknowledgement counts; must outlive the operation
  CompletionToken token;  ///< the wrapped completion token
};

template <class CompletionToken>
with_durability_t<std::decay_t<CompletionToken>> with_durability(durability& ack,
                                                                 CompletionToken&& token) {
  return {&ack, std::forward<CompletionToken>(token)};
}

}  // namespace thoonk
