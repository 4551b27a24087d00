#include <thoonk/request.hpp>

#include <algorithm>

namespace thoonk {
namespace {

// ASCII-only case folding: command names are ASCII, and the C library's
// toupper depends on the process locale.
char ascii_upper(char c) { return c >= 'a' && c <= 'z' ? static_cast<char>(c - 'a' + 'A') : c; }

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return ascii_upper(x) == ascii_upper(y);
         });
}

// In RESP3 the SUBSCRIBE family is confirmed by push messages, not replies;
// in RESP2 subscribe mode the subscriber treats the confirmations as pushes
// too. Either way no reply is matched against these commands.
bool is_subscribe_family(std::string_view cmd) {
  return iequals(cmd, "SUBSCRIBE") || iequals(cmd, "UNSUBSCRIBE") || iequals(cmd, "PSUBSCRIBE") ||
         iequals(cmd, "PUNSUBSCRIBE") || iequals(cmd, "SSUBSCRIBE") || iequals(cmd, "SUNSUBSCRIBE");
}

}  // namespace

void request::begin_command(std::size_t argc, std::string_view command) {
  append_header('*', argc);
  ++commands_;
  if (!is_subscribe_family(command)) ++expected_replies_;
}

}  // namespace thoonk
