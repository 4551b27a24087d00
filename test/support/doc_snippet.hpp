// Docs that show code keep it honest: a tutorial lives in a test file
// between `// tutorial-begin` and `// tutorial-end` (compiled and run), and
// the page shows the same text in a ```cpp block between
// `<!-- tutorial-begin -->` and `<!-- tutorial-end -->`.
#pragma once

#include <boost/asio/awaitable.hpp>

#include <functional>
#include <ostream>
#include <string>

namespace thoonk {
class client;
}

namespace thoonk::test {

struct tutorial_snippets {
  std::string source;  ///< the marked code in the test file
  std::string doc;     ///< the marked code block on the page
};

/// Reads both snippets. `source_file` is the test's __FILE__; `doc_page` is
/// relative to the repository root (e.g. "docs/feeds.md"). A page with
/// several tutorials names each by its `marker` (`// <marker>-begin`,
/// `<!-- <marker>-begin -->`).
tutorial_snippets read_tutorial_snippets(const std::string& source_file,
                                         const std::string& doc_page,
                                         const std::string& marker = "tutorial");

/// Catch2 CHECKs that `doc_page` shows exactly the code marked in
/// `source_file` (read_tutorial_snippets' arguments).
void check_tutorial_shown(const std::string& source_file, const std::string& doc_page,
                          const std::string& marker = "tutorial");

/// A tutorial: a coroutine given a connected client, a fresh name and a
/// stream for what it has to say.
using tutorial_fn =
    std::function<boost::asio::awaitable<void>(thoonk::client&, std::string, std::ostream&)>;

/// Runs `tutorial` against the test server under run_coro's deadline, with a
/// fresh name starting with `prefix`, and returns what it wrote. With
/// `tagged_name`, under cluster_topology() the name is a hash tag of its
/// own (`{<prefix>-...}`) and the client has config::allow_hash_tag_names,
/// so that the names the tutorial derives from it (`<name>.dead`) share its
/// slot; on one server nothing changes.
std::string run_tutorial(const tutorial_fn& tutorial, const char* prefix, bool tagged_name = false);

}  // namespace thoonk::test
