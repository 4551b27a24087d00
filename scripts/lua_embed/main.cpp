// lua_embed <lua dir> <out dir>: the build step that embeds the library's
// Lua scripts (lua_embed.hpp). Reads every .lua and .keys file under
// <lua dir> and writes the generated sources into <out dir>, each only when
// its text changed (so editing a script recompiles the one generated .cpp,
// not every source that includes the generated headers). On a tree it
// cannot embed it prints the reason, naming file and line, and exits 1.
#include "lua_embed.hpp"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>

namespace fs = std::filesystem;

namespace {

std::string read(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + p.string());
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_if_changed(const fs::path& p, const std::string& text) {
  std::error_code ec;
  if (fs::exists(p, ec) && read(p) == text) return;
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << text;
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: lua_embed <lua dir> <out dir>\n";
    return 2;
  }
  try {
    const fs::path dir = argv[1];
    std::map<std::string, std::string> files;
    for (const auto& e : fs::recursive_directory_iterator(dir)) {
      if (!e.is_regular_file()) continue;
      const auto ext = e.path().extension();
      if (ext != ".lua" && ext != ".keys") continue;
      files.emplace(fs::relative(e.path(), dir).generic_string(), read(e.path()));
    }
    auto root = dir.generic_string();
    if (!root.empty() && root.back() != '/') root += '/';
    const auto out = thoonk::lua_embed::embed(files, root);
    fs::create_directories(argv[2]);
    for (const auto& [name, text] : out) write_if_changed(fs::path(argv[2]) / name, text);
  } catch (const thoonk::lua_embed::embed_error& e) {
    std::cerr << "lua_embed: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "lua_embed: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
