// Connection and library configuration.
#pragma once

#include <thoonk/export.hpp>
#include <thoonk/resp3/parser.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk {

/// Everything a client needs to reach a server and how to behave there.
/// Plain data: copy it, change fields, pass it to a client/connection.
struct THOONK_API config {
  // ---- where ---------------------------------------------------------------
  std::string host = "127.0.0.1";  ///< server host name or address (ignored with unix_socket)
  std::uint16_t port = 6379;       ///< server TCP port
  /// When non-empty, connect to this Unix domain socket instead of host:port.
  std::string unix_socket;
  /// The database index SELECTed at connect (0 to 15 on a default server; 0 on a cluster).
  int database = 0;

  /// One server of a primary-and-replicas setup.
  struct address {
    std::string host;           ///< host name or address
    std::uint16_t port = 6379;  ///< TCP port
  };
  /// Several servers (a primary and its replicas, in any order): the
  /// connection and the subscriber use the first one that answers ROLE as
  /// the primary, skipping replicas, and after a failover (the connection
  /// lost, a READONLY reply) look for the primary again among all of them.
  /// Empty (the default): `host`:`port` alone, no ROLE check. A URL with
  /// several hosts, `redis://h1:6379,h2:6380/0`, fills it. Each server
  /// must accept the same credentials; the user needs +role.
  /// docs/reliability.md has the details.
  std::vector<address> endpoints;
  /// A request answered with READONLY (the server became a replica),
  /// LOADING (loading its data set) or MASTERDOWN (a replica without its
  /// primary) was not executed: it is sent again, at most this many times,
  /// after a pause (reconnect_min_delay doubling up to reconnect_max_delay)
  /// or, for READONLY, after reconnecting to the primary. Then the reply is
  /// returned as it came. 0 turns retrying off.
  unsigned unavailable_retries = 10;

  // ---- who -------------------------------------------------------------------
  std::string username;  ///< ACL user; empty with a password means "default"
  std::string password;  ///< empty: no AUTH
  /// CLIENT SETNAME / HELLO SETNAME (empty: not set). A name the server
  /// refuses (an ACL user without +client, a name with spaces) is skipped,
  /// not an error: connection_stats::client_name_refusals counts it.
  std::string client_name = "thoonk-asio";
  /// 3: send HELLO 3 and fall back to RESP2 if the server does not know HELLO.
  /// 2: never send HELLO (RESP2 only).
  int protocol = 3;

  // ---- timing ----------------------------------------------------------------
  /// Bound on TCP connect plus the setup handshake, per attempt.
  std::chrono::milliseconds connect_timeout{5000};
  /// A PING is sent after this long without traffic. 0 disables health checks.
  std::chrono::milliseconds health_check_interval{2000};
  /// A connection that waits for a reply and hears nothing for this long is
  /// closed (and re-established when reconnect is on).
  std::chrono::milliseconds health_check_timeout{6000};
  /// Reconnect after a lost connection (with the backoff below); false: a loss is final.
  bool reconnect = true;
  /// Reconnect backoff: the delay cap doubles from min to max, and each
  /// delay is drawn with equal jitter, uniformly from [cap/2, cap]. After a
  /// refused setup (wrong password, SELECT refused, NOPERM) the cap jumps to
  /// max: retrying sooner cannot help.
  std::chrono::milliseconds reconnect_min_delay{50};
  /// The longest wait between reconnect attempts.
  std::chrono::milliseconds reconnect_max_delay{5000};
  /// Default timeout of every request that sets no exec_options::timeout of
  /// its own, the library's typed operations (feeds, queues, jobs) included:
  /// such a request fails with error::request_timeout after this long,
  /// whether it waited for a connection or for the reply (in cluster mode
  /// also: for a slot map, across redirects and pauses). 0 (the default):
  /// no timeout, a request waits until it completes or the connection gives
  /// up on it (a Redis command that takes long is not an error by itself).
  /// The subscriber's own SUBSCRIBE/UNSUBSCRIBE commands are not bounded
  /// by it; bound async_subscribe() with cancellation.
  std::chrono::milliseconds request_timeout{0};

  // ---- TLS -------------------------------------------------------------------
  /// TLS for the connection (and the subscriber, which uses the same
  /// config). `rediss://` URLs turn it on. Verification is on by default:
  /// the server's certificate must chain to a trusted CA and name the host.
  /// Every file is read again on each connect, so renewed certificates are
  /// picked up by the next reconnect. TLS failures are setup refusals:
  /// queued requests fail with the error (tls_certificate_rejected,
  /// tls_handshake_failed or tls_config_invalid, the reason in
  /// connection_event::server_message) and attempts are spaced by
  /// reconnect_max_delay until one succeeds. docs/security.md has details.
  struct tls_options {
    bool enabled = false;  ///< connect with TLS (`rediss://` sets it)
    /// PEM file of the CAs trusted to sign the server's certificate. With
    /// ca_file and ca_dir both empty, the system's default trust store.
    std::string ca_file;
    /// Directory of CA certificates in OpenSSL's hashed layout (c_rehash).
    std::string ca_dir;
    /// Client certificate (PEM, may hold the chain) and its private key,
    /// for servers that require one (redis `tls-auth-clients yes`). Both or
    /// neither.
    std::string cert_file;
    std::string key_file;  ///< the client private key (PEM) for mutual TLS, with cert_file
    /// The name sent as SNI and checked against the certificate. Empty: the
    /// host connected to (an IP address is checked against the
    /// certificate's IP entries and sends no SNI).
    std::string server_name;
    /// Check the certificate chain against the trusted CAs. false is
    /// UNSAFE: any certificate is accepted, so anyone on the path can read
    /// and change the traffic, credentials included. For tests only.
    bool verify_peer = true;
    /// Check that the certificate names server_name (or the host). false is
    /// UNSAFE for the same reason: any certificate from a trusted CA passes.
    bool verify_hostname = true;
    /// The oldest protocol version accepted: 12 (TLS 1.2, the default) or
    /// 13 (TLS 1.3). Anything else fails with tls_config_invalid.
    int min_version = 12;
  };
  tls_options tls;  ///< TLS settings (docs/security.md)

  // ---- limits ----------------------------------------------------------------
  resp3::parser_limits limits;            ///< limits on replies from the server (docs/security.md)
  std::size_t max_name_length = 1024;     ///< feed names, bytes
  std::size_t max_id_length = 1024;       ///< item and job ids, bytes
  std::size_t max_item_size = 64u << 20;  ///< item/job payload/result, bytes

  /// How the library's own Lua scripts (feeds, queues, jobs) run. true (the
  /// default): each as a Redis function, loaded once per server with
  /// FUNCTION LOAD (on first use, and again after FUNCTION FLUSH) and run
  /// with FCALL; its helpers are made once instead of on every call, which
  /// takes most of the Lua garbage out of every call (docs/design.md §3).
  /// A server without functions (before Redis 7.0), or an ACL user that may
  /// not FCALL or FUNCTION LOAD, turns this off for the client after one
  /// refused attempt that ran nothing: EVALSHA from then on. A call that a
  /// function cannot start but a script can (out of memory for a read, a
  /// read-only replica) runs with EVALSHA. false: always EVALSHA (SCRIPT
  /// LOAD on NOSCRIPT). client::async_eval runs the application's scripts with
  /// EVALSHA either way. A URL's `?functions=no` (or `yes`) sets it.
  bool use_functions = true;

  // ---- Redis Cluster ---------------------------------------------------------
  /// Talk to a Redis Cluster (docs/cluster.md): `host`:`port`, or each of
  /// `endpoints`, is a seed node, primary or replica (no ROLE check), the
  /// slot map is read from (CLUSTER SHARDS,
  /// CLUSTER SLOTS before Redis 7.0); commands go over one multiplexed
  /// connection per primary, chosen by the hash slot of the feed's keys;
  /// MOVED and ASK are followed, TRYAGAIN and CLUSTERDOWN retried after a
  /// pause. Implies cluster_hash_tags. `database` must be 0. A URL's
  /// `?cluster=yes` sets it.
  bool cluster = false;
  /// Cluster mode: how many MOVED/ASK hops one request may take before it
  /// fails with error::cluster_redirect_limit (it did not run). TRYAGAIN
  /// and CLUSTERDOWN pauses are bounded by unavailable_retries instead.
  unsigned cluster_max_redirects = 16;
  /// Cluster mode: the slot map is read again this often, besides after a
  /// MOVED reply and a lost connection. 0: only on those events.
  std::chrono::milliseconds cluster_refresh_interval{30000};
  /// When true, feed names are wrapped as a hash tag inside keys
  /// (`feed.ids:{orders}`), so every script's keys hash to one slot.
  /// `cluster` implies it.
  bool cluster_hash_tags = false;
  /// Feed names may contain '{' and '}' (a hash tag of the user's own, e.g.
  /// `orders.{eu}`). Off by default: braces change key slots in a cluster.
  /// With a user hash tag in the name, cluster_hash_tags leaves it alone.
  bool allow_hash_tag_names = false;

  /// Parses `redis://[user[:password]@]host[:port][/db]` (several
  /// `host[:port]` separated by commas fill `endpoints`),
  /// `redis://[user[:password]@][host][:port]?db=N` or
  /// `unix:///path/to/socket[?db=N&password=...]` into a config that keeps
  /// every other field of `base`. Percent-escapes are decoded in user and
  /// password. `?cluster=yes` (or `no`) sets `cluster`, `?functions=no` (or `yes`)
  /// `use_functions`. `rediss://` (same form) turns TLS on and
  /// also takes the query parameters `tls_ca_file`, `tls_ca_dir`, `tls_cert_file`, `tls_key_file`,
  /// `tls_server_name` (percent-decoded) and `tls_verify=none` (UNSAFE: no verification at all);
  /// `redis://` turns TLS off and refuses them. Sets ec = error::invalid_url on anything else.
  static config from_url(std::string_view url, boost::system::error_code& ec, const config& base);
  /// from_url(url, ec, config{}): every field the URL does not set keeps its default.
  static config from_url(std::string_view url, boost::system::error_code& ec);

  /// from_url(THOONK_REDIS_URL) when that variable is set and non-empty;
  /// otherwise `base` (127.0.0.1:6379). Throws boost::system::system_error
  /// when the variable does not parse.
  static config from_env(const config& base);
  /// from_env(config{}): THOONK_REDIS_URL, else 127.0.0.1:6379; throws boost::system::system_error
  /// when the variable does not parse.
  static config from_env();
};

}  // namespace thoonk
