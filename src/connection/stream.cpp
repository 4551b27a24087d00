#include "connection/stream.hpp"

#include "detail/use_nothrow.hpp"

#include <thoonk/config.hpp>
#include <thoonk/error.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/context.hpp>
#include <boost/asio/ssl/error.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/asio/write.hpp>

#include <openssl/bio.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <openssl/x509v3.h>

#include <memory>
#include <optional>
#include <string>

namespace thoonk::detail {

namespace asio = boost::asio;
namespace ssl = boost::asio::ssl;

namespace {

using socket_type = asio::generic::stream_protocol::socket;
// The TLS layer borrows the stream's socket: closing the socket ends the
// layer's pending operations, exactly as for a plain connection.
using tls_stream = ssl::stream<socket_type&>;

bool is_ip_address(const std::string& name) {
  boost::system::error_code ec;
  asio::ip::make_address(name, ec);
  return !ec;
}

// "CN=redis.example, O=..." of a certificate's subject.
std::string subject_of(X509* cert) {
  std::string out;
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return out;
  X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  if (n > 0) out.assign(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return out;
}

std::string time_of(const ASN1_TIME* t) {
  std::string out;
  BIO* bio = BIO_new(BIO_s_mem());
  if (bio == nullptr) return out;
  ASN1_TIME_print(bio, t);
  char* data = nullptr;
  const long n = BIO_get_mem_data(bio, &data);
  if (n > 0) out.assign(data, static_cast<std::size_t>(n));
  BIO_free(bio);
  return out;
}

// An error of the TLS layer's making: OpenSSL's own errors and a peer that
// cut the TLS session short.
bool is_tls_layer_error(const boost::system::error_code& ec) {
  return ec.category() == asio::error::get_ssl_category() || ec == ssl::error::stream_truncated;
}

}  // namespace

// One generic stream socket carries both TCP and Unix domain connections;
// with TLS, an ssl::stream over that socket sits beside it: read_some and
// write take the layer when one is set (one branch per call),
// handshake_layer() creates it and runs its handshake, close() drops it.
struct stream::impl {
  explicit impl(const asio::any_io_executor& ex) : executor(ex), socket(ex) {}

  // The transport's own setup after the socket connected: nothing for a
  // plain socket; the TLS client handshake when the config asks for TLS.
  asio::awaitable<error_code> handshake_layer(const config& cfg);
  // A fresh OpenSSL context from cfg.tls (files read on every connect, so
  // renewed certificates are picked up by the next reconnect).
  error_code make_context(const config::tls_options& o);
  // The thoonk error for a failed TLS handshake, with the reason in detail.
  error_code classify_handshake_failure(error_code ec, const config::tls_options& o);

  // Only while no operation is pending on the layer (connect(), before
  // anything else): a pending operation refers to it.
  void drop_tls() noexcept {
    tls.reset();
    context.reset();
    handshaking = false;
  }

  asio::any_io_executor executor;
  socket_type socket;
  std::optional<ssl::context> context;
  std::unique_ptr<tls_stream> tls;
  transport kind = transport::none;
  // Set when the TLS handshake starts and cleared only when it ends by
  // itself, so a handshake cut short by the connect timeout is still seen
  // as one (setup_error).
  bool handshaking = false;
  std::string detail;
};

stream::error_code stream::impl::make_context(const config::tls_options& o) {
  context.emplace(ssl::context::tls_client);
  SSL_CTX* ctx = context->native_handle();
  const int floor = o.min_version == 12 ? TLS1_2_VERSION : o.min_version == 13 ? TLS1_3_VERSION : 0;
  if (floor == 0) {
    detail = "tls.min_version must be 12 (TLS 1.2) or 13 (TLS 1.3), not " +
             std::to_string(o.min_version);
    return error::tls_config_invalid;
  }
  SSL_CTX_set_min_proto_version(ctx, floor);
  context->set_options(ssl::context::default_workarounds | ssl::context::no_compression);

  // Every load reports a failure the same way: the setting, then why.
  error_code ec;
  auto failed = [&](std::string setting) {
    if (!ec) return false;
    detail = std::move(setting) + ": " + ec.message();
    return true;
  };
  if (!o.ca_file.empty()) {
    context->load_verify_file(o.ca_file, ec);
    if (failed("tls.ca_file '" + o.ca_file + "'")) return error::tls_config_invalid;
  }
  if (!o.ca_dir.empty()) {
    context->add_verify_path(o.ca_dir, ec);
    if (failed("tls.ca_dir '" + o.ca_dir + "'")) return error::tls_config_invalid;
  }
  if (o.ca_file.empty() && o.ca_dir.empty() && o.verify_peer) {
    context->set_default_verify_paths(ec);
    if (failed("the system's default CA store")) return error::tls_config_invalid;
  }
  if (o.cert_file.empty() != o.key_file.empty()) {
    detail =
        "tls.cert_file and tls.key_file go together: set both for a client certificate, "
        "or neither";
    return error::tls_config_invalid;
  }
  if (!o.cert_file.empty()) {
    context->use_certificate_chain_file(o.cert_file, ec);
    if (failed("tls.cert_file '" + o.cert_file + "'")) return error::tls_config_invalid;
    context->use_private_key_file(o.key_file, ssl::context::pem, ec);
    if (failed("tls.key_file '" + o.key_file + "'")) return error::tls_config_invalid;
    if (SSL_CTX_check_private_key(ctx) != 1) {
      detail = "tls.key_file '" + o.key_file + "' does not belong to tls.cert_file '" +
               o.cert_file + "'";
      return error::tls_config_invalid;
    }
  }
  context->set_verify_mode(o.verify_peer ? ssl::verify_peer : ssl::verify_none);
  return {};
}

asio::awaitable<stream::error_code> stream::impl::handshake_layer(const config& cfg) {
  if (!cfg.tls.enabled) co_return error_code{};
  const auto& o = cfg.tls;
  if (auto ec = make_context(o)) co_return ec;
  tls = std::make_unique<tls_stream>(socket, *context);
  SSL* ssl_handle = tls->native_handle();

  const std::string& name = o.server_name.empty() ? cfg.host : o.server_name;
  const bool ip = is_ip_address(name);
  // SNI carries host names only (RFC 6066): never an address.
  if (!ip && !name.empty() && SSL_set_tlsext_host_name(ssl_handle, name.c_str()) != 1) {
    detail = "the server name '" + name + "' cannot be sent as SNI";
    co_return error::tls_config_invalid;
  }
  if (o.verify_peer && o.verify_hostname) {
    // OpenSSL checks the name as part of the chain verification, so a
    // mismatch is reported like any other certificate error.
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_handle);
    int ok = 0;
    if (ip) {
      ok = X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
    } else {
      X509_VERIFY_PARAM_set_hostflags(param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
      ok = X509_VERIFY_PARAM_set1_host(param, name.c_str(), name.size());
    }
    if (ok != 1) {
      detail = "the server name '" + name + "' cannot be checked against a certificate";
      co_return error::tls_config_invalid;
    }
  }

  handshaking = true;
  auto [ec] = co_await tls->async_handshake(ssl::stream_base::client, use_nothrow);
  if (ec == asio::error::operation_aborted) co_return ec;  // cut short: stays "handshaking"
  handshaking = false;
  if (ec) co_return classify_handshake_failure(ec, o);
  co_return error_code{};
}

stream::error_code stream::impl::classify_handshake_failure(error_code ec,
                                                            const config::tls_options& o) {
  // Closed under us (the connect timeout, stop()): not the server's doing.
  if (ec == asio::error::operation_aborted) return ec;
  SSL* ssl_handle = tls->native_handle();
  const long verdict = SSL_get_verify_result(ssl_handle);
  if (o.verify_peer && verdict != X509_V_OK) {
    detail = "certificate verify failed: ";
    detail += X509_verify_cert_error_string(verdict);
    if (X509* cert = SSL_get0_peer_certificate(ssl_handle)) {
      detail += " (subject " + subject_of(cert) + ", valid from " +
                time_of(X509_get0_notBefore(cert)) + " to " + time_of(X509_get0_notAfter(cert)) +
                ")";
    }
    if (verdict == X509_V_ERR_HOSTNAME_MISMATCH || verdict == X509_V_ERR_IP_ADDRESS_MISMATCH)
      detail +=
          "; the certificate does not name the host: connect by a name it holds or set "
          "tls.server_name";
    return error::tls_certificate_rejected;
  }
  detail = "TLS handshake failed: " + ec.message();
  if (ec == asio::error::eof || ec == ssl::error::stream_truncated ||
      ec == asio::error::connection_reset)
    detail +=
        " (the server closed the connection: is this its TLS port, and does it accept "
        "this client's certificate and TLS version?)";
  return error::tls_handshake_failed;
}

stream::stream(const asio::any_io_executor& ex) : impl_(std::make_unique<impl>(ex)) {}

stream::~stream() = default;

asio::awaitable<stream::error_code> stream::connect(const config& cfg) {
  close();
  auto& s = *impl_;
  // Nothing is pending on the previous attempt's TLS layer any more.
  s.drop_tls();
  s.detail.clear();
  // A fresh socket per attempt: the protocol (AF_UNIX, AF_INET, AF_INET6)
  // is chosen by the endpoint it connects to.
  s.socket = socket_type(s.executor);

  if (!cfg.unix_socket.empty()) {
    asio::generic::stream_protocol::endpoint ep{
        asio::local::stream_protocol::endpoint(cfg.unix_socket)};
    auto [e] = co_await s.socket.async_connect(ep, use_nothrow);
    if (e) co_return e;
    s.kind = transport::unix_domain;
    co_return co_await s.handshake_layer(cfg);
  }

  asio::ip::tcp::resolver resolver(s.executor);
  auto [rec, results] =
      co_await resolver.async_resolve(cfg.host, std::to_string(cfg.port), use_nothrow);
  if (rec) co_return rec;
  error_code ec = asio::error::host_not_found;
  for (const auto& entry : results) {
    error_code ignored;
    s.socket.close(ignored);
    s.socket = socket_type(s.executor);
    asio::generic::stream_protocol::endpoint ep{entry.endpoint()};
    auto [e] = co_await s.socket.async_connect(ep, use_nothrow);
    ec = e;
    if (!ec) {
      s.socket.set_option(asio::ip::tcp::no_delay(true), ignored);
      break;
    }
  }
  if (ec) co_return ec;
  s.kind = transport::tcp;
  co_return co_await s.handshake_layer(cfg);
}

stream::error_code stream::setup_error(error_code ec, bool answered) {
  auto& s = *impl_;
  if (ec == asio::error::connection_reset && !answered && !s.context && s.kind == transport::tcp) {
    s.detail =
        "the server reset the connection at the first command without answering, as a "
        "TLS port does to a plain client: use rediss:// (config tls.enabled) for its TLS "
        "port";
    return error::tls_required;
  }
  if (!ec || !s.context) return ec;
  if (ec == error::connect_timeout && s.handshaking) {
    s.detail =
        "the server sent no TLS handshake reply within connect_timeout: is this its TLS "
        "port (rediss:// to a plain port waits like this)?";
    return error::tls_handshake_failed;
  }
  if (!answered && s.tls && !s.handshaking &&
      (ec == asio::error::connection_reset || ec == asio::error::eof)) {
    // TLS 1.3 finishes the client's handshake before the server has
    // checked the client certificate; a server that refuses it sends an
    // alert and closes, and the close often overtakes the alert (a reset
    // discards it). Nothing else makes a TLS port drop a client that has
    // not had a single reply yet.
    s.detail =
        "the server closed the TLS connection right after the handshake, before any "
        "reply: a server that requires a client certificate (tls-auth-clients yes) does "
        "this to a client without one it trusts; check tls.cert_file and tls.key_file";
    return error::tls_handshake_failed;
  }
  if (is_tls_layer_error(ec)) {
    s.detail = "TLS session failed during the connection setup: " + ec.message() +
               " (a server that requires a client certificate refuses a missing or untrusted one "
               "here: check tls.cert_file and tls.key_file)";
    return error::tls_handshake_failed;
  }
  return ec;
}

const std::string& stream::failure_detail() const noexcept { return impl_->detail; }

bool stream::is_refusal(error_code ec) noexcept {
  return ec == error::tls_handshake_failed || ec == error::tls_certificate_rejected ||
         ec == error::tls_config_invalid || ec == error::tls_required;
}

bool stream::needs_confirming(error_code ec) noexcept {
  return ec == error::tls_required || ec == error::tls_handshake_failed;
}

// Not coroutines: these return the socket (or TLS layer) operation's own
// awaitable, so a read or write costs exactly what it cost on the bare
// socket, plus one branch.
asio::awaitable<stream::io_result> stream::read_some(asio::mutable_buffer b) {
  if (impl_->tls) return impl_->tls->async_read_some(b, use_nothrow);
  return impl_->socket.async_read_some(b, use_nothrow);
}

asio::awaitable<stream::io_result> stream::write(asio::const_buffer b) {
  if (impl_->tls) return asio::async_write(*impl_->tls, b, use_nothrow);
  return asio::async_write(impl_->socket, b, use_nothrow);
}

void stream::close() noexcept {
  error_code ignored;
  // No TLS close_notify: Redis does not wait for one, and a graceful
  // shutdown would need a round trip on a connection being given up.
  impl_->socket.close(ignored);
  impl_->kind = transport::none;
  // The TLS layer stays until the next connect(): a read or write still
  // pending (completing with operation_aborted) refers to it.
}

bool stream::is_open() const noexcept { return impl_->socket.is_open(); }

bool stream::tls() const noexcept {
  return impl_->tls != nullptr && impl_->kind != transport::none;
}

stream::transport stream::kind() const noexcept { return impl_->kind; }

}  // namespace thoonk::detail
