// A Lua script run with EVALSHA (loaded on demand).
#pragma once

#include <memory>
#include <string>
#include <thoonk/export.hpp>

namespace thoonk {

/// Lua source plus its SHA1, computed once. Copies share the text, so a
/// script can be passed by value cheaply. Thread-safe (immutable).
class THOONK_API script {
 public:
  explicit script(std::string source);  ///< a script of `source`; its SHA1 is computed here

  const std::string& source() const noexcept { return data_->source; }  ///< the Lua source
  /// Lower-case hex SHA1 of the source, as EVALSHA and SCRIPT LOAD use it.
  const std::string& sha1() const noexcept { return data_->sha1; }

 private:
  struct data {
    std::string source;
    std::string sha1;
  };
  std::shared_ptr<const data> data_;
};

}  // namespace thoonk
