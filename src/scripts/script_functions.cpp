#include "scripts/script_functions.hpp"

#include "scripts/script_exec.hpp"
#include "thoonk_lua_scripts.hpp"

#include <thoonk/error.hpp>

#include <memory>
#include <mutex>
#include <unordered_map>

namespace thoonk::detail {

namespace {

constexpr std::string_view name_mark = "@FN@";

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (auto at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
}

bool starts_with_word(std::string_view text, std::string_view word) {
  return text.starts_with(word) && (text.size() == word.size() || text[word.size()] == ' ');
}

// Refused before running for the server's state, where a script without
// flags (EVALSHA) is refused only at its first write.
bool refused_for_state(std::string_view text) {
  for (auto word : {"OOM", "READONLY", "MISCONF", "NOREPLICAS"})
    if (starts_with_word(text, word)) return true;
  return false;
}

bool function_not_found(const resp3::value& v) {
  return v.is_error() && v.str.starts_with("ERR Function not found");
}

}  // namespace

function_library make_function_library(std::string_view template_text, bool sharded) {
  std::string text(template_text);
  if (sharded) replace_all(text, classic_notify, sharded_notify);
  // Named for the text before naming: the SHA1 as EVALSHA would compute it.
  function_library out{"thoonk_" + script(text).sha1(), {}};
  replace_all(text, name_mark, out.name);
  out.text = std::move(text);
  return out;
}

const function_library* function_library_of(const script& s) {
  static std::mutex mutex;
  // The embedded scripts' templates by the SHA1 of their EVALSHA form.
  static std::unordered_map<std::string, std::string_view> templates;
  // Libraries made so far, by the SHA1 of the EVALSHA form they replace.
  static std::unordered_map<std::string, std::unique_ptr<const function_library>> made;
  std::lock_guard lock(mutex);
  if (templates.empty())
    for (const auto& e : scripts::all_scripts()) templates.emplace(e.get().sha1(), e.library);
  if (auto it = made.find(s.sha1()); it != made.end()) return it->second.get();

  bool sharded = false;
  auto t = templates.find(s.sha1());
  if (t == templates.end()) {
    // A sharded_variant() of an embedded script reads 'spublish' where the
    // script reads 'publish'.
    std::string classic = s.source();
    const auto at = classic.find(sharded_notify);
    if (at == std::string::npos) return nullptr;
    classic.replace(at, sharded_notify.size(), classic_notify);
    t = templates.find(script(std::move(classic)).sha1());
    if (t == templates.end()) return nullptr;
    sharded = true;
  }
  auto lib = std::make_unique<const function_library>(make_function_library(t->second, sharded));
  return made.emplace(s.sha1(), std::move(lib)).first->second.get();
}

const std::set<std::string, std::less<>>& this_build_libraries() {
  static const auto names = [] {
    std::set<std::string, std::less<>> out;
    for (const auto& e : scripts::all_scripts()) {
      out.insert(make_function_library(e.library, false).name);
      // Only a script that notifies has a sharded form of its own (the
      // same text otherwise, so the same name).
      if (e.library.find(classic_notify) != std::string_view::npos)
        out.insert(make_function_library(e.library, true).name);
    }
    return out;
  }();
  return names;
}

bool is_library_name(std::string_view name) noexcept {
  constexpr std::string_view prefix = "thoonk_";
  if (name.size() != prefix.size() + 40 || !name.starts_with(prefix)) return false;
  for (char ch : name.substr(prefix.size()))
    if (!((ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'f'))) return false;
  return true;
}

std::vector<std::string> stale_libraries(const resp3::value& function_list,
                                         const std::set<std::string, std::less<>>& keep,
                                         boost::system::error_code& ec) {
  ec = {};
  std::vector<std::string> out;
  if (function_list.type != resp3::type::array) {
    ec = error::unexpected_type;
    return {};
  }
  for (const auto& lib : function_list.elements) {
    // RESP3 sends each library as a map, RESP2 as a flat array: both hold
    // key, value, key, value ...
    const bool pairs = lib.type == resp3::type::map || lib.type == resp3::type::array;
    if (!pairs || lib.elements.size() % 2 != 0) {
      ec = error::unexpected_type;
      return {};
    }
    const resp3::value* name = nullptr;
    for (std::size_t i = 0; i < lib.elements.size(); i += 2)
      if (lib.elements[i].is_string() && lib.elements[i].str == "library_name")
        name = &lib.elements[i + 1];
    if (!name || !name->is_string()) {
      ec = error::unexpected_type;
      return {};
    }
    if (is_library_name(name->str) && !keep.contains(name->str)) out.push_back(name->str);
  }
  return out;
}

op_status function_reply_status(const resp3::value& v) {
  auto st = reply_status(v);
  if (st && permission_error(v.str)) st.ec = error::no_permission;
  return st;
}

bool functions_unknown(const resp3::value& list_reply) noexcept {
  return list_reply.is_error() && list_reply.str.starts_with("ERR unknown command");
}

std::size_t count_deleted(std::span<const resp3::value> delete_replies, op_status& status) {
  status = {};
  std::size_t n = 0;
  for (const auto& v : delete_replies) {
    if (v.is_error() && v.str.starts_with("ERR Library not found")) continue;
    if (auto st = function_reply_status(v)) {
      if (!status) status = std::move(st);
      continue;
    }
    ++n;
  }
  return n;
}

fcall_step after_fcall(const resp3::value& fcall) {
  if (!fcall.is_error()) return fcall_step::done;
  std::string_view text = fcall.str;
  if (function_not_found(fcall)) return fcall_step::load;
  // "unknown command 'fcall'" (7.x, renamed away) or "`fcall`" (6.x), in
  // the case the command was sent.
  if (text.starts_with("ERR unknown command") &&
      (text.substr(0, 28).find("fcall") != std::string_view::npos ||
       text.substr(0, 28).find("FCALL") != std::string_view::npos))
    return fcall_step::use_eval_for_good;
  // The one mapper of ACL refusals: FCALL refused is a script permission
  // (a key refused is refused to EVALSHA alike, and stays the reply).
  if (permission_error(text) == error::no_script_permission) return fcall_step::use_eval_for_good;
  if (refused_for_state(text)) return fcall_step::use_eval;
  return fcall_step::done;
}

fcall_step after_function_load(const resp3::value& load, const resp3::value& fcall) {
  if (!function_not_found(fcall)) return after_fcall(fcall);
  if (!load.is_error()) return fcall_step::load;
  if (refused_for_state(load.str)) return fcall_step::use_eval;
  return fcall_step::use_eval_for_good;
}

}  // namespace thoonk::detail
