#include <thoonk/resp3/value.hpp>

#include <charconv>
#include <cmath>

namespace thoonk::resp3 {

std::string_view to_string(type t) noexcept {
  switch (t) {
    case type::simple_string: return "simple_string";
    case type::simple_error: return "simple_error";
    case type::blob_string: return "blob_string";
    case type::blob_error: return "blob_error";
    case type::verbatim_string: return "verbatim_string";
    case type::number: return "number";
    case type::double_number: return "double_number";
    case type::boolean: return "boolean";
    case type::big_number: return "big_number";
    case type::null: return "null";
    case type::array: return "array";
    case type::map: return "map";
    case type::set: return "set";
    case type::push: return "push";
  }
  return "unknown";
}

namespace {

// Quoted, with every byte that is not printable ASCII (and the quote and
// backslash themselves) escaped, so binary payloads render unambiguously.
void append_quoted(std::string& out, std::string_view s) {
  static constexpr char hex[] = "0123456789abcdef";
  out += '"';
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u >= 0x20 && u < 0x7f) {
      out += c;
    } else {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 0xf];
    }
  }
  out += '"';
}

void append_elements(std::string& out, const std::vector<value>& elements, bool pairs);

void append_value(std::string& out, const value& v) {
  if (!v.attributes.empty()) {
    out += "attr{";
    append_elements(out, v.attributes, true);
    out += "} ";
  }
  switch (v.type) {
    // A simple string is the common case (status replies, map keys), so it
    // renders bare; every other type says what it is.
    case type::simple_string: append_quoted(out, v.str); break;
    case type::simple_error:
    case type::blob_string:
    case type::blob_error:
    case type::verbatim_string:
      out += v.type == type::simple_error  ? "error "
             : v.type == type::blob_string ? "bulk "
             : v.type == type::blob_error  ? "blob_error "
                                           : "verbatim ";
      append_quoted(out, v.str);
      break;
    case type::number:
      out += "int ";
      out += std::to_string(v.integer);
      break;
    case type::double_number: {
      out += "double ";
      if (std::isnan(v.dbl)) {
        out += "nan";
      } else if (std::isinf(v.dbl)) {
        out += v.dbl < 0 ? "-inf" : "inf";
      } else {
        char buf[32];
        auto r = std::to_chars(buf, buf + sizeof buf, v.dbl);  // shortest round-trip form
        out.append(buf, r.ptr);
      }
      break;
    }
    case type::boolean: out += v.integer != 0 ? "true" : "false"; break;
    case type::big_number:
      out += "bignum ";
      out += v.str;
      break;
    case type::null: out += "null"; break;
    case type::array:
    case type::map:
    case type::set:
    case type::push: {
      // Ordered aggregates in [], unordered ones in {}; a map's elements in pairs.
      const bool unordered = v.type == type::map || v.type == type::set;
      out += v.type == type::array  ? "["
             : v.type == type::push ? "push["
             : v.type == type::map  ? "map{"
                                    : "set{";
      append_elements(out, v.elements, v.type == type::map);
      out += unordered ? '}' : ']';
      break;
    }
  }
}

void append_elements(std::string& out, const std::vector<value>& elements, bool pairs) {
  for (std::size_t i = 0; i < elements.size(); ++i) {
    if (i != 0) out += (pairs && i % 2 == 1) ? ": " : ", ";
    append_value(out, elements[i]);
  }
}

}  // namespace

std::string debug_string(const value& v) {
  std::string out;
  append_value(out, v);
  return out;
}

}  // namespace thoonk::resp3
