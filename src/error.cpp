#include <thoonk/error.hpp>

#include <string>

namespace thoonk {
namespace {

class thoonk_category final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "thoonk"; }

  std::string message(int ev) const override {
    switch (static_cast<error>(ev)) {
      case error::invalid_type_byte:
        return "malformed reply from the server: unknown RESP type byte; the connection was closed "
               "(is this port really a Redis server?)";
      case error::invalid_length:
        return "malformed reply from the server: invalid, negative or overflowing length; the "
               "connection was closed";
      case error::invalid_number:
        return "malformed reply from the server: integer is not a valid 64-bit decimal; the "
               "connection was closed";
      case error::invalid_double:
        return "malformed reply from the server: invalid double; the connection was closed";
      case error::invalid_boolean:
        return "malformed reply from the server: boolean is neither #t nor #f; the connection was "
               "closed";
      case error::missing_crlf:
        return "malformed reply from the server: missing CRLF terminator; the connection was "
               "closed";
      case error::bulk_too_large:
        return "reply rejected: a bulk string is longer than parser_limits::max_bulk_length; raise "
               "the limit in the config if such values are expected";
      case error::too_many_elements:
        return "reply rejected: an aggregate has more elements than "
               "parser_limits::max_aggregate_elements; raise the limit or fetch in smaller ranges";
      case error::nesting_too_deep:
        return "reply rejected: aggregates nest deeper than parser_limits::max_depth";
      case error::reply_too_large:
        return "reply rejected: one reply is larger than parser_limits::max_reply_bytes; raise the "
               "limit or fetch in smaller ranges";
      case error::line_too_long:
        return "reply rejected: a header or simple string line is longer than "
               "parser_limits::max_line_length";
      case error::unsupported_streamed:
        return "reply rejected: streamed RESP3 strings/aggregates are not supported";
      case error::unexpected_reply:
        return "protocol desynchronised: the server sent a reply no request was waiting for; the "
               "connection was closed";
      case error::unknown_outcome:
        return "the connection was lost after the request was sent: it may or may not have run on "
               "the server; check the data before retrying a non-idempotent operation";
      case error::not_connected:
        return "not connected to the server and the request asked not to wait for a connection";
      case error::connect_timeout:
        return "could not connect to the Redis server within connect_timeout: check the address "
               "(THOONK_REDIS_URL) and that redis-server is running";
      case error::health_check_timeout:
        return "the server sent nothing within the health-check deadline; the connection was "
               "closed and will be re-established";
      case error::request_timeout:
        return "the request did not complete within its timeout; if it was already sent it may "
               "still run on the server";
      case error::handshake_failed:
        return "the connection setup (HELLO/SELECT/CLIENT SETNAME) was refused by the server: "
               "check the database number and server version";
      case error::auth_failed:
        return "authentication failed: check the username and password in the config or the "
               "redis:// URL";
      case error::client_stopped: return "the client was stopped while the operation was pending";
      case error::invalid_url:
        return "invalid Redis URL: expected redis://[user[:password]@]host[:port][/db], "
               "rediss://... (TLS; tls_* query parameters only there) or "
               "unix:///path/to/socket[?db=N]";
      case error::subscribe_refused:
        return "the server refused the subscription (an ACL user without permission for this "
               "channel or pattern?); nothing stays registered";
      case error::server_error:
        return "the server answered with an error reply (its text: pass the token through "
               "thoonk::capture_diagnostics)";
      case error::unexpected_type:
        return "the server's reply had an unexpected type: is another client writing "
               "incompatible data under the same keys?";
      case error::script_error:
        return "a Lua script of the library failed on the server (its text and line: pass the "
               "token through thoonk::capture_diagnostics)";
      case error::invalid_name:
        return "invalid feed name: it must be 1..max_name_length bytes without NUL, and contain "
               "'{' or '}' only when a hash tag was asked for";
      case error::invalid_id:
        return "invalid item id: it must be 1..max_id_length bytes and contain no NUL byte";
      case error::item_too_large:
        return "item rejected: larger than the configured max_item_size; raise the limit or "
               "store large payloads elsewhere and publish a reference";
      case error::invalid_argument:
        return "invalid argument: a count, timeout or option is out of range (a time or duration "
               "sent to the server must be within +/-9007199254740991 ms, 2^53 - 1, the largest "
               "integer a Lua number holds exactly)";
      case error::feed_exists:
        return "a feed with this name already exists: open it instead of creating it";
      case error::feed_not_found: return "no feed with this name exists: create it first";
      case error::wrong_feed_type:
        return "the feed exists with another type: open it with the matching class";
      case error::id_not_found:
        return "no item with this id exists in the feed; nothing was changed";
      case error::queue_empty: return "nothing arrived in the queue within the timeout";
      case error::job_not_found:
        return "no job with this id exists in the queue; nothing was changed";
      case error::job_not_claimed:
        return "the job is not claimed, so it cannot be finished, cancelled, stalled or renewed; "
               "nothing was changed";
      case error::job_not_stalled:
        return "the job is not stalled, so it cannot be retried; nothing was changed";
      case error::lost_claim:
        return "this claim is no longer current (its lease lapsed and the job was reclaimed); "
               "drop the work, the job is handled by its new claim";
      case error::result_timeout: return "no result for this job was stored within the timeout";
      case error::worker_exists:
        return "a live worker is already registered under this name in this queue: give each "
               "runner its own run_options::worker_name (or leave it empty for a unique one)";
      case error::worker_not_found:
        return "no worker is registered under this name in this queue (it stopped, or was "
               "failed already); nothing was changed";
      case error::no_permission:
        return "the Redis ACL user may not run a command this operation needs (NOPERM); nothing "
               "was changed: grant the command (docs/errors.md lists what each operation needs)";
      case error::no_script_permission:
        return "the Redis ACL user may not run the library's Lua scripts; nothing was changed: "
               "grant +evalsha, and +script|load or +eval so scripts can be reloaded after a "
               "restart or SCRIPT FLUSH";
      case error::no_channel_permission:
        return "the Redis ACL user may not PUBLISH this operation's notification (command "
               "+publish or the channel, e.g. &feed.* &job.* &newfeed &delfeed &conffeed); "
               "nothing was changed";
      case error::no_key_permission:
        return "the Redis ACL user may not access the keys of this feed or queue (~feed.* and "
               "~feeds); nothing was changed";
      case error::tls_handshake_failed:
        return "the TLS handshake with the server failed: check that the port is the server's "
               "TLS port (rediss:// for tls-port, redis:// for port), that it accepts TLS 1.2 or "
               "later, and, if it asks for one, the client certificate and key (tls.cert_file, "
               "tls.key_file); the reason is in connection_event::server_message";
      case error::tls_certificate_rejected:
        return "the server's TLS certificate was rejected: check that it was issued by a CA in "
               "tls.ca_file / tls.ca_dir, that the host name (or tls.server_name) is in it, and "
               "that it has not expired; the reason is in connection_event::server_message";
      case error::tls_config_invalid:
        return "the TLS files could not be loaded: check the paths and PEM contents of "
               "tls.ca_file, tls.ca_dir, tls.cert_file and tls.key_file, and that the key "
               "belongs to the certificate; details in connection_event::server_message";
      case error::tls_required:
        return "the server treated this plain connection as a TLS port does (a TLS record back, or "
               "a reset at the first command without a reply): connect with rediss:// (config "
               "tls.enabled) or to the server's plain port";
      case error::reply_too_many_values:
        return "reply rejected: one reply holds more values than parser_limits::max_reply_values "
               "(a bound on the memory one reply may take); the connection was closed: raise the "
               "limit or fetch in smaller ranges";
      case error::reply_memory_exceeded:
        return "reply rejected: the replies held for one request (those received and the one "
               "being read) would take more memory than parser_limits::max_reply_memory; the "
               "connection was closed: raise config::limits.max_reply_memory, or fetch in smaller "
               "ranges or fewer commands per request";
      case error::not_primary:
        return "the server is a replica, not the primary (ROLE, or a READONLY reply): the "
               "connection tries the other addresses in config::endpoints; list the primary "
               "and its replicas there";
      case error::cluster_redirect_limit:
        return "the cluster kept redirecting the request (MOVED, ASK) or deferring it "
               "(TRYAGAIN, CLUSTERDOWN) beyond config::cluster_max_redirects / "
               "unavailable_retries; it did not run: check that the cluster is healthy "
               "(redis-cli --cluster check) and retry";
      case error::cluster_topology_unavailable:
        return "no cluster node answered CLUSTER SHARDS or CLUSTER SLOTS, or no primary "
               "serves the request's hash slot: check config::endpoints (seed nodes) and "
               "that every slot is covered (redis-cli --cluster check)";
      case error::cluster_cross_slot:
        return "on Redis Cluster one script call reaches one hash slot, and this job queue's "
               "dead-letter queue hashes to another one; it did not run: name both with one "
               "hash tag (orders and {orders}.dead, with config::allow_hash_tag_names) or "
               "set no dead-letter queue";
    }
    return "unknown thoonk error " + std::to_string(ev);
  }
};

}  // namespace

const boost::system::error_category& category() noexcept {
  static const thoonk_category instance;
  return instance;
}

}  // namespace thoonk
