// Certificates for the TLS tests, made at test time with the `openssl`
// command into a temporary directory: a CA, a server certificate for
// 127.0.0.1 and localhost, a client certificate, and the bad ones (expired,
// for another host, from another CA). Nothing is checked into the
// repository, so nothing expires there.
#pragma once

#include "support/redis_server.hpp"
#include "support/temp_dir.hpp"

#include <string>
#include <vector>

namespace thoonk::test {

/// One PEM certificate and its key.
struct cert_pair {
  std::string cert;
  std::string key;
};

/// Makes every certificate at construction (throws std::runtime_error with
/// openssl's output when a step fails; a missing `openssl` binary is an
/// error, never a skip) into a temp_dir, removed on destruction (kept with
/// THOONK_KEEP_REDIS_DIR=1). EC P-256 keys: quick to make.
class tls_certs {
 public:
  tls_certs();

  const std::string& dir() const noexcept { return dir_.path(); }

  /// The test CA (PEM certificate): what clients trust.
  std::string ca_file() const { return dir() + "/ca.crt"; }
  /// Another CA, trusted by nobody here.
  std::string other_ca_file() const { return dir() + "/other-ca.crt"; }

  /// Signed by the CA, for CN=localhost with the names localhost and
  /// 127.0.0.1, valid for a day.
  cert_pair server() const { return pair("server"); }
  /// Signed by the CA for the client side of mutual TLS.
  cert_pair client() const { return pair("client"); }
  /// Signed by the other CA, for a client the server must refuse.
  cert_pair foreign_client() const { return pair("foreign-client"); }
  /// Same names as server(), signed by the CA, but expired yesterday.
  cert_pair expired() const { return pair("expired"); }
  /// Signed by the CA for elsewhere.example only.
  cert_pair wrong_host() const { return pair("wrong-host"); }
  /// Same names as server(), signed by the other CA.
  cert_pair foreign() const { return pair("foreign"); }

 private:
  cert_pair pair(const std::string& name) const {
    return {dir() + "/" + name + ".crt", dir() + "/" + name + ".key"};
  }
  void run(const std::vector<std::string>& args) const;
  void make_ca(const std::string& name, const std::string& subject) const;
  void make_signed(const std::string& name, const std::string& ca, const std::string& subject,
                   const std::string& extensions, int days) const;

  temp_dir dir_;
};

/// One set for the whole test binary, made at first use (making them costs
/// a few hundred milliseconds).
const tls_certs& shared_tls_certs();

/// A redis-server with a TLS port serving `server_cert` (from
/// shared_tls_certs()), trusting the shared CA for client certificates;
/// `auth_clients`: it requires one (tls-auth-clients yes).
redis_server_options tls_server_options(const cert_pair& server_cert, bool auth_clients = false);

}  // namespace thoonk::test
