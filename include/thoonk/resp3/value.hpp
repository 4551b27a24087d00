// A parsed RESP3 (or RESP2) reply as a tree of values.
//
// Layout: a reply of many small values (a long array of nulls, numbers or
// short strings) is mostly nodes, so a node is kept small: the text is a
// std::string (short text needs no allocation, and long text moves out of a
// reply without a copy), a number and a double share one slot, and the
// elements and the attribute map are each one pointer to storage that exists
// only when they are not empty (value_list). On x86-64 with libstdc++ a node
// is 64 bytes (sizeof(std::string) + 32).
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <new>
#include <string>
#include <string_view>
#include <thoonk/export.hpp>
#include <utility>
#include <vector>

namespace thoonk::resp3 {

/// The wire type of a value. RESP2 replies map onto the same types
/// (`$-1` and `*-1` become `null`).
enum class type : std::uint8_t {
  simple_string,    ///< `+OK`
  simple_error,     ///< `-ERR ...`
  blob_string,      ///< `$3\r\nabc`
  blob_error,       ///< `!21\r\nSYNTAX invalid syntax`
  verbatim_string,  ///< `=15\r\ntxt:Some string` (str holds the text after "fmt:")
  number,           ///< `:42`
  double_number,    ///< `,3.14` (also inf, -inf, nan)
  boolean,          ///< `#t` / `#f`
  big_number,       ///< `(3492890328409238509324850943850943825024385` (digits kept in str)
  null,             ///< `_`, `$-1`, `*-1`
  array,            ///< `*N`
  map,              ///< `%N`: elements hold key0, value0, key1, value1, ...
  set,              ///< `~N`
  push,             ///< `>N`: out-of-band data (pub/sub messages, invalidations)
};

/// Human-readable name of a type ("blob_string", ...), for messages and tests.
THOONK_API std::string_view to_string(type t) noexcept;

struct value;

/// The elements of an aggregate, or an attribute map: a contiguous sequence
/// of values with the interface of std::vector<value> that readers of a
/// reply use (size, empty, [], at, front, back, iterators, data) and the
/// one that builds it (push_back, emplace_back, reserve, clear, pop_back).
/// It is one pointer, null while the list has no storage, so the many
/// values that have no elements pay 8 bytes for it; the size and capacity
/// sit in front of the elements, in the same allocation. A std::vector<value>
/// (or a braced list) converts to it, moving the values.
class THOONK_API value_list {
 public:
  /// \name Member types, as std::vector<value>
  ///@{

  /// The member types of a standard sequence container.
  using value_type = value;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using reference = value&;
  using const_reference = const value&;
  using pointer = value*;
  using const_pointer = const value*;
  using iterator = value*;
  using const_iterator = const value*;
  using reverse_iterator = std::reverse_iterator<iterator>;
  using const_reverse_iterator = std::reverse_iterator<const_iterator>;
  ///@}

  /// An empty list; no allocation.
  value_list() noexcept = default;
  /// \name Construction, copy and move, as std::vector<value>
  ///@{

  /// As std::vector<value>'s; a moved-from list is empty.
  value_list(std::initializer_list<value> init);
  value_list(std::vector<value> v);  // NOLINT(google-explicit-constructor): a vector is a list
  value_list(const value_list& other);
  value_list(value_list&& other) noexcept : h_(other.h_) { other.h_ = nullptr; }
  value_list& operator=(const value_list& other);
  value_list& operator=(value_list&& other) noexcept;
  ///@}
  ~value_list();

  /// \name Element access and iteration, as std::vector<value>
  ///@{

  /// As std::vector<value>'s.
  std::size_t size() const noexcept { return h_ != nullptr ? h_->size : 0; }
  bool empty() const noexcept { return size() == 0; }
  std::size_t capacity() const noexcept { return h_ != nullptr ? h_->capacity : 0; }

  value* data() noexcept;
  const value* data() const noexcept;
  iterator begin() noexcept { return data(); }
  iterator end() noexcept;
  const_iterator begin() const noexcept { return data(); }
  const_iterator end() const noexcept;
  const_iterator cbegin() const noexcept { return begin(); }
  const_iterator cend() const noexcept { return end(); }
  reverse_iterator rbegin() noexcept;
  reverse_iterator rend() noexcept;
  const_reverse_iterator rbegin() const noexcept;
  const_reverse_iterator rend() const noexcept;

  value& operator[](std::size_t i) noexcept;
  const value& operator[](std::size_t i) const noexcept;
  /// As std::vector<value>'s: throws std::out_of_range past the end.
  value& at(std::size_t i);
  /// As std::vector<value>'s: throws std::out_of_range past the end.
  const value& at(std::size_t i) const;
  value& front() noexcept;
  const value& front() const noexcept;
  value& back() noexcept;
  const value& back() const noexcept;
  ///@}

  /// Makes room for `n` elements in all (never shrinks).
  void reserve(std::size_t n);
  /// \name Modifiers, as std::vector<value>
  ///@{

  /// As std::vector<value>'s.
  void push_back(const value& v);
  void push_back(value&& v);
  template <class... Args>
  value& emplace_back(Args&&... args);
  void pop_back() noexcept;
  ///@}
  /// Destroys the elements and keeps the storage.
  void clear() noexcept;
  /// Exchanges the two lists' storage; no element moves.
  void swap(value_list& other) noexcept {
    header* h = h_;
    h_ = other.h_;
    other.h_ = h;
  }

  friend bool operator==(const value_list& a, const value_list& b);

  /// Heap bytes the storage for `capacity` elements takes (0 for none): what
  /// parser_limits::max_reply_memory counts for a list.
  static std::size_t storage_bytes(std::size_t capacity) noexcept;

 private:
  struct alignas(alignof(std::max_align_t)) header {
    std::size_t size;
    std::size_t capacity;
  };

  // Moves the elements into new storage of exactly `capacity` (>= size()).
  void reallocate(std::size_t capacity);
  // The capacity push_back grows to from a full list.
  std::size_t next_capacity() const noexcept;

  header* h_ = nullptr;
};

/// One node of a reply. Plain data: copyable, movable, comparable.
///
/// `integer` and `dbl` share their storage: read the one the type names
/// (`dbl` for double_number, `integer` for number and boolean); both read 0
/// on a value that has neither.
struct THOONK_API value {
  resp3::type type = resp3::type::null;  ///< the RESP3 type of the node
  std::string str;                       ///< strings, errors, verbatim text, big number digits
  union {
    std::int64_t integer = 0;  ///< number; boolean as 0/1
    double dbl;                ///< double_number
  };
  value_list elements;    ///< array, set, push; map as k0,v0,k1,v1,...
  value_list attributes;  ///< an attribute map (`|N`) that preceded this value, flattened k,v

  /// A null reply (RESP3 `_`, RESP2 nil).
  bool is_null() const noexcept { return type == resp3::type::null; }
  bool is_error() const noexcept {  ///< an error reply (simple or blob); `str` holds its text
    return type == resp3::type::simple_error || type == resp3::type::blob_error;
  }
  bool is_string() const noexcept {  ///< a simple, blob or verbatim string; `str` holds it
    return type == resp3::type::simple_string || type == resp3::type::blob_string ||
           type == resp3::type::verbatim_string;
  }
  /// An array, map, set, attribute or push; `children` holds its elements.
  bool is_aggregate() const noexcept {
    return type == resp3::type::array || type == resp3::type::map || type == resp3::type::set ||
           type == resp3::type::push;
  }

  /// Same type, text, number (double_number: the doubles, with ==),
  /// elements and attributes.
  friend bool operator==(const value& a, const value& b);
};

static_assert(sizeof(value) <= sizeof(std::string) + 32, "a reply node stays small");

/// A compact, unambiguous rendering for diagnostics and test failure messages,
/// e.g. `[bulk "a", int 1, null]`.
THOONK_API std::string debug_string(const value& v);

// ---- value_list members that need the complete value -------------------------

inline value* value_list::data() noexcept {
  return h_ != nullptr ? reinterpret_cast<value*>(h_ + 1) : nullptr;
}
inline const value* value_list::data() const noexcept {
  return h_ != nullptr ? reinterpret_cast<const value*>(h_ + 1) : nullptr;
}

inline value_list::iterator value_list::end() noexcept { return data() + size(); }
inline value_list::const_iterator value_list::end() const noexcept { return data() + size(); }
// Defined here, not in the class: iterator concepts checked while value is
// incomplete would stay unsatisfied.
inline value_list::reverse_iterator value_list::rbegin() noexcept {
  return reverse_iterator(end());
}
inline value_list::reverse_iterator value_list::rend() noexcept {
  return reverse_iterator(begin());
}
inline value_list::const_reverse_iterator value_list::rbegin() const noexcept {
  return const_reverse_iterator(end());
}
inline value_list::const_reverse_iterator value_list::rend() const noexcept {
  return const_reverse_iterator(begin());
}
inline value& value_list::operator[](std::size_t i) noexcept { return data()[i]; }
inline const value& value_list::operator[](std::size_t i) const noexcept { return data()[i]; }
inline value& value_list::front() noexcept { return data()[0]; }
inline const value& value_list::front() const noexcept { return data()[0]; }
inline value& value_list::back() noexcept { return data()[size() - 1]; }
inline const value& value_list::back() const noexcept { return data()[size() - 1]; }

inline std::size_t value_list::storage_bytes(std::size_t capacity) noexcept {
  return capacity == 0 ? 0 : sizeof(header) + capacity * sizeof(value);
}

inline std::size_t value_list::next_capacity() const noexcept {
  const std::size_t c = capacity();
  return c == 0 ? 4 : 2 * c;
}

inline void value_list::push_back(value&& v) { emplace_back(std::move(v)); }
inline void value_list::push_back(const value& v) { emplace_back(v); }

template <class... Args>
value& value_list::emplace_back(Args&&... args) {
  if (size() == capacity()) {
    // Build the element first: `args` may refer into this list's storage.
    value v(std::forward<Args>(args)...);
    reallocate(next_capacity());
    value* slot = ::new (static_cast<void*>(data() + h_->size)) value(std::move(v));
    ++h_->size;
    return *slot;
  }
  value* slot = ::new (static_cast<void*>(data() + h_->size)) value(std::forward<Args>(args)...);
  ++h_->size;
  return *slot;
}

inline void value_list::pop_back() noexcept {
  data()[h_->size - 1].~value();
  --h_->size;
}

}  // namespace thoonk::resp3
