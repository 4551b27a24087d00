// Memory of parsed replies: the heap bytes a resp3::value tree takes per
// element, counted by replacing the global operator new / delete (every
// allocation's usable size, so malloc's rounding counts, its headers not),
// and the parser's speed on the reply shape the job queue reads most.
//
//   reply_memory [--elements N] [--replies R] [--speed-replies S]
//
// No server: it parses replies built in memory, fed to the parser in 64 KiB
// chunks as the connection reads them. Prints one JSON document.
#include <thoonk/resp3/parser.hpp>
#include <thoonk/resp3/value.hpp>

#include <malloc.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <string>
#include <string_view>
#include <vector>

namespace {

std::atomic<std::size_t> live{0};
std::atomic<std::size_t> peak{0};
std::atomic<std::size_t> allocations{0};
// Off while the speed is measured (switched when nothing counted is alive).
bool counting = true;

void* counted_alloc(std::size_t n) {
  void* p = std::malloc(n == 0 ? 1 : n);
  if (p == nullptr) throw std::bad_alloc();
  if (!counting) return p;
  const std::size_t now = live += malloc_usable_size(p);
  ++allocations;
  std::size_t seen = peak.load(std::memory_order_relaxed);
  while (now > seen && !peak.compare_exchange_weak(seen, now)) {
  }
  return p;
}

void counted_free(void* p) noexcept {
  if (p == nullptr) return;
  if (counting) live -= malloc_usable_size(p);
  std::free(p);
}

}  // namespace

void* operator new(std::size_t n) { return counted_alloc(n); }
void* operator new[](std::size_t n) { return counted_alloc(n); }
void operator delete(void* p) noexcept { counted_free(p); }
void operator delete[](void* p) noexcept { counted_free(p); }
void operator delete(void* p, std::size_t) noexcept { counted_free(p); }
void operator delete[](void* p, std::size_t) noexcept { counted_free(p); }

namespace {

namespace r = thoonk::resp3;

constexpr std::size_t chunk = 64 * 1024;

// `count` replies of `n` copies of `element` each.
std::string replies_of(std::size_t count, std::size_t n, std::string_view element) {
  std::string one = "*" + std::to_string(n) + "\r\n";
  one.reserve(one.size() + n * element.size());
  for (std::size_t i = 0; i < n; ++i) one += element;
  std::string wire;
  wire.reserve(count * one.size());
  for (std::size_t i = 0; i < count; ++i) wire += one;
  return wire;
}

// Parses `wire` in chunks and keeps every value, as a request of several
// replies holds them until its last one. Returns false on a parse error
// (the memory held until then stays counted in the peak).
bool parse_keep(std::string_view wire, r::parser_limits limits, std::vector<r::value>& out) {
  r::parser p(limits);
  boost::system::error_code ec;
  std::string buf;
  for (std::size_t pos = 0; pos < wire.size(); pos += chunk) {
    buf.append(wire.substr(pos, chunk));
    for (;;) {
      buf.erase(0, p.consume(buf, ec));
      if (ec) return false;
      if (!p.ready()) break;
      out.push_back(p.take());
    }
  }
  return buf.empty();
}

struct memory_case {
  const char* name;
  std::string element;  // one element on the wire
  std::size_t replies;
  std::size_t elements;         // per reply
  bool default_limits = false;  // else limits that let every case through
};

void measure(const memory_case& c, bool first) {
  const std::string wire = replies_of(c.replies, c.elements, c.element);
  r::parser_limits limits;
  if (!c.default_limits) {
    limits.max_reply_values = c.elements + 1;
    limits.max_aggregate_elements = c.elements;
    limits.max_reply_memory = std::size_t(64) << 30;
  }
  std::vector<r::value> kept;
  kept.reserve(c.replies);
  const std::size_t base = live.load();
  peak = base;
  const std::size_t allocs_before = allocations.load();
  const bool ok = parse_keep(wire, limits, kept);
  const std::size_t held = live.load() - base;
  const std::size_t top = peak.load() - base;
  const std::size_t allocs = allocations.load() - allocs_before;
  const double total = static_cast<double>(c.replies * c.elements);
  std::printf(
      "%s    {\"case\": \"%s\", \"replies\": %zu, \"elements_per_reply\": %zu, "
      "\"wire_bytes\": %zu, \"parsed\": %s, \"held_bytes\": %zu, \"peak_bytes\": %zu, "
      "\"allocations\": %zu, \"held_bytes_per_element\": %.1f, "
      "\"peak_bytes_per_element\": %.1f, \"held_per_wire_byte\": %.1f}",
      first ? "" : ",\n", c.name, c.replies, c.elements, wire.size(), ok ? "true" : "false", held,
      top, allocs, static_cast<double>(held) / total, static_cast<double>(top) / total,
      static_cast<double>(held) / static_cast<double>(wire.size()));
}

// Nanoseconds per reply for `count` replies of 14 short bulk strings (the
// shape of a claimed job's fields), parsed and destroyed, best of `rounds`.
double parse_speed(std::size_t count, int rounds) {
  const std::string wire = replies_of(count, 14, "$11\r\nfield-value\r\n");
  double best = 1e300;
  for (int round = 0; round < rounds; ++round) {
    r::parser p;
    boost::system::error_code ec;
    std::size_t got = 0;
    const auto t0 = std::chrono::steady_clock::now();
    std::string_view rest(wire);
    while (!rest.empty()) {
      rest.remove_prefix(p.consume(rest, ec));
      if (ec || !p.ready()) return -1;
      r::value v = p.take();
      got += v.elements.size() == 14;
    }
    const auto t1 = std::chrono::steady_clock::now();
    if (got != count) return -1;
    best = std::min(best, std::chrono::duration<double, std::nano>(t1 - t0).count() /
                              static_cast<double>(count));
  }
  return best;
}

std::size_t arg_value(int argc, char** argv, std::string_view name, std::size_t fallback) {
  for (int i = 1; i + 1 < argc; ++i)
    if (argv[i] == name) return static_cast<std::size_t>(std::strtoull(argv[i + 1], nullptr, 10));
  return fallback;
}

}  // namespace

int main(int argc, char** argv) {
  const std::size_t n = arg_value(argc, argv, "--elements", 1'000'000);
  const std::size_t replies = arg_value(argc, argv, "--replies", 4);
  const std::size_t speed_replies = arg_value(argc, argv, "--speed-replies", 200'000);
  std::printf("{\n  \"sizeof_value\": %zu,\n  \"memory\": [\n", sizeof(r::value));
  const memory_case cases[] = {
      {"nulls", "_\r\n", 1, n},
      {"short bulk strings (10 bytes)", "$10\r\n0123456789\r\n", 1, n},
      {"integers", ":12345\r\n", 1, n},
      {"nulls, several replies held", "_\r\n", replies, n},
      {"4,000,000 nulls under the default limits (refused)", "_\r\n", 1, 4 * n, true},
  };
  bool first = true;
  for (const auto& c : cases) {
    measure(c, first);
    first = false;
  }
  counting = false;
  std::printf("\n  ],\n  \"parse_ns_per_reply_of_14_bulk_strings\": %.1f\n}\n",
              parse_speed(speed_replies, 5));
  return 0;
}
