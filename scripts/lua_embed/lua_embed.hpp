// The build step that embeds the library's Lua scripts (src/lua/**) into
// C++ (docs/architecture.md "Scripts"), without I/O: a tree of files in,
// the generated sources out, or an error naming a file and line.
// scripts/lua_embed/main.cpp reads the tree and writes the files.
#pragma once

#include <map>
#include <stdexcept>
#include <string>

namespace thoonk::lua_embed {

/// A tree the build cannot embed: `what()` names the file and line and says
/// what to change.
struct embed_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

/// The generated files, by name: thoonk_lua_scripts.hpp (the accessors;
/// its text depends only on which scripts exist), thoonk_lua_scripts.cpp
/// (the scripts) and thoonk_lua_layouts.hpp (the key tables of
/// layouts/<kind>.keys, for the C++ side that builds those KEYS).
using generated_files = std::map<std::string, std::string>;

/// Every file of the tree, by path relative to its root ("jobs/put.lua",
/// "includes/claims.lua", "layouts/job.keys"), with its text. `root` is
/// how messages name the tree (e.g. "src/lua/").
generated_files embed(const std::map<std::string, std::string>& files,
                      const std::string& root = "");

}  // namespace thoonk::lua_embed
