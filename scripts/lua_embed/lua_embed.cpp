// The Lua embedding step without I/O (lua_embed.hpp). docs/architecture.md
// "Scripts" describes the tree it reads and the sources it writes.
#include "lua_embed.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

namespace thoonk::lua_embed {

namespace {

constexpr std::string_view delim = "thoonk_lua";

[[noreturn]] void refuse(const std::string& msg) { throw embed_error(msg); }

// ---------------------------------------------------------------------------
// Lua tokens: enough of the lexer to tell names (and what precedes them),
// strings, comments and long brackets apart.

struct token {
  enum kind_t { name, string, number, symbol } kind;
  std::string text;
  int line;
};

bool is_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_'; }
bool is_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }

// The level of a long bracket opening at s[i] (`[[` 0, `[=[` 1 ...), or -1.
int long_bracket(std::string_view s, std::size_t i) {
  if (i >= s.size() || s[i] != '[') return -1;
  std::size_t j = i + 1;
  while (j < s.size() && s[j] == '=') ++j;
  if (j < s.size() && s[j] == '[') return static_cast<int>(j - i - 1);
  return -1;
}

std::vector<token> tokenize(std::string_view s, int line, const std::string& where) {
  std::vector<token> out;
  std::size_t i = 0;
  auto count_lines = [&](std::size_t from, std::size_t to) {
    line += static_cast<int>(std::count(s.begin() + from, s.begin() + to, '\n'));
  };
  // Skips a long bracket of `level` whose opening starts at i; returns its
  // end (past the closing bracket).
  auto skip_long = [&](std::size_t at, int level) {
    const std::string close = "]" + std::string(level, '=') + "]";
    auto end = s.find(close, at);
    if (end == std::string_view::npos)
      refuse(where + ":" + std::to_string(line) + ": an unclosed long bracket");
    return end + close.size();
  };
  while (i < s.size()) {
    const char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
    } else if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (s.substr(i, 2) == "--") {
      if (int level = long_bracket(s, i + 2); level >= 0) {
        auto end = skip_long(i + 2, level);
        count_lines(i, end);
        i = end;
      } else {
        while (i < s.size() && s[i] != '\n') ++i;
      }
    } else if (c == '\'' || c == '"') {
      const int at = line;
      std::string text;
      std::size_t j = i + 1;
      while (j < s.size() && s[j] != c) {
        if (s[j] == '\\' && j + 1 < s.size()) {
          if (s[j + 1] == '\n') ++line;
          text += s[j];
          ++j;
        } else if (s[j] == '\n') {
          refuse(where + ":" + std::to_string(line) + ": an unfinished string");
        }
        text += s[j];
        ++j;
      }
      if (j >= s.size()) refuse(where + ":" + std::to_string(at) + ": an unfinished string");
      out.push_back({token::string, text, at});
      i = j + 1;
    } else if (int level = long_bracket(s, i); level >= 0) {
      const int at = line;
      auto end = skip_long(i, level);
      out.push_back({token::string, std::string(s.substr(i, end - i)), at});
      count_lines(i, end);
      i = end;
    } else if (std::isdigit(static_cast<unsigned char>(c)) ||
               (c == '.' && i + 1 < s.size() &&
                std::isdigit(static_cast<unsigned char>(s[i + 1])))) {
      std::size_t j = i;
      while (j < s.size() &&
             (is_name_char(s[j]) || (s[j] == '.' && s.substr(j, 2) != "..") ||
              ((s[j] == '+' || s[j] == '-') && (s[j - 1] == 'e' || s[j - 1] == 'E'))))
        ++j;
      out.push_back({token::number, std::string(s.substr(i, j - i)), line});
      i = j;
    } else if (is_name_start(c)) {
      std::size_t j = i;
      while (j < s.size() && is_name_char(s[j])) ++j;
      out.push_back({token::name, std::string(s.substr(i, j - i)), line});
      i = j;
    } else {
      std::size_t n = 1;
      if (s.substr(i, 3) == "...") {
        n = 3;
      } else if (static const std::set<std::string_view> two{"..", "==", "~=", "<=", ">=", "::"};
                 two.count(s.substr(i, 2))) {
        n = 2;
      }
      out.push_back({token::symbol, std::string(s.substr(i, n)), line});
      i += n;
    }
  }
  return out;
}

bool is_symbol(const std::vector<token>& t, std::size_t i, std::string_view text) {
  return i < t.size() && t[i].kind == token::symbol && t[i].text == text;
}
bool is_name(const std::vector<token>& t, std::size_t i) {
  return i < t.size() && t[i].kind == token::name;
}

static const std::set<std::string> lua_keywords{
    "and",      "break",  "do",   "else", "elseif", "end",  "false", "for",
    "function", "goto",   "if",   "in",   "local",  "nil",  "not",   "or",
    "repeat",   "return", "then", "true", "until",  "while"};

// What a piece of code uses: the names it reads as variables (not fields
// `x.name`, not methods `x:name`; a concatenation `s..name` is a use),
// with the line of their first use, and the names it calls through `cold`.
struct uses {
  std::vector<std::pair<std::string, int>> names;
  std::vector<std::pair<std::string, int>> cold;
};

uses uses_of(const std::vector<token>& t) {
  uses u;
  std::set<std::string> seen, seen_cold;
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != token::name || lua_keywords.count(t[i].text)) continue;
    if (i > 0 && (is_symbol(t, i - 1, ".") || is_symbol(t, i - 1, ":"))) continue;
    if (t[i].text == "cold" && is_symbol(t, i + 1, ".") && is_name(t, i + 2)) {
      if (seen_cold.insert(t[i + 2].text).second) u.cold.emplace_back(t[i + 2].text, t[i + 2].line);
      continue;
    }
    if (seen.insert(t[i].text).second) u.names.emplace_back(t[i].text, t[i].line);
  }
  return u;
}

// The names a piece of code declares for itself: `local a, b`, `local
// function f`, function parameters, `for` variables. They may shadow a
// definition of a file the code does not include.
void add_locals(const std::vector<token>& t, std::set<std::string>& out) {
  auto name_list = [&](std::size_t i) {
    while (is_name(t, i)) {
      out.insert(t[i].text);
      if (!is_symbol(t, i + 1, ",")) break;
      i += 2;
    }
  };
  for (std::size_t i = 0; i < t.size(); ++i) {
    if (t[i].kind != token::name) continue;
    if (t[i].text == "local") {
      if (is_name(t, i + 1) && t[i + 1].text == "function") {
        if (is_name(t, i + 2)) out.insert(t[i + 2].text);
      } else {
        name_list(i + 1);
      }
    } else if (t[i].text == "for") {
      name_list(i + 1);
    } else if (t[i].text == "function") {
      std::size_t j = i + 1;
      while (j < t.size() && !is_symbol(t, j, "(")) ++j;
      name_list(j + 1);
    }
  }
}

// The commands a piece of code runs by name: redis.call('X' and
// redis.pcall('X', lower case.
void add_commands(const std::vector<token>& t, std::set<std::string>& out) {
  for (std::size_t i = 0; i + 4 < t.size(); ++i) {
    if (t[i].kind == token::name && t[i].text == "redis" && is_symbol(t, i + 1, ".") &&
        is_name(t, i + 2) && (t[i + 2].text == "call" || t[i + 2].text == "pcall") &&
        is_symbol(t, i + 3, "(") && t[i + 4].kind == token::string && !t[i + 4].text.empty() &&
        std::all_of(t[i + 4].text.begin(), t[i + 4].text.end(),
                    [](char c) { return std::isalpha(static_cast<unsigned char>(c)); })) {
      std::string c = t[i + 4].text;
      for (auto& ch : c) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
      out.insert(c);
    }
  }
}

// ---------------------------------------------------------------------------
// Files.

std::vector<std::string> split_lines(const std::string& text) {
  std::vector<std::string> lines;
  std::string::size_type at = 0;
  while (true) {
    auto nl = text.find('\n', at);
    lines.push_back(text.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
    if (nl == std::string::npos) break;
    at = nl + 1;
  }
  return lines;
}

std::string trim(std::string_view s) {
  const auto* ws = " \t\r";
  auto b = s.find_first_not_of(ws);
  if (b == std::string_view::npos) return {};
  auto e = s.find_last_not_of(ws);
  return std::string(s.substr(b, e - b + 1));
}

std::string join(const std::vector<std::string>& v, std::string_view sep) {
  std::string out;
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) out += sep;
    out += v[i];
  }
  return out;
}

// One top-level definition of an include or a layout: `local function f`
// or `local a, b = ...`, joined onto one line.
struct definition {
  std::vector<std::string> names;
  std::string code;
  bool function = false;
  std::string file;
  int line = 0;
  std::vector<token> tokens;
  uses used;
};

struct include_line {
  std::string target;  // "includes/claims.lua"
  int line;
};

// An include (includes/*.lua) or a layout (layouts/<kind>.lua).
struct header_file {
  std::string path;
  std::vector<definition> defs;
  std::vector<include_line> includes;
  std::set<std::string> locals;
};

const std::regex include_re(R"re(^\s*---\s*@include\s+"([A-Za-z0-9_/]+)"\s*$)re");

// A `--- @include "path"` line: the path (without .lua) it names, or nullopt
// for any other line. A line that starts `--- @` but is no include is an error.
std::optional<std::string> include_of(const std::string& line, const std::string& where) {
  auto t = trim(line);
  if (t.rfind("---", 0) != 0 || trim(t.substr(3)).rfind("@", 0) != 0) return std::nullopt;
  std::smatch m;
  if (!std::regex_match(line, m, include_re))
    refuse(where +
           ": a `--- @` line the build does not know; an include reads `--- @include "
           "\"includes/name\"`");
  return m[1].str() + ".lua";
}

header_file parse_header(const std::string& path, const std::string& text,
                         const std::string& root) {
  header_file h;
  h.path = path;
  const auto lines = split_lines(text);
  std::vector<std::pair<int, std::string>> current;  // the current definition's lines
  auto finish = [&]() {
    if (current.empty()) return;
    definition d;
    d.file = path;
    d.line = current.front().first;
    std::vector<std::string> parts;
    std::string raw;
    for (const auto& [n, l] : current) {
      parts.push_back(trim(l));
      raw += l + "\n";
    }
    d.code = join(parts, " ");
    const auto where = root + path + ":" + std::to_string(d.line);
    std::smatch m;
    static const std::regex fn(R"(^local function ([A-Za-z_][A-Za-z0-9_]*))");
    static const std::regex val(R"(^local ([A-Za-z_][A-Za-z0-9_, \t]*)=)");
    if (std::regex_search(d.code, m, fn)) {
      d.names = {m[1].str()};
      d.function = true;
    } else if (std::regex_search(d.code, m, val)) {
      std::stringstream ss(m[1].str());
      std::string name;
      while (std::getline(ss, name, ',')) d.names.push_back(trim(name));
    } else {
      refuse(where +
             ": a top-level definition that is neither `local function f` nor `local a = ...`");
    }
    // Tokenized line by line: header code has no long brackets, so no
    // token spans lines.
    for (const auto& [n, l] : current) {
      auto t = tokenize(l, n, root + path);
      d.tokens.insert(d.tokens.end(), t.begin(), t.end());
    }
    d.used = uses_of(d.tokens);
    add_locals(d.tokens, h.locals);
    h.defs.push_back(std::move(d));
    current.clear();
  };
  for (std::size_t i = 0; i < lines.size(); ++i) {
    const int n = static_cast<int>(i) + 1;
    const auto& l = lines[i];
    const auto where = root + path + ":" + std::to_string(n);
    auto t = trim(l);
    if (t.rfind("--", 0) == 0) {
      if (auto inc = include_of(l, where)) h.includes.push_back({*inc, n});
      continue;
    }
    if (t.empty()) continue;
    if (l.find("--") != std::string::npos)
      refuse(where +
             ": a comment after code (or `--` in a string): the build joins a header's code "
             "onto one line; put comments on lines of their own");
    if (l.find("[[") != std::string::npos || std::regex_search(l, std::regex(R"(\[=+\[)")))
      refuse(where + ": a long string or comment ([[ ]]) cannot be joined onto one line");
    if (l.rfind("local ", 0) == 0) {
      finish();
    } else if (current.empty()) {
      refuse(where +
             ": a top-level line that is no `local` definition (each starts at the left margin)");
    }
    current.emplace_back(n, l);
  }
  finish();
  return h;
}

// A script: its layout (from its `-- KEYS: layout <kind>` line), includes
// and code.
struct script_file {
  std::string path;
  std::string text;
  std::string layout;
  int keys_line = 0;
  std::string keys_text;
  std::vector<include_line> includes;
  std::vector<token> tokens;
  uses used;
  std::set<std::string> locals;
};

script_file parse_script(const std::string& path, const std::string& text,
                         const std::string& root) {
  script_file s;
  s.path = path;
  s.text = text;
  const auto lines = split_lines(text);
  auto at = [&](int n) { return root + path + ":" + std::to_string(n); };
  if (trim(lines[0]).rfind("--", 0) != 0)
    refuse(at(1) +
           ": the first line must be a comment (the build puts the script's definitions on it)");
  static const std::regex keys_re(R"(^-- KEYS: layout ([a-z_]+)\b.*)");
  bool argv = false;
  std::size_t i = 0;
  for (; i < lines.size() && trim(lines[i]).rfind("--", 0) == 0; ++i) {
    const int n = static_cast<int>(i) + 1;
    std::smatch m;
    if (auto inc = include_of(lines[i], at(n))) {
      s.includes.push_back({*inc, n});
    } else if (std::regex_match(lines[i], m, keys_re)) {
      if (!s.layout.empty())
        refuse(at(n) + ": a second `-- KEYS:` line (the first is line " +
               std::to_string(s.keys_line) + ")");
      s.layout = m[1].str();
      s.keys_line = n;
      s.keys_text = lines[i];
    } else if (lines[i].rfind("-- ARGV", 0) == 0) {
      argv = true;
    }
  }
  for (; i < lines.size(); ++i)
    if (include_of(lines[i], at(static_cast<int>(i) + 1)))
      refuse(at(static_cast<int>(i) + 1) +
             ": an include below the script's code; includes go in the header "
             "(the comment lines at the top)");
  if (s.layout.empty())
    refuse(at(1) +
           ": no `-- KEYS: layout <kind>` line in the header (the comment lines at the top) "
           "naming the key layout the script takes (src/lua/layouts/<kind>.lua)");
  if (!argv)
    refuse(at(1) + ": no `-- ARGV` line in the header saying what the script takes in ARGV");
  s.tokens = tokenize(text, 1, root + path);
  s.used = uses_of(s.tokens);
  add_locals(s.tokens, s.locals);
  return s;
}

// layouts/<kind>.keys: `<key> <Lua name>` per line, in KEYS order; `#`
// starts a comment line.
struct key_table {
  std::string path;
  std::vector<std::pair<std::string, std::string>> keys;  // key, Lua name
  std::vector<int> lines;
};

key_table parse_keys(const std::string& path, const std::string& text, const std::string& root) {
  key_table k;
  k.path = path;
  const auto lines = split_lines(text);
  static const std::regex row(R"(^([a-z_][a-z0-9_]*)\s+(K_[A-Z0-9_]+)$)");
  for (std::size_t i = 0; i < lines.size(); ++i) {
    auto t = trim(lines[i]);
    if (t.empty() || t[0] == '#') continue;
    std::smatch m;
    if (!std::regex_match(t, m, row))
      refuse(root + path + ":" + std::to_string(i + 1) +
             ": a row must read `<key name> K_<LUA_NAME>` (e.g. `config K_CONFIG`)");
    k.keys.emplace_back(m[1].str(), m[2].str());
    k.lines.push_back(static_cast<int>(i) + 1);
  }
  return k;
}

// The key definitions a key table stands for, first in its layout:
// `local K_X = KEYS[i]` per key, then K_COUNT, the number of keys.
std::vector<definition> key_definitions(const key_table& k, const std::string& root) {
  std::vector<definition> out;
  auto add = [&](const std::string& name, const std::string& value, int line) {
    definition d;
    d.names = {name};
    d.code = "local " + name + " = " + value;
    d.file = k.path;
    d.line = line;
    d.tokens = tokenize(d.code, line, root + k.path);
    d.used = uses_of(d.tokens);
    out.push_back(std::move(d));
  };
  for (std::size_t i = 0; i < k.keys.size(); ++i)
    add(k.keys[i].second, "KEYS[" + std::to_string(i + 1) + "]", k.lines[i]);
  add("K_COUNT", std::to_string(k.keys.size()), k.lines.empty() ? 1 : k.lines.back());
  return out;
}

std::string c_identifier(const std::string& s) {
  std::string out = s;
  for (auto& c : out)
    if (!is_name_char(c)) c = '_';
  if (!out.empty() && std::isdigit(static_cast<unsigned char>(out[0]))) out = "_" + out;
  return out;
}

std::string where_of(const std::string& root, const std::string& file, int line) {
  return root + file + ":" + std::to_string(line);
}

std::string without_lua(const std::string& p) {
  return p.size() > 4 ? p.substr(0, p.size() - 4) : p;
}

// ---------------------------------------------------------------------------
// The tree.

class tree {
 public:
  tree(const std::map<std::string, std::string>& files, std::string root) : root_(std::move(root)) {
    for (const auto& [path, text] : files) {
      const bool lua = path.size() > 4 && path.compare(path.size() - 4, 4, ".lua") == 0;
      if (path.rfind("layouts/", 0) == 0 && path.size() > 5 &&
          path.compare(path.size() - 5, 5, ".keys") == 0) {
        keys_.emplace(path, parse_keys(path, text, root_));
      } else if (!lua) {
        continue;
      } else if (path.rfind("includes/", 0) == 0 || path.rfind("layouts/", 0) == 0) {
        headers_.emplace(path, parse_header(path, text, root_));
      } else {
        scripts_.push_back(parse_script(path, text, root_));
      }
    }
    for (auto& [path, k] : keys_) {
      auto lua = path.substr(0, path.size() - 5) + ".lua";
      auto& h = headers_[lua];
      if (h.path.empty()) h.path = lua;
      auto defs = key_definitions(k, root_);
      h.defs.insert(h.defs.begin(), defs.begin(), defs.end());
    }
    for (const auto& [path, h] : headers_) {
      const bool layout = path.rfind("layouts/", 0) == 0;
      for (const auto& d : h.defs) {
        for (const auto& n : d.names) {
          if (layout) {
            layout_names_[n].insert(path);
            continue;
          }
          auto [it, fresh] = include_names_.emplace(n, &d);
          if (!fresh)
            refuse(where_of(root_, d.file, d.line) + ": `" + n + "` is defined twice: also at " +
                   where_of(root_, it->second->file, it->second->line) +
                   "; a name has one definition");
        }
      }
    }
    for (const auto& [path, h] : headers_) {
      if (path.rfind("layouts/", 0) == 0) continue;
      std::vector<std::string> stack;
      check_file_uses(path, h.defs, h.locals, closure_of(path, stack), nullptr);
    }
  }

  generated_files generate() {
    std::string hpp = R"(// Generated by scripts/lua_embed from src/lua/**: do not edit.
#pragma once

#include <thoonk/script.hpp>

#include <span>
#include <string_view>

namespace thoonk::detail::scripts {

/// One embedded script: its file under src/lua, its layout, the file's text
/// (what line numbers refer to), the script the server runs with EVALSHA,
/// and the same script as a function library, its name written @FN@
/// (src/scripts/script_functions.hpp).
struct embedded_script {
  std::string_view file;
  std::string_view layout;
  std::string_view file_text;
  const script& (*get)();
  std::string_view library;
};

/// Every embedded script, in file order.
std::span<const embedded_script> all_scripts();

)";
    std::string cpp = R"(// Generated by scripts/lua_embed from src/lua/**: do not edit.
#include "thoonk_lua_scripts.hpp"

#include <string>

namespace thoonk::detail::scripts {

namespace {
)";
    std::string table, accessors;
    for (const auto& s : scripts_) {
      const auto e = embed_script(s);
      if (s.text.find(")" + std::string(delim) + "\"") != std::string::npos)
        refuse(root_ + s.path + ": contains the raw string delimiter )" + std::string(delim) +
               "\"");
      const auto ident = c_identifier(without_lua(s.path));
      const auto raw = [](const std::string& t) {
        return "R\"" + std::string(delim) + "(" + t + ")" + std::string(delim) + "\"";
      };
      cpp += "constexpr char file_" + ident + "[] = " + raw(s.text) + ";\n";
      cpp += "constexpr char source_" + ident + "[] = " + raw(e.source) + ";\n";
      cpp += "constexpr char library_" + ident + "[] = " + raw(e.library) + ";\n";
      hpp += "/// src/lua/" + s.path + "\nconst script& " + ident + "();\n";
      accessors += "const script& " + ident + "() {\n  static const script s{std::string(source_" +
                   ident + ", sizeof source_" + ident + " - 1)};\n  return s;\n}\n";
      table += "    {\"" + s.path + "\", \"" + s.layout + "\", {file_" + ident + ", sizeof file_" +
               ident + " - 1}, &" + ident + ", {library_" + ident + ", sizeof library_" + ident +
               " - 1}},\n";
    }
    hpp += "\n}  // namespace thoonk::detail::scripts\n";
    cpp += "}  // namespace\n\n" + accessors +
           "\nstd::span<const embedded_script> all_scripts() {\n  static constexpr embedded_script "
           "list[] = {\n" +
           table + "  };\n  return list;\n}\n\n}  // namespace thoonk::detail::scripts\n";

    std::string layouts =
        R"(// Generated by scripts/lua_embed from src/lua/layouts/*.keys: do not edit.
// The keys of each layout that has a key table, in KEYS order: the scripts
// name them K_... (the table's second column), the C++ side builds them in
// this order (src/jobs/job_keys.hpp).
#pragma once

#include <string_view>

)";
    for (const auto& [path, k] : keys_) {
      const auto kind = path.substr(8, path.size() - 8 - 5);
      std::string upper = kind;
      for (auto& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
      layouts += "/// src/lua/" + path + ": X(key) for each key of layout `" + kind +
                 "`.\n#define THOONK_LAYOUT_" + upper + "_KEYS(X)";
      for (const auto& [key, lua] : k.keys) layouts += " X(" + key + ")";
      layouts += "\n\nnamespace thoonk::detail::layouts {\n/// The key names of layout `" + kind +
                 "` (feed.<name>:[f]), in KEYS order.\ninline constexpr std::string_view " + kind +
                 "_keys[] = {";
      for (std::size_t i = 0; i < k.keys.size(); ++i)
        layouts += (i ? ", \"" : "\"") + k.keys[i].first + "\"";
      layouts += "};\n}  // namespace thoonk::detail::layouts\n\n";
    }
    return {{"thoonk_lua_scripts.hpp", hpp},
            {"thoonk_lua_scripts.cpp", cpp},
            {"thoonk_lua_layouts.hpp", layouts}};
  }

 private:
  struct embedded {
    std::string source;
    std::string library;
  };

  // The includes `path` reaches, itself not among them unless in a cycle,
  // in dependency order (each after what it includes). `stack` holds the
  // includes being resolved, to report a cycle.
  std::vector<std::string> closure_of(const std::string& path, std::vector<std::string>& stack) {
    if (auto it = closures_.find(path); it != closures_.end()) return it->second;
    stack.push_back(path);
    std::vector<std::string> out;
    for (const auto& inc : headers_.at(path).includes) {
      resolve(path, inc, stack, out);
    }
    stack.pop_back();
    closures_[path] = out;
    return out;
  }

  // Appends `inc` (included by `from`) and what it reaches to `out`, each once.
  void resolve(const std::string& from, const include_line& inc, std::vector<std::string>& stack,
               std::vector<std::string>& out) {
    const auto here = where_of(root_, from, inc.line);
    if (inc.target.rfind("includes/", 0) != 0)
      refuse(here + ": includes `" + without_lua(inc.target) +
             "`: only files under includes/ are included (a script's layout comes from its KEYS "
             "line)");
    if (!headers_.count(inc.target))
      refuse(here + ": includes `" + without_lua(inc.target) + "`, but there is no " + root_ +
             inc.target);
    if (auto c = std::find(stack.begin(), stack.end(), inc.target); c != stack.end()) {
      std::string chain;
      for (auto it = c; it != stack.end(); ++it) chain += *it + " -> ";
      refuse(here + ": an include cycle: " + chain + inc.target +
             "; move what both need into an include of its own");
    }
    for (const auto& p : closure_of(inc.target, stack))
      if (std::find(out.begin(), out.end(), p) == out.end()) out.push_back(p);
    if (std::find(out.begin(), out.end(), inc.target) == out.end()) out.push_back(inc.target);
  }

  // Refuses a use, in code of file `file`, of a name that an include
  // defines when `file` does not reach that include (the definition would
  // come after the use, or not at all), and, for a script's code (its
  // `layout` given), of a layout's name that the script's layout does not
  // define.
  void check_file_uses(const std::string& file, const std::vector<definition>& defs,
                       const std::set<std::string>& locals, const std::vector<std::string>& reached,
                       const script_file* script) {
    std::set<std::string> own;
    for (const auto& d : defs)
      for (const auto& n : d.names) own.insert(n);
    auto check = [&](const std::string& name, const std::string& where) {
      if (own.count(name) || locals.count(name)) return;
      if (auto it = include_names_.find(name); it != include_names_.end()) {
        const auto& d = *it->second;
        if (std::find(reached.begin(), reached.end(), d.file) == reached.end())
          refuse(where + ": uses `" + name + "`, defined at " + where_of(root_, d.file, d.line) +
                 ", which " + file + " does not include: add `--- @include \"" +
                 without_lua(d.file) + "\"` to its header");
      }
    };
    if (script) {
      for (const auto& [n, line] : script->used.names) check(n, where_of(root_, file, line));
      for (const auto& [n, line] : script->used.cold) check(n, where_of(root_, file, line));
    } else {
      for (const auto& d : defs) {
        for (const auto& [n, line] : d.used.names) check(n, where_of(root_, d.file, line));
        for (const auto& [n, line] : d.used.cold) check(n, where_of(root_, d.file, line));
      }
    }
  }

  // A name of a layout other than `layout` (K_LOCK in a job script):
  // refused, naming the script's KEYS line.
  void check_layout_name(const std::string& name, const std::string& where, const script_file& s,
                         const std::set<std::string>& defined) {
    if (defined.count(name) || s.locals.count(name)) return;
    auto it = layout_names_.find(name);
    if (it == layout_names_.end()) return;
    std::vector<std::string> kinds;
    for (const auto& p : it->second) kinds.push_back(without_lua(p.substr(8)));
    refuse(where + ": `" + name + "` is no name of layout " + s.layout +
           ", which the KEYS header of " + s.path + " (line " + std::to_string(s.keys_line) +
           ") names; layout " + join(kinds, ", ") + " defines it: fix the KEYS line or the key");
  }

  embedded embed_script(const script_file& s) {
    const auto layout_path = "layouts/" + s.layout + ".lua";
    if (!headers_.count(layout_path))
      refuse(where_of(root_, s.path, s.keys_line) + ": layout `" + s.layout + "` has no file " +
             root_ + layout_path);
    // The definitions in order: the layout's, then every include reached
    // from the layout's includes and the script's, in dependency order.
    std::vector<std::string> stack{s.path};
    std::vector<std::string> reached;
    for (const auto& inc : headers_.at(layout_path).includes)
      resolve(layout_path, inc, stack, reached);
    for (const auto& inc : s.includes) resolve(s.path, inc, stack, reached);
    std::vector<const definition*> defs;
    std::map<std::string, const definition*> by_name;
    auto add_defs = [&](const header_file& h) {
      for (const auto& d : h.defs) {
        for (const auto& n : d.names) {
          auto [it, fresh] = by_name.emplace(n, &d);
          if (!fresh)
            refuse(where_of(root_, d.file, d.line) + ": `" + n + "` is defined twice for " +
                   s.path + ": also at " + where_of(root_, it->second->file, it->second->line));
        }
        defs.push_back(&d);
      }
    };
    add_defs(headers_.at(layout_path));
    // The keys the KEYS line names (`K_FEEDS, K_CONFIG, then ...`) are the layout's.
    static const std::regex key_name(R"(\bK_[A-Z0-9_]+\b)");
    for (std::sregex_iterator it(s.keys_text.begin(), s.keys_text.end(), key_name), end; it != end;
         ++it)
      if (!by_name.count(it->str()))
        refuse(where_of(root_, s.path, s.keys_line) + ": the KEYS header names `" + it->str() +
               "`, which is no name of layout " + s.layout + " (" + root_ + layout_path + ")");
    for (const auto& p : reached) add_defs(headers_.at(p));
    check_file_uses(s.path, {}, s.locals, reached, &s);
    std::set<std::string> defined;
    for (const auto& [n, d] : by_name) defined.insert(n);
    for (const auto& [n, line] : s.used.names)
      check_layout_name(n, where_of(root_, s.path, line), s, defined);

    // Hot: what the script's code uses, and what that uses in turn, but the
    // names it calls as `cold.name`; check_commands always (the build calls
    // it before the script's code).
    if (!by_name.count("check_commands"))
      refuse(where_of(root_, s.path, s.keys_line) + ": no definition of check_commands reaches " +
             s.path + " (the build calls it before every script): layout " + s.layout +
             " must include the file that defines it (includes/acl)");
    std::set<const definition*> hot, cold;
    std::vector<std::pair<std::string, std::string>> roots;  // name, where
    auto add_roots = [&](const std::vector<std::pair<std::string, int>>& c,
                         const std::string& file) {
      for (const auto& entry : c) {
        // Not a structured binding: clang 14 cannot capture one in a lambda.
        const std::string& n = entry.first;
        if (std::none_of(roots.begin(), roots.end(), [&](const auto& r) { return r.first == n; }))
          roots.emplace_back(n, where_of(root_, file, entry.second));
      }
    };
    auto grow = [&](std::set<const definition*>& set, std::set<std::string> names,
                    const std::set<const definition*>& skip) {
      bool changed = true;
      while (changed) {
        changed = false;
        for (const auto* d : defs) {
          if (set.count(d) || skip.count(d)) continue;
          if (std::any_of(d->names.begin(), d->names.end(),
                          [&](const auto& n) { return names.count(n); })) {
            set.insert(d);
            for (const auto& [n, l] : d->used.names) names.insert(n);
            changed = true;
          }
        }
      }
    };
    std::set<std::string> names{"check_commands"};
    for (const auto& [n, l] : s.used.names) names.insert(n);
    grow(hot, names, {});
    add_roots(s.used.cold, s.path);
    for (const auto* d : defs)
      if (hot.count(d)) add_roots(d->used.cold, d->file);
    while (true) {
      const auto before = roots.size();
      std::set<std::string> cold_names;
      for (const auto& r : roots) cold_names.insert(r.first);
      for (const auto* d : cold)
        for (const auto& [n, l] : d->used.names) cold_names.insert(n);
      grow(cold, cold_names, hot);
      for (const auto* d : defs)
        if (cold.count(d)) add_roots(d->used.cold, d->file);
      if (roots.size() == before) break;
    }
    for (const auto* d : defs) {
      if (!hot.count(d) && !cold.count(d)) continue;
      for (const auto& [n, line] : d->used.names)
        check_layout_name(n, where_of(root_, d->file, line), s, defined);
    }
    for (const auto& [n, where] : roots)
      if (!by_name.count(n))
        refuse(where + ": `cold." + n + "` names no definition of the files " + s.path +
               " includes");

    std::set<std::string> commands;
    add_commands(s.tokens, commands);
    for (const auto* d : defs)
      if (hot.count(d) || cold.count(d)) add_commands(d->tokens, commands);
    std::vector<std::string> checked;
    // PUBLISH is checked with its channels before the first write
    // (check_publish, check_classic_publish); without a channel Redis
    // refuses it for any user whose channels are restricted.
    for (const auto& c : commands)
      if (c != "publish" && c != "spublish") checked.push_back("'" + c + "'");
    const auto check = "do local refused = check_commands(" + join(checked, ", ") +
                       ") if refused then return refused end end";

    // The script form: the definitions on the first line, the cold ones
    // inside the `__index` function of the table `cold`.
    std::string text = roots.empty() ? "" : "local cold ";
    std::string lib_names = roots.empty() ? "KEYS, ARGV" : "KEYS, ARGV, cold";
    std::string lib_functions, lib_values;
    for (const auto* d : defs) {
      if (!hot.count(d)) continue;
      text += d->code + " ";
      if (d->function) {
        lib_functions += d->code + " ";
      } else {
        lib_names += ", " + join(d->names, ", ");
        lib_values += d->code.substr(6) + " ";
      }
    }
    if (!roots.empty()) {
      text += "cold = setmetatable({}, {__index = function(t, k) ";
      for (const auto* d : defs)
        if (cold.count(d)) text += d->code + " ";
      for (const auto& [n, w] : roots) text += "t." + n + " = " + n + " ";
      text += "return rawget(t, k) end}) ";
    }
    text = trim(text);
    // The library form: functions made once at load (the cold ones in a
    // block of their own, `cold` a plain table of them), values assigned
    // on every call (the cold values by the first cold call of a call).
    std::string lib_cold, lib_cold_reset;
    if (!roots.empty()) {
      std::vector<std::string> cold_names;
      std::string cold_functions, cold_values;
      for (const auto* d : defs) {
        if (!cold.count(d)) continue;
        if (d->function) {
          cold_functions += d->code + " ";
        } else {
          cold_names.insert(cold_names.end(), d->names.begin(), d->names.end());
          cold_values += d->code.substr(6) + " ";
        }
      }
      lib_cold = "do ";
      std::string guard;
      if (!cold_names.empty()) {
        lib_cold += "local " + join(cold_names, ", ") + " ";
        lib_names += ", cold_bound";
        cold_functions += "local function bind_cold() cold_bound = true " + cold_values + "end ";
        guard = "if not cold_bound then bind_cold() end ";
        lib_cold_reset = "cold_bound = false ";
      }
      lib_cold += cold_functions + "cold = {";
      for (const auto& [n, where] : roots) {
        if (!by_name.at(n)->function)
          refuse(where + ": `cold." + n +
                 "`: only a `local function` can be reached through `cold`");
        if (!guard.empty()) {
          lib_cold += n + " = function(...) " + guard + "return " + n + "(...) end, ";
        } else {
          lib_cold += n + " = " + n + ", ";
        }
      }
      lib_cold += "} end ";
    }
    const auto lib_top = "local " + lib_names + " " + lib_functions + lib_cold;
    const auto lib_call = "KEYS, ARGV = keys, args " + lib_values + lib_cold_reset + "; " + check;
    const auto nl = s.text.find('\n');
    const auto rest = nl == std::string::npos ? s.text : s.text.substr(nl + 1);
    // The `;` ends the last statement of the call part: a file whose line 2
    // opened with `(` would otherwise continue it as a function call.
    const auto library = "#!lua name=@FN@\n" + lib_top +
                         "redis.register_function('@FN@', function(keys, args) " + lib_call + "; " +
                         rest + "\nend)";
    return {text + " " + check + " " + s.text, library};
  }

  std::string root_;
  std::map<std::string, header_file> headers_;
  std::map<std::string, key_table> keys_;
  std::vector<script_file> scripts_;
  std::map<std::string, const definition*> include_names_;
  std::map<std::string, std::set<std::string>> layout_names_;
  std::map<std::string, std::vector<std::string>> closures_;
};

}  // namespace

generated_files embed(const std::map<std::string, std::string>& files, const std::string& root) {
  tree t(files, root);
  return t.generate();
}

}  // namespace thoonk::lua_embed
