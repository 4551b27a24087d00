#include "support/tls_certs.hpp"

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

namespace thoonk::test {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

constexpr const char* curve = "ec_paramgen_curve:prime256v1";

}  // namespace

tls_certs::tls_certs() : dir_("thoonk-tls") {
  // A step that throws leaves the directory to dir_'s destructor.
  make_ca("ca", "/CN=thoonk test CA");
  make_ca("other-ca", "/CN=thoonk other CA");
  const std::string server_names = "subjectAltName=DNS:localhost,IP:127.0.0.1";
  make_signed("server", "ca", "/CN=localhost", server_names, 1);
  make_signed("expired", "ca", "/CN=localhost", server_names, -1);
  make_signed("wrong-host", "ca", "/CN=elsewhere.example", "subjectAltName=DNS:elsewhere.example",
              1);
  make_signed("foreign", "other-ca", "/CN=localhost", server_names, 1);
  make_signed("client", "ca", "/CN=thoonk test client", "extendedKeyUsage=clientAuth", 1);
  make_signed("foreign-client", "other-ca", "/CN=thoonk foreign client",
              "extendedKeyUsage=clientAuth", 1);
}

// Runs `openssl args...` (no shell), its output into openssl.log; throws
// with that output when it fails.
void tls_certs::run(const std::vector<std::string>& args) const {
  std::vector<std::string> all = {"openssl"};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  const std::string log = dir() + "/openssl.log";
  const int out = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) throw std::runtime_error("open " + log + ": " + std::strerror(errno));
  const pid_t child = ::fork();
  if (child < 0) {
    ::close(out);
    throw std::runtime_error(std::string("fork: ") + std::strerror(errno));
  }
  if (child == 0) {
    ::dup2(out, STDOUT_FILENO);
    ::dup2(out, STDERR_FILENO);
    const int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, STDIN_FILENO);
    ::execvp("openssl", argv.data());
    ::_exit(127);
  }
  ::close(out);
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
    std::string cmd;
    for (const auto& a : all) cmd += a + " ";
    throw std::runtime_error("certificate step failed (" +
                             std::string(WIFEXITED(status) && WEXITSTATUS(status) == 127
                                             ? "is the openssl command installed? "
                                             : "") +
                             "exit status " + std::to_string(status) + "): " + cmd + "\n" +
                             read_file(log));
  }
}

void tls_certs::make_ca(const std::string& name, const std::string& subject) const {
  const auto p = pair(name);
  run({"req", "-x509", "-newkey", "ec", "-pkeyopt", curve, "-nodes", "-keyout", p.key, "-out",
       p.cert, "-days", "2", "-subj", subject, "-addext", "basicConstraints=critical,CA:TRUE",
       "-addext", "keyUsage=critical,keyCertSign,cRLSign"});
}

void tls_certs::make_signed(const std::string& name, const std::string& ca,
                            const std::string& subject, const std::string& extensions,
                            int days) const {
  const auto p = pair(name);
  const auto signer = pair(ca);
  const std::string csr = dir() + "/" + name + ".csr";
  const std::string ext = dir() + "/" + name + ".ext";
  {
    std::ofstream out(ext);
    out << extensions << "\n";
  }
  run({"req", "-newkey", "ec", "-pkeyopt", curve, "-nodes", "-keyout", p.key, "-out", csr, "-subj",
       subject});
  // -days -1: valid until yesterday, i.e. expired (OpenSSL 3 accepts it).
  run({"x509", "-req", "-in", csr, "-CA", signer.cert, "-CAkey", signer.key, "-CAcreateserial",
       "-out", p.cert, "-days", std::to_string(days), "-extfile", ext});
}

const tls_certs& shared_tls_certs() {
  static const tls_certs instance;
  return instance;
}

redis_server_options tls_server_options(const cert_pair& server_cert, bool auth_clients) {
  redis_server_options o;
  o.tls = redis_server_options::tls_files{server_cert.cert, server_cert.key,
                                          shared_tls_certs().ca_file(), auth_clients};
  return o;
}

}  // namespace thoonk::test
