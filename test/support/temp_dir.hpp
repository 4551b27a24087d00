// Directories for a test's files (a redis-server's, certificates, logs):
// made fresh under $TMPDIR (or /tmp) and removed with everything in them,
// unless THOONK_KEEP_REDIS_DIR is set (and not 0) to keep them for a look
// after a failed run. Header-only: the benchmarks use it too.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <string_view>
#include <system_error>

#include <stdlib.h>

namespace thoonk::test {

/// Whether THOONK_KEEP_REDIS_DIR asks to keep the tests' directories.
inline bool keep_test_dirs() {
  const char* keep = std::getenv("THOONK_KEEP_REDIS_DIR");
  return keep && *keep && std::string_view(keep) != "0";
}

/// Makes the new directory `<TMPDIR or /tmp>/<prefix>-XXXXXX` and returns
/// its path; throws std::system_error when it cannot.
inline std::string make_temp_dir(std::string_view prefix) {
  const char* tmp = std::getenv("TMPDIR");
  std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/";
  pattern.append(prefix).append("-XXXXXX");
  if (::mkdtemp(pattern.data()) == nullptr)
    throw std::system_error(errno, std::generic_category(), "mkdtemp " + pattern);
  return pattern;
}

/// Removes `path` and everything in it, unless keep_test_dirs().
inline void remove_temp_dir(const std::string& path) noexcept {
  if (keep_test_dirs()) return;
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

/// A fresh temporary directory (make_temp_dir), removed by the destructor
/// (remove_temp_dir).
class temp_dir {
 public:
  explicit temp_dir(std::string_view prefix) : path_(make_temp_dir(prefix)) {}
  ~temp_dir() { remove_temp_dir(path_); }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const noexcept { return path_; }

 private:
  std::string path_;
};

}  // namespace thoonk::test
