// Fuzz target: the RESP3 parser. The same bytes fed whole, split at
// pseudo-random offsets (drawn from the input itself, so a finding
// replays), and one byte at a time must give the same values, the same
// error and the same count of consumed bytes; parse_all must agree too.
// A disagreement or a sanitizer report is a finding.
//
// Input: one control byte, then the wire bytes. Control bit 0 picks small
// limits, so the limit checks (and their errors) are reached by short inputs.
// Control bit 1 feeds the replies as one request's, as a connection does:
// each value taken keeps its memory estimate held (set_held_memory) while
// the next ones are parsed, starting from (control >> 2) * 16 bytes; no
// value may take more than the limit leaves.
#include <thoonk/error.hpp>
#include <thoonk/resp3/parser.hpp>
#include <thoonk/resp3/value.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace {

namespace r = thoonk::resp3;
using boost::system::error_code;

// What one way of feeding produced, as one comparable string.
std::string feed(std::string_view input, const std::vector<std::size_t>& cuts,
                 const r::parser_limits& limits, bool hold, std::size_t held) {
  r::parser p(limits);
  std::string out, buf;
  error_code ec;
  std::size_t fed = 0, consumed = 0;
  bool mid_reply = false;
  auto deliver = [&](std::size_t upto) {
    buf.append(input.substr(fed, upto - fed));
    fed = upto;
    for (;;) {
      if (hold) p.set_held_memory(held);
      const std::size_t n = p.consume(buf, ec);
      if (n > buf.size()) std::abort();  // consumed more than it was given
      consumed += n;
      buf.erase(0, n);
      if (ec) return false;
      if (n > 0) mid_reply = true;
      if (!p.ready()) return true;
      if (hold) {
        // The estimate never exceeds what the limit left for this value.
        if (held > limits.max_reply_memory && p.ready_memory() > 0) std::abort();
        if (held <= limits.max_reply_memory && p.ready_memory() > limits.max_reply_memory - held)
          std::abort();
        held += p.ready_memory();
      }
      out += r::debug_string(p.take()) + "|";
      mid_reply = false;
    }
  };
  bool ok = true;
  for (std::size_t c : cuts)
    if (ok) ok = deliver(c);
  if (ok) ok = deliver(input.size());
  if (ok && (mid_reply || !buf.empty())) ec = thoonk::error::missing_crlf;
  return out + " ec=" + std::to_string(ec.value()) + " consumed=" + std::to_string(consumed);
}

r::parser_limits small_limits() {
  r::parser_limits l;
  l.max_bulk_length = 64;
  l.max_aggregate_elements = 16;
  l.max_depth = 4;
  l.max_reply_bytes = 256;
  l.max_line_length = 32;
  l.max_reply_values = 24;
  l.max_reply_memory = r::value_list::storage_bytes(16) + 128;
  return l;
}

void disagree(const char* how, const std::string& a, const std::string& b) {
  std::fprintf(stderr, "parser outcomes differ (%s):\n  whole: %s\n  other: %s\n", how, a.c_str(),
               b.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::uint8_t control = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data + 1), size - 1);
  const r::parser_limits limits = (control & 1) ? small_limits() : r::parser_limits{};
  const bool hold = (control & 2) != 0;
  const std::size_t held = static_cast<std::size_t>(control >> 2) * 16;

  const std::string whole = feed(input, {}, limits, hold, held);

  // Up to 8 cuts at offsets drawn from a generator seeded by the input.
  std::seed_seq seed(data, data + size);
  std::mt19937 rng(seed);
  if (input.size() > 1) {
    std::set<std::size_t> cuts;
    const std::size_t n = 1 + rng() % 8;
    for (std::size_t i = 0; i < n; ++i) cuts.insert(1 + rng() % (input.size() - 1));
    const std::string split = feed(input, {cuts.begin(), cuts.end()}, limits, hold, held);
    if (split != whole) disagree("random split", whole, split);
  }
  if (input.size() <= 1024) {
    std::vector<std::size_t> bytes;
    for (std::size_t k = 1; k < input.size(); ++k) bytes.push_back(k);
    const std::string one_by_one = feed(input, bytes, limits, hold, held);
    if (one_by_one != whole) disagree("byte by byte", whole, one_by_one);
  }

  // parse_all sees the same values and error (it reports no consumed count)
  // when nothing is held.
  if (hold) return 0;
  error_code ec;
  std::string all;
  for (const auto& v : r::parse_all(input, ec, limits)) all += r::debug_string(v) + "|";
  all += " ec=" + std::to_string(ec.value());
  const std::string whole_prefix = whole.substr(0, whole.rfind(" consumed="));
  if (all != whole_prefix) disagree("parse_all", whole_prefix, all);
  return 0;
}
