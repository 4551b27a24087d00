#include <thoonk/resp3/value.hpp>

#include <charconv>
#include <cmath>
#include <new>
#include <stdexcept>
#include <type_traits>

namespace thoonk::resp3 {

// ---- value_list ----------------------------------------------------------------

value_list::value_list(std::initializer_list<value> init) {
  reserve(init.size());
  for (const value& v : init) emplace_back(v);
}

value_list::value_list(std::vector<value> v) {
  reserve(v.size());
  for (value& e : v) emplace_back(std::move(e));
}

value_list::value_list(const value_list& other) {
  reserve(other.size());
  for (const value& v : other) emplace_back(v);
}

value_list& value_list::operator=(const value_list& other) {
  if (this != &other) {
    value_list copy(other);
    swap(copy);
  }
  return *this;
}

value_list& value_list::operator=(value_list&& other) noexcept {
  if (this != &other) {
    value_list old(std::move(*this));
    swap(other);
  }
  return *this;
}

value_list::~value_list() {
  if (h_ == nullptr) return;
  clear();
  ::operator delete(static_cast<void*>(h_));
}

value& value_list::at(std::size_t i) {
  if (i >= size()) throw std::out_of_range("resp3::value_list::at: index out of range");
  return data()[i];
}

const value& value_list::at(std::size_t i) const {
  if (i >= size()) throw std::out_of_range("resp3::value_list::at: index out of range");
  return data()[i];
}

void value_list::reserve(std::size_t n) {
  if (n > capacity()) reallocate(n);
}

void value_list::clear() noexcept {
  if (h_ == nullptr) return;
  value* d = data();
  for (std::size_t i = h_->size; i-- > 0;) d[i].~value();
  h_->size = 0;
}

void value_list::reallocate(std::size_t capacity) {
  if (capacity > (std::size_t(-1) - sizeof(header)) / sizeof(value)) throw std::bad_alloc();
  auto* h = static_cast<header*>(::operator new(storage_bytes(capacity)));
  const std::size_t n = size();
  h->size = n;
  h->capacity = capacity;
  // A value's move never throws (std::string's and value_list's don't).
  static_assert(std::is_nothrow_move_constructible_v<value>);
  value* from = data();
  value* to = reinterpret_cast<value*>(h + 1);
  for (std::size_t i = 0; i < n; ++i) {
    ::new (static_cast<void*>(to + i)) value(std::move(from[i]));
    from[i].~value();
  }
  if (h_ != nullptr) ::operator delete(static_cast<void*>(h_));
  h_ = h;
}

bool operator==(const value_list& a, const value_list& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i])) return false;
  return true;
}

bool operator==(const value& a, const value& b) {
  if (a.type != b.type || a.str != b.str) return false;
  if (a.type == type::double_number ? !(a.dbl == b.dbl) : a.integer != b.integer) return false;
  return a.elements == b.elements && a.attributes == b.attributes;
}

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

void append_elements(std::string& out, const value_list& elements, bool pairs);

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

void append_elements(std::string& out, const value_list& elements, bool pairs) {
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
