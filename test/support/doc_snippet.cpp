#include "support/doc_snippet.hpp"

#include "support/redis_server.hpp"
#include "support/run_coro.hpp"
#include "support/test_client.hpp"

#include <thoonk/client.hpp>

#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <catch2/catch.hpp>

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
  // __FILE__ may be relative to the build directory (ccache's base_dir
  // rewrites paths), so files are found from the source root CMake passes.
  const std::string root = THOONK_SOURCE_DIR;
  const auto in_tree = source_file.rfind("test/");
  const std::string source =
      in_tree == std::string::npos ? source_file : root + "/" + source_file.substr(in_tree);
  return {between(slurp(source), "// " + marker + "-begin\n", "// " + marker + "-end\n"),
          between(slurp(root + "/" + doc_page), "<!-- " + marker + "-begin -->\n```cpp\n",
                  "```\n<!-- " + marker + "-end -->")};
}

void check_tutorial_shown(const std::string& source_file, const std::string& doc_page,
                          const std::string& marker) {
  const auto snippets = read_tutorial_snippets(source_file, doc_page, marker);
  REQUIRE(!snippets.source.empty());
  CHECK(snippets.doc == snippets.source);
}

std::string run_tutorial(const tutorial_fn& tutorial, const char* prefix, bool tagged_name) {
  boost::asio::io_context ioc;
  const bool tag = tagged_name && cluster_topology();
  auto cfg = test_config();
  if (tag) cfg.allow_hash_tag_names = true;
  thoonk::client client(ioc.get_executor(), cfg);
  std::ostringstream out;
  const auto name = tag ? "{" + unique_name(prefix) + "}" : unique_name(prefix);
  run_coro(ioc, [&]() -> boost::asio::awaitable<void> {
    co_await client.async_connect(boost::asio::use_awaitable);
    co_await tutorial(client, name, out);
    client.stop();
  });
  return out.str();
}

}  // namespace thoonk::test
