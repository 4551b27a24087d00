// Incremental RESP3/RESP2 parser: see include/thoonk/resp3/parser.hpp.
//
// The parser works token by token. A token is either one line (type byte,
// text, CRLF) or, for the bulk types ($ ! =), a header line together with its
// payload and the payload's CRLF: a bulk header is only consumed once its
// whole payload has arrived, so the parser never needs a "half a bulk"
// state and everything it has consumed is final. Aggregates live on an
// explicit stack so that consumed elements are never looked at again.
//
// Decisions the header leaves open (all deterministic in the bytes seen, so
// the result never depends on how the stream was split into reads):
// * max_line_length counts the whole line including its type byte but not
//   the CRLF. As soon as max_line_length + 1 bytes of a line are present
//   without a CR, the line is rejected even though it is incomplete.
// * max_reply_bytes counts every wire byte of a top-level reply (attributes
//   included). A partially received line or bulk counts with the bytes it is
//   known to need (a bulk: header + length + 2 once the header is complete),
//   so an oversized reply fails before the caller buffers it.
// * "-1" means null for $ ! = * % ~ (RESP2 null bulk / null array and their
//   RESP3 relatives). A null push (>-1) or null attribute (|-1) would confuse
//   the connection's routing of pushes and is rejected as invalid_length.
// * The streaming markers (`$?`, `*?`, ... and the `;` / `.` type bytes) are
//   unsupported_streamed: Redis never sends them.
// * A reply starting with 0x15 or 0x16 is the first byte of a TLS record (an
//   alert, a handshake): a TLS port answering a plain client. It gets its own
//   error, tls_required, so the fix (rediss://) can be named.
// * An attribute map counts as one level of nesting while it is open.
//   Consecutive attribute maps before one value are merged.
// * max_reply_values counts every value of a top-level reply as its token
//   is read (an aggregate counts when its header is read, before its
//   elements), attribute entries included. max_reply_memory counts the
//   heap storage the reply's tree holds (element lists by capacity, strings
//   longer than the small-string buffer) on top of what the owner reports
//   as still held of earlier replies (set_held_memory). Both are checked
//   before the allocation they would pay for, so a hostile reply is refused
//   before it takes the memory, and they depend only on the bytes seen and
//   the held memory.
// * An element list is first reserved for its announced count, up to
//   max_reserve elements; then it doubles, but never past the announced
//   count, so a complete aggregate has no spare capacity.

#include <thoonk/error.hpp>
#include <thoonk/resp3/parser.hpp>

#include "detail/parse_int.hpp"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <utility>

namespace thoonk::resp3 {
namespace {

// Never reserve more than this many elements up front: the count on the wire
// is only trusted as far as the data that actually arrives.
constexpr std::size_t max_reserve = 1024;

// Heap bytes a std::string of `n` characters allocates: none while it fits
// the small-string buffer, else the characters and the terminator.
std::size_t string_heap_bytes(std::size_t n) noexcept {
  static const std::size_t inline_capacity = std::string().capacity();
  return n > inline_capacity ? n + 1 : 0;
}

enum class length_kind : std::uint8_t { count, null, streamed, invalid };

// A length or element count: "-1" (null), "?" (streamed) or plain decimal
// digits that fit an int64. No sign, no spaces, no empty string.
length_kind parse_length(std::string_view s, std::uint64_t& out) noexcept {
  if (s.empty()) return length_kind::invalid;
  if (s[0] == '-') return s == "-1" ? length_kind::null : length_kind::invalid;
  if (s.size() == 1 && s[0] == '?') return length_kind::streamed;
  // A leading '-' was ruled out above; parse_int rejects '+', spaces and
  // overflow.
  const auto v = thoonk::detail::parse_int<std::int64_t>(s);
  if (!v) return length_kind::invalid;
  out = static_cast<std::uint64_t>(*v);
  return length_kind::count;
}

// The error for a length that is neither a count nor an accepted null.
error length_error(length_kind k) noexcept {
  return k == length_kind::streamed ? error::unsupported_streamed : error::invalid_length;
}

bool parse_double(std::string_view s, double& out) noexcept {
  // RESP3 spells the non-finite values exactly like this.
  if (s == "inf") {
    out = std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "-inf") {
    out = -std::numeric_limits<double>::infinity();
    return true;
  }
  if (s == "nan") {
    out = std::numeric_limits<double>::quiet_NaN();
    return true;
  }
  if (s.empty()) return false;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + s.size(), out);
  // from_chars also accepts spellings such as "infinity" or "NaN"; only the
  // three exact forms above are RESP3, so anything non-finite here is wrong.
  return ec == std::errc{} && ptr == s.data() + s.size() && std::isfinite(out);
}

// Digits of any length (a big number is not limited to 64 bits, so
// parse_int, which reads only what fits, cannot check it): a check, not a
// parser; the value stays text.
bool is_big_number(std::string_view s) noexcept {
  if (!s.empty() && s[0] == '-') s.remove_prefix(1);
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

parser::parser(parser_limits limits) : limits_(limits) {}

void parser::reset() {
  stack_.clear();
  pending_attributes_.clear();
  reply_bytes_ = 0;
  reply_values_ = 0;
  reply_memory_ = 0;
  held_memory_ = 0;
  ready_memory_ = 0;
  result_ = value{};
  error_ = {};
  ready_ = false;
}

value parser::take() {
  assert(ready_ && "parser::take() called without a ready value");
  ready_ = false;
  return std::move(result_);
}

std::size_t parser::consume(std::string_view data, boost::system::error_code& ec) {
  if (error_) {
    ec = error_;
    return 0;
  }
  ec = {};
  std::size_t pos = 0;
  // A ready value must be taken before the next reply is started.
  while (!ready_ && pos < data.size()) {
    const std::size_t n = parse_token(data.substr(pos));
    if (error_) {
      ec = error_;
      return pos;
    }
    if (n == 0) break;  // incomplete token: the caller re-presents it with more bytes
    pos += n;
  }
  return pos;
}

std::size_t parser::parse_token(std::string_view d) {
  switch (d[0]) {
    case '+':
    case '-':
    case ':':
    case ',':
    case '#':
    case '(':
    case '_': return parse_simple(d);
    case '$': return parse_bulk(d, type::blob_string);
    case '!': return parse_bulk(d, type::blob_error);
    case '=': return parse_bulk(d, type::verbatim_string);
    case '*':
    case '%':
    case '~':
    case '>':
    case '|': return parse_aggregate(d);
    case ';':  // streamed string chunk
    case '.':  // end of a streamed aggregate
      return fail(error::unsupported_streamed);
    case '\x15':  // a TLS alert record: a TLS server refusing a plain client
    case '\x16':  // a TLS handshake record
      return fail(error::tls_required);
    default: return fail(error::invalid_type_byte);
  }
}

parser::line_status parser::find_line(std::string_view d, std::string_view& line,
                                      std::size_t& token_len) {
  // The CR may sit at index max_line_length at the latest; look no further,
  // so an endless line is rejected instead of being buffered forever.
  const bool window_full = limits_.max_line_length < d.size();
  const std::size_t window = window_full ? limits_.max_line_length + 1 : d.size();
  // reply_bytes_ <= max_reply_bytes always holds, so this cannot wrap.
  const std::size_t budget = limits_.max_reply_bytes - reply_bytes_;

  const void* cr = window > 1 ? std::memchr(d.data() + 1, '\r', window - 1) : nullptr;
  if (cr == nullptr) {
    // Every byte seen so far belongs to this reply, and the CRLF is still to come.
    if (window + 2 > budget) {
      error_ = error::reply_too_large;
      return line_status::failed;
    }
    if (window_full) {
      error_ = error::line_too_long;
      return line_status::failed;
    }
    return line_status::incomplete;
  }
  const std::size_t i = static_cast<std::size_t>(static_cast<const char*>(cr) - d.data());
  if (i + 2 > budget) {
    error_ = error::reply_too_large;
    return line_status::failed;
  }
  if (i + 1 == d.size()) return line_status::incomplete;  // the LF has not arrived yet
  if (d[i + 1] != '\n') {
    error_ = error::missing_crlf;
    return line_status::failed;
  }
  line = d.substr(1, i - 1);
  token_len = i + 2;
  return line_status::complete;
}

std::size_t parser::parse_simple(std::string_view d) {
  std::string_view line;
  std::size_t len = 0;
  if (find_line(d, line, len) != line_status::complete) return 0;
  const bool has_text = d[0] == '+' || d[0] == '-' || d[0] == '(';
  if (!admit_value(has_text ? string_heap_bytes(line.size()) : 0)) return 0;

  // Each type byte reads its value from the line, which may not fit it:
  // then the token fails with `misfit`.
  value v;
  bool fits = true;
  error misfit = error::missing_crlf;
  switch (d[0]) {
    case '+':
    case '-':
      // A bare LF inside the line means the sender does not frame with CRLF.
      fits = std::memchr(line.data(), '\n', line.size()) == nullptr;
      v.type = d[0] == '+' ? type::simple_string : type::simple_error;
      v.str.assign(line);
      break;
    case ':': {
      const auto n = thoonk::detail::parse_int<std::int64_t>(line);
      fits = n.has_value();
      if (fits) v.integer = *n;
      misfit = error::invalid_number;
      v.type = type::number;
      break;
    }
    case ',':
      fits = parse_double(line, v.dbl);
      misfit = error::invalid_double;
      v.type = type::double_number;
      break;
    case '#':
      fits = line == "t" || line == "f";
      misfit = error::invalid_boolean;
      v.integer = line == "t" ? 1 : 0;
      v.type = type::boolean;
      break;
    case '(':
      fits = is_big_number(line);
      misfit = error::invalid_number;
      v.type = type::big_number;
      v.str.assign(line);
      break;
    default:  // '_'
      // Null is exactly "_\r\n": anything before the CRLF is misframed.
      fits = line.empty();
      v.type = type::null;
      break;
  }
  if (!fits) return fail(misfit);
  return finish_token(std::move(v), len);
}

std::size_t parser::parse_bulk(std::string_view d, resp3::type t) {
  std::string_view line;
  std::size_t hdr = 0;
  if (find_line(d, line, hdr) != line_status::complete) return 0;

  std::uint64_t n = 0;
  const length_kind kind = parse_length(line, n);
  if (kind == length_kind::null) return admit_value(0) ? finish_token(value{}, hdr) : 0;
  if (kind != length_kind::count) return fail(length_error(kind));
  // Limits first, before waiting for (and so before the caller buffers) the payload.
  if (n > limits_.max_bulk_length) return fail(error::bulk_too_large);
  // A verbatim string holds at least its "fmt:" prefix.
  if (t == type::verbatim_string && n < 4) return fail(error::invalid_length);
  const std::size_t budget = limits_.max_reply_bytes - reply_bytes_;
  if (n > budget || budget - n < hdr + 2) return fail(error::reply_too_large);
  const std::size_t total = hdr + static_cast<std::size_t>(n) + 2;
  if (d.size() < total) return 0;
  if (d[total - 2] != '\r' || d[total - 1] != '\n') return fail(error::missing_crlf);
  std::string_view payload = d.substr(hdr, static_cast<std::size_t>(n));
  if (!admit_value(
          string_heap_bytes(t == type::verbatim_string ? payload.size() - 4 : payload.size())))
    return 0;

  value v;
  v.type = t;
  if (t == type::verbatim_string) {
    if (payload[3] != ':') return fail(error::invalid_length);
    payload.remove_prefix(4);
  }
  v.str.assign(payload);
  return finish_token(std::move(v), total);
}

std::size_t parser::parse_aggregate(std::string_view d) {
  std::string_view line;
  std::size_t len = 0;
  if (find_line(d, line, len) != line_status::complete) return 0;

  const char tb = d[0];
  std::uint64_t n = 0;
  const length_kind kind = parse_length(line, n);
  // No null push or attribute (see the top of this file).
  if (kind == length_kind::null && tb != '>' && tb != '|')
    return admit_value(0) ? finish_token(value{}, len) : 0;
  if (kind != length_kind::count) return fail(length_error(kind));
  // For maps and attributes the limit applies to pairs.
  if (n > limits_.max_aggregate_elements) return fail(error::too_many_elements);
  if (stack_.size() >= limits_.max_depth) return fail(error::nesting_too_deep);

  const bool pairs = tb == '%' || tb == '|';
  // n fits an int64, so doubling it cannot overflow 64 bits.
  const std::size_t count = static_cast<std::size_t>(pairs ? 2 * n : n);
  const std::size_t reserve = std::min(count, max_reserve);
  // An attribute map is no value of its own (its entries are); an
  // aggregate is, and its first storage is reserved now.
  std::size_t reserve_bytes = value_list::storage_bytes(reserve);
  if (tb == '|') {
    // Merged into the attributes already pending, which own some storage.
    const std::size_t want = count == 0 ? 0 : pending_attributes_.size() + reserve;
    const std::size_t have = pending_attributes_.capacity();
    reserve_bytes =
        want > have ? value_list::storage_bytes(want) - value_list::storage_bytes(have) : 0;
  }
  if (tb != '|' && !admit_value(0)) return 0;
  if (reserve_bytes > memory_left()) return fail(error::reply_memory_exceeded);
  reply_bytes_ += len;

  if (tb == '|') {
    if (count == 0) return len;  // nothing to attach
    frame f{value{}, count, true};
    f.v.type = type::map;
    // Attributes already pending (from an attribute map right before this
    // one) belong to the same value: start from them, so they get merged.
    f.v.elements = std::move(pending_attributes_);
    pending_attributes_.clear();
    f.v.elements.reserve(f.v.elements.size() + reserve);
    reply_memory_ += reserve_bytes;
    stack_.push_back(std::move(f));
    return len;
  }

  value v;
  switch (tb) {
    case '*': v.type = type::array; break;
    case '%': v.type = type::map; break;
    case '~': v.type = type::set; break;
    default: v.type = type::push; break;
  }
  attach_attributes(v);
  if (count == 0) return finish_value(std::move(v)) ? len : 0;
  v.elements.reserve(reserve);
  reply_memory_ += reserve_bytes;
  stack_.push_back(frame{std::move(v), count, false});
  return len;
}

void parser::attach_attributes(value& v) {
  if (!pending_attributes_.empty()) {
    v.attributes = std::move(pending_attributes_);
    pending_attributes_.clear();
  }
}

std::size_t parser::fail(boost::system::error_code ec) {
  error_ = ec;
  return 0;
}

std::size_t parser::finish_token(value&& v, std::size_t len) {
  // Count the bytes before finish_value(), which resets the count when this
  // completes a top-level reply.
  reply_bytes_ += len;
  attach_attributes(v);
  return finish_value(std::move(v)) ? len : 0;
}

std::size_t parser::memory_left() const noexcept {
  // Saturating: the owner may report more held memory than the limit.
  const std::size_t limit = limits_.max_reply_memory;
  if (held_memory_ >= limit) return 0;
  const std::size_t left = limit - held_memory_;
  return reply_memory_ >= left ? 0 : left - reply_memory_;
}

bool parser::admit_value(std::size_t string_bytes) {
  if (++reply_values_ > limits_.max_reply_values) {
    fail(error::reply_too_many_values);
    return false;
  }
  if (string_bytes > memory_left()) {
    fail(error::reply_memory_exceeded);
    return false;
  }
  reply_memory_ += string_bytes;
  return true;
}

bool parser::finish_value(value&& v) {
  for (;;) {
    if (stack_.empty()) {
      result_ = std::move(v);
      ready_ = true;
      ready_memory_ = reply_memory_;
      reply_bytes_ = 0;
      reply_values_ = 0;
      reply_memory_ = 0;
      return true;
    }
    frame& f = stack_.back();
    value_list& elements = f.v.elements;
    const std::size_t size = elements.size();
    if (size == elements.capacity()) {
      // Regrowing the element storage is the one allocation a small value
      // causes: refuse it rather than exceed max_reply_memory. The announced
      // count caps the growth, so a complete aggregate holds no spare slots.
      const std::size_t capacity = std::min(std::max<std::size_t>(2 * size, 1), size + f.remaining);
      const std::size_t more =
          value_list::storage_bytes(capacity) - value_list::storage_bytes(size);
      if (more > memory_left()) {
        fail(error::reply_memory_exceeded);
        return false;
      }
      elements.reserve(capacity);
      reply_memory_ += more;
    }
    elements.push_back(std::move(v));
    if (--f.remaining != 0) return true;
    if (f.attribute) {
      // A complete attribute map is not an element of anything: it waits
      // for the value it describes.
      pending_attributes_ = std::move(elements);
      stack_.pop_back();
      return true;
    }
    // The aggregate is complete: it is itself a finished value one level up.
    v = std::move(f.v);
    stack_.pop_back();
  }
}

bool is_parse_error(const boost::system::error_code& ec) noexcept {
  if (ec.category() != thoonk::category()) return false;
  const auto e = static_cast<error>(ec.value());
  return (e >= error::invalid_type_byte && e <= error::unsupported_streamed) ||
         e == error::reply_too_many_values || e == error::reply_memory_exceeded ||
         e == error::tls_required;
}

std::vector<value> parse_all(std::string_view data, boost::system::error_code& ec,
                             parser_limits limits) {
  ec = {};
  parser p(limits);
  std::vector<value> out;
  for (;;) {
    const std::size_t n = p.consume(data, ec);
    if (ec) return out;
    data.remove_prefix(n);
    if (p.ready()) {
      out.push_back(p.take());
      continue;
    }
    // Not ready: the data ran out. Bytes consumed since the last value, or
    // bytes left over, mean the buffer ended inside a reply.
    if (n > 0 || !data.empty()) ec = error::missing_crlf;
    return out;
  }
}

}  // namespace thoonk::resp3
