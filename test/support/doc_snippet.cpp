#include "support/doc_snippet.hpp"

#include <fstream>
#include <sstream>

namespace thoonk::test {
namespace {

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

std::string between(const std::string& text, const std::string& begin, const std::string& end) {
  auto b = text.find(begin);
  if (b == std::string::npos) return {};
  b += begin.size();
  auto e = text.find(end, b);
  return e == std::string::npos ? std::string{} : text.substr(b, e - b);
}

}  // namespace

tutorial_snippets read_tutorial_snippets(const std::string& source_file,
                                         const std::string& doc_page, const std::string& marker) {
  const std::string here = __FILE__;
  const std::string root = here.substr(0, here.rfind("/test/support/"));
  return {between(slurp(source_file), "// " + marker + "-begin\n", "// " + marker + "-end\n"),
          between(slurp(root + "/" + doc_page), "<!-- " + marker + "-begin -->\n```cpp\n",
                  "```\n<!-- " + marker + "-end -->")};
}

}  // namespace thoonk::test
