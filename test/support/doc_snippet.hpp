// Docs that show code keep it honest: a tutorial lives in a test file
// between `// tutorial-begin` and `// tutorial-end` (compiled and run), and
// the page shows the same text in a ```cpp block between
// `<!-- tutorial-begin -->` and `<!-- tutorial-end -->`.
#pragma once

#include <string>

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

}  // namespace thoonk::test
