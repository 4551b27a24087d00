#include <thoonk/condition.hpp>
#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>

#include <string>

namespace thoonk {
namespace {

// Every thoonk::error in one place, without a default: a code added to the
// enum and not classified here is a -Wswitch warning (an error in CI).
condition condition_of_thoonk(error e) noexcept {
  switch (e) {
    case error::invalid_type_byte:
    case error::invalid_length:
    case error::invalid_number:
    case error::invalid_double:
    case error::invalid_boolean:
    case error::missing_crlf:
    case error::bulk_too_large:
    case error::too_many_elements:
    case error::nesting_too_deep:
    case error::reply_too_large:
    case error::line_too_long:
    case error::unsupported_streamed:
    case error::unexpected_reply:
    case error::unexpected_type:
    case error::reply_too_many_values:
    case error::reply_memory_exceeded: return condition::protocol;
    case error::unknown_outcome:
    case error::not_connected:
    case error::connect_timeout:
    case error::health_check_timeout:
    case error::request_timeout:
    case error::not_primary:
    case error::cluster_redirect_limit:
    case error::cluster_topology_unavailable: return condition::transient;
    case error::client_stopped: return condition::cancelled;
    case error::invalid_url:
    case error::invalid_name:
    case error::invalid_id:
    case error::item_too_large:
    case error::invalid_argument:
    case error::tls_config_invalid:
    case error::tls_required:
    case error::cluster_cross_slot: return condition::invalid_input;
    case error::feed_not_found:
    case error::id_not_found:
    case error::queue_empty:
    case error::job_not_found:
    case error::result_timeout:
    case error::worker_not_found: return condition::not_found;
    case error::feed_exists:
    case error::wrong_feed_type:
    case error::job_not_claimed:
    case error::job_not_stalled:
    case error::lost_claim:
    case error::worker_exists: return condition::wrong_state;
    case error::auth_failed:
    case error::subscribe_refused:
    case error::no_permission:
    case error::no_script_permission:
    case error::no_channel_permission:
    case error::no_key_permission:
    case error::tls_handshake_failed:
    case error::tls_certificate_rejected: return condition::permission;
    case error::handshake_failed:
    case error::server_error:
    case error::script_error: return condition::server_refused;
  }
  return condition::server_refused;
}

class condition_category_impl final : public boost::system::error_category {
 public:
  const char* name() const noexcept override { return "thoonk.condition"; }

  std::string message(int ev) const override {
    switch (static_cast<condition>(ev)) {
      case condition::transient:
        return "a transient failure: the operation may succeed if tried again later";
      case condition::cancelled: return "the operation was cancelled or its client stopped";
      case condition::protocol:
        return "the server sent a reply the client refuses; the connection was closed";
      case condition::invalid_input: return "the input was refused before any I/O";
      case condition::not_found: return "what the operation names does not exist";
      case condition::wrong_state:
        return "what the operation names is in another state or of another kind";
      case condition::permission: return "the server or the TLS peer refused this client";
      case condition::server_refused: return "the server answered with an error";
    }
    return "unknown thoonk condition " + std::to_string(ev);
  }

  bool equivalent(const boost::system::error_code& code, int cond) const noexcept override {
    return code && static_cast<int>(condition_of(code)) == cond;
  }
};

}  // namespace

const boost::system::error_category& condition_category() noexcept {
  static const condition_category_impl instance;
  return instance;
}

condition condition_of(const boost::system::error_code& ec) noexcept {
  if (ec.category() == category()) return condition_of_thoonk(static_cast<error>(ec.value()));
  if (ec == boost::asio::error::operation_aborted) return condition::cancelled;
  namespace ae = boost::asio::error;
  if (ec.category() == boost::system::system_category() ||
      ec.category() == boost::system::generic_category() ||
      ec.category() == ae::get_misc_category() || ec.category() == ae::get_netdb_category() ||
      ec.category() == ae::get_addrinfo_category()) {
    return condition::transient;
  }
  return condition::server_refused;
}

bool is_transient(const boost::system::error_code& ec) noexcept {
  return ec && condition_of(ec) == condition::transient;
}

}  // namespace thoonk
