#include <thoonk/script.hpp>

#include <openssl/evp.h>

#include <stdexcept>

namespace thoonk {

namespace {
std::string sha1_hex(const std::string& text) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  if (EVP_Digest(text.data(), text.size(), digest, &len, EVP_sha1(), nullptr) != 1)
    throw std::runtime_error("thoonk::script: OpenSSL could not compute SHA1");
  static constexpr char hex[] = "0123456789abcdef";
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) {
    out.push_back(hex[digest[i] >> 4]);
    out.push_back(hex[digest[i] & 0xf]);
  }
  return out;
}
}  // namespace

script::script(std::string source) {
  auto sha = sha1_hex(source);
  data_ = std::make_shared<const data>(data{std::move(source), std::move(sha)});
}

}  // namespace thoonk
