// The machine floor of the peer comparison (benchmarks/peers/): one PUBLISH
// hop, publisher -> redis-server -> subscriber, between two processes, with
// nothing but POSIX sockets and a hand-written RESP reader, so that the report
// can show how much of a latency figure the machine itself takes. No Boost,
// no library; built by run.sh with one compiler call:
//
//   g++ -O2 -std=c++17 -o hop_floor benchmarks/peers/hop_floor.cpp
//
//   hop_floor subscribe --url redis://HOST:PORT --messages M [--timeout S]
//             [--channel NAME]
//             SUBSCRIBEs, prints {"ready":true} once the server confirmed,
//             then reads with blocking read() until M messages arrived or
//             S seconds passed; prints one JSON line as the other roles'
//             subscribe result: latency = receive time - the payload's stamp
//   hop_floor publish --url redis://HOST:PORT --messages M --rate R
//             [--timeout S] [--channel NAME]
//             PUBLISHes M messages at R per second, open loop (an absolute
//             schedule; replies are read when they are there, never waited
//             for before the next send), each payload being CLOCK_MONOTONIC
//             nanoseconds as decimal text, taken right before the write;
//             prints {"sent":..,"acked":..,"rate_achieved":..,...}
//
// The channel defaults to "peers.floor", the timeout to 120 s. The latency
// summary drops the first 10% of the samples and takes percentiles as
// benchmarks/support/bench_support.cpp does (nearest rank of p * (n - 1)).
// Any error (bad option or URL, connect refused, a server error reply, the
// server closing the connection) is one line on stderr and exit status 1; a
// timeout is a result with "complete": false, as in the other roles.
#include "../support/cli_options.hpp"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

namespace {

// ---------------------------------------------------------------------------
// Clock and CPU time.

/// CLOCK_MONOTONIC in nanoseconds: the clock of std::chrono::steady_clock on
/// Linux and of Node's process.hrtime.bigint(), comparable across processes.
std::int64_t now_ns() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<std::int64_t>(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

/// Sleeps until CLOCK_MONOTONIC reads `t_ns` (returns at once if it has).
void sleep_until_ns(std::int64_t t_ns) {
  timespec ts{};
  ts.tv_sec = static_cast<time_t>(t_ns / 1000000000);
  ts.tv_nsec = static_cast<long>(t_ns % 1000000000);
  // clock_nanosleep returns the error number instead of setting errno.
  while (const int rc = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, nullptr)) {
    if (rc != EINTR) throw std::system_error(rc, std::generic_category(), "clock_nanosleep");
  }
}

/// User + system CPU seconds of this process.
double own_cpu() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  auto secs = [](const timeval& tv) {
    return static_cast<double>(tv.tv_sec) + static_cast<double>(tv.tv_usec) / 1e6;
  };
  return secs(ru.ru_utime) + secs(ru.ru_stime);
}

[[noreturn]] void fail_errno(const std::string& what) {
  throw std::system_error(errno, std::generic_category(), what);
}

// ---------------------------------------------------------------------------
// Command line.

struct options {
  std::string role;
  std::string url;
  std::string channel = "peers.floor";
  long messages = 0;
  double rate = 0;
  long timeout_s = 120;
};

double to_double(const std::string& opt, const std::string& v) {
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || errno != 0 || end != v.c_str() + v.size() || !std::isfinite(x)) {
    throw std::invalid_argument(opt + ": not a number: " + v);
  }
  return x;
}

long to_long(const std::string& opt, const std::string& v) {
  long x = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || end != v.data() + v.size()) {
    throw std::invalid_argument(opt + ": not an integer: " + v);
  }
  return x;
}

options parse_args(int argc, char** argv) {
  if (argc < 2) {
    throw std::invalid_argument(
        "usage: hop_floor subscribe|publish --url redis://HOST:PORT --messages M "
        "[--rate R] [--timeout S] [--channel NAME]");
  }
  options o;
  o.role = argv[1];
  if (o.role != "subscribe" && o.role != "publish") {
    throw std::invalid_argument("unknown role " + o.role + " (subscribe or publish)");
  }
  thoonk::bench::for_each_option(argc, argv, 2, [&](const std::string& a, auto value) {
    if (a == "--url") o.url = value();
    else if (a == "--channel") o.channel = value();
    else if (a == "--messages") o.messages = to_long(a, value());
    else if (a == "--rate") o.rate = to_double(a, value());
    else if (a == "--timeout") o.timeout_s = to_long(a, value());
    else throw std::invalid_argument("unknown option " + a);
  });
  if (o.url.empty()) throw std::invalid_argument("--url is required");
  if (o.messages <= 0) throw std::invalid_argument("--messages must be at least 1");
  if (o.timeout_s <= 0) throw std::invalid_argument("--timeout must be at least 1");
  if (o.role == "publish" && o.rate <= 0) throw std::invalid_argument("publish needs --rate > 0");
  if (o.channel.empty()) throw std::invalid_argument("--channel must not be empty");
  return o;
}

struct endpoint {
  std::string host;
  std::string port = "6379";
};

/// redis://HOST[:PORT][/DB] (HOST may be [IPv6]). Credentials and TLS are
/// refused: the harness's server has neither. The database number is
/// accepted and ignored, since pub/sub channels do not belong to a database.
endpoint parse_url(const std::string& url) {
  constexpr std::string_view scheme = "redis://";
  if (url.compare(0, scheme.size(), scheme) != 0) {
    throw std::invalid_argument("--url: expected redis://HOST:PORT, got " + url);
  }
  std::string_view rest(url);
  rest.remove_prefix(scheme.size());
  const auto slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  if (slash != std::string_view::npos) {
    const auto db = rest.substr(slash + 1);
    if (!db.empty() && db.find_first_not_of("0123456789") != std::string_view::npos) {
      throw std::invalid_argument("--url: bad database number in " + url);
    }
  }
  if (authority.find('@') != std::string_view::npos) {
    throw std::invalid_argument("--url: credentials are not supported by hop_floor");
  }
  endpoint e;
  std::string_view port;
  if (!authority.empty() && authority.front() == '[') {
    const auto close = authority.find(']');
    if (close == std::string_view::npos) throw std::invalid_argument("--url: unclosed [ in " + url);
    e.host = std::string(authority.substr(1, close - 1));
    const auto after = authority.substr(close + 1);
    if (!after.empty()) {
      if (after.front() != ':') throw std::invalid_argument("--url: bad host in " + url);
      port = after.substr(1);
    }
  } else {
    const auto colon = authority.rfind(':');
    e.host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = authority.substr(colon + 1);
  }
  if (e.host.empty()) throw std::invalid_argument("--url: no host in " + url);
  if (!port.empty()) {
    if (port.find_first_not_of("0123456789") != std::string_view::npos || port.size() > 5 ||
        std::stol(std::string(port)) < 1 || std::stol(std::string(port)) > 65535) {
      throw std::invalid_argument("--url: bad port in " + url);
    }
    e.port = std::string(port);
  }
  return e;
}

// ---------------------------------------------------------------------------
// RESP (the subset a SUBSCRIBE/PUBLISH session sees, RESP2 and RESP3 pushes).

struct resp_value {
  char type = 0;  // '+' simple, '-' error, ':' integer, '$' bulk, '*' array, '>' push
  bool null = false;
  long long integer = 0;
  std::string text;               // simple string, error or bulk string
  std::vector<resp_value> items;  // array or push
};

/// An incremental RESP reader: feed() it the bytes as read() returns them,
/// next() hands out each complete reply. A reply split across reads stays
/// in the buffer and is parsed again from its first byte once more bytes
/// came (replies here are about 100 bytes, so that costs nothing); several
/// replies in one read come out one by one.
class resp_reader {
 public:
  void feed(const char* p, std::size_t n) {
    // Drop what was consumed before appending, so the buffer stays small.
    buf_.erase(0, used_);
    used_ = 0;
    buf_.append(p, n);
  }

  std::optional<resp_value> next() {
    std::size_t pos = used_;
    resp_value v;
    if (!parse(pos, v, 0)) return std::nullopt;
    used_ = pos;
    return v;
  }

 private:
  static constexpr int max_depth = 8;
  static constexpr long long max_bulk = 64LL << 20;  // sanity bounds: no reply here is near them
  static constexpr long long max_items = 1LL << 20;

  // The line starting at `pos` (without its CRLF); false when incomplete.
  bool line(std::size_t& pos, std::string_view& out) const {
    const auto end = buf_.find("\r\n", pos);
    if (end == std::string::npos) return false;
    out = std::string_view(buf_).substr(pos, end - pos);
    pos = end + 2;
    return true;
  }

  static long long number(std::string_view s) {
    long long v = 0;
    const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || end != s.data() + s.size() || s.empty()) {
      throw std::runtime_error("malformed RESP number: " + std::string(s));
    }
    return v;
  }

  // The length in a bulk string's or an array's header, at most `max`
  // (`what` names it in the error); nullopt for -1, RESP2's null.
  static std::optional<std::size_t> length(std::string_view head, long long max, const char* what) {
    const long long n = number(head);
    if (n < 0) return std::nullopt;
    if (n > max) throw std::runtime_error(std::string("RESP ") + what + " too long");
    return static_cast<std::size_t>(n);
  }

  // One value at `pos` into `out`, advancing `pos`; false (with `pos` of no
  // meaning) when the buffer ends first; throws on a malformed reply.
  bool parse(std::size_t& pos, resp_value& out, int depth) const {
    if (pos >= buf_.size()) return false;
    if (depth > max_depth) throw std::runtime_error("RESP reply nested too deeply");
    out.type = buf_[pos];
    std::string_view head;
    ++pos;
    if (!line(pos, head)) return false;
    switch (out.type) {
      case '+':
      case '-': out.text = std::string(head); return true;
      case ':': out.integer = number(head); return true;
      case '$': {
        const auto n = length(head, max_bulk, "bulk string");
        if (!n) {
          out.null = true;
          return true;
        }
        if (buf_.size() - pos < *n + 2) return false;
        if (buf_.compare(pos + *n, 2, "\r\n") != 0) {
          throw std::runtime_error("RESP bulk string not followed by CRLF");
        }
        out.text.assign(buf_, pos, *n);
        pos += *n + 2;
        return true;
      }
      case '*':
      case '>': {
        const auto count = length(head, max_items, "array");
        if (!count) {
          out.null = true;
          return true;
        }
        out.items.resize(*count);
        for (auto& item : out.items) {
          if (!parse(pos, item, depth + 1)) return false;
        }
        return true;
      }
      default:
        throw std::runtime_error(std::string("unexpected RESP type byte 0x") +
                                 "0123456789abcdef"[(out.type >> 4) & 0xf] +
                                 "0123456789abcdef"[out.type & 0xf]);
    }
  }

  std::string buf_;
  std::size_t used_ = 0;  // bytes of buf_ already handed out
};

/// A command as a RESP array of bulk strings, appended to `out`.
void append_command(std::string& out, std::initializer_list<std::string_view> args) {
  char num[24];
  auto append_len = [&](char prefix, std::size_t n) {
    const auto r = std::to_chars(num, num + sizeof num, n);
    out.push_back(prefix);
    out.append(num, r.ptr);
    out.append("\r\n");
  };
  append_len('*', args.size());
  for (const auto a : args) {
    append_len('$', a.size());
    out.append(a);
    out.append("\r\n");
  }
}

// ---------------------------------------------------------------------------
// The connection: one TCP socket with TCP_NODELAY, read into a resp_reader.

class connection {
 public:
  explicit connection(const endpoint& e) {
    addrinfo hints{};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (const int rc = getaddrinfo(e.host.c_str(), e.port.c_str(), &hints, &res)) {
      throw std::runtime_error("cannot resolve " + e.host + ": " + gai_strerror(rc));
    }
    std::string last_error = "no address";
    for (addrinfo* ai = res; ai != nullptr && fd_ < 0; ai = ai->ai_next) {
      const int fd = ::socket(ai->ai_family, ai->ai_socktype, ai->ai_protocol);
      if (fd < 0) {
        last_error = std::strerror(errno);
        continue;
      }
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) {
        fd_ = fd;
      } else {
        last_error = std::strerror(errno);
        ::close(fd);
      }
    }
    freeaddrinfo(res);
    if (fd_ < 0)
      throw std::runtime_error("cannot connect to " + e.host + ":" + e.port + ": " + last_error);
    const int one = 1;
    if (setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) != 0) {
      const int saved = errno;
      ::close(fd_);
      errno = saved;
      fail_errno("setsockopt(TCP_NODELAY)");
    }
  }
  connection(const connection&) = delete;
  connection& operator=(const connection&) = delete;
  ~connection() { ::close(fd_); }

  /// Blocking reads give up after `ms` milliseconds (then read_some returns
  /// false), so that a caller waiting on the socket still sees its deadline.
  void set_read_timeout_ms(long ms) {
    timeval tv{};
    tv.tv_sec = ms / 1000;
    tv.tv_usec = (ms % 1000) * 1000;
    if (setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv) != 0) {
      fail_errno("setsockopt(SO_RCVTIMEO)");
    }
  }

  /// Writes all of `data` (blocking).
  void write_all(std::string_view data) {
    while (!data.empty()) {
      const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0) {
        if (errno == EINTR) continue;
        fail_errno("write to the server");
      }
      data.remove_prefix(static_cast<std::size_t>(n));
    }
  }

  /// One read into the reader. `wait`: a blocking read() (up to the read
  /// timeout); otherwise only what is already there. Returns false when
  /// nothing came; throws when the server closed the connection.
  bool read_some(bool wait) {
    for (;;) {
      const ssize_t n =
          wait ? ::read(fd_, buf_, sizeof buf_) : ::recv(fd_, buf_, sizeof buf_, MSG_DONTWAIT);
      if (n > 0) {
        reader_.feed(buf_, static_cast<std::size_t>(n));
        return true;
      }
      if (n == 0) throw std::runtime_error("the server closed the connection");
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return false;
      fail_errno("read from the server");
    }
  }

  std::optional<resp_value> next_reply() { return reader_.next(); }

  /// Waits (blocking reads) for the next reply, at most until `deadline_ns`.
  std::optional<resp_value> wait_reply(std::int64_t deadline_ns) {
    for (;;) {
      if (auto v = reader_.next()) return v;
      if (now_ns() >= deadline_ns) return std::nullopt;
      read_some(true);
    }
  }

 private:
  int fd_ = -1;
  char buf_[64 * 1024];
  resp_reader reader_;
};

/// Throws for an error reply, with the server's text.
void check_not_error(const resp_value& v, std::string_view during) {
  if (v.type == '-') throw std::runtime_error(std::string(during) + ": server replied " + v.text);
}

/// Is `v` a pub/sub event (array or push) whose first element is `kind`?
bool is_event(const resp_value& v, std::string_view kind) {
  return (v.type == '*' || v.type == '>') && !v.items.empty() && v.items[0].text == kind;
}

// ---------------------------------------------------------------------------
// Output: one JSON line each, flushed (the harness reads line by line).

void emit(const std::string& line) {
  std::fputs(line.c_str(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

std::string num(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.9g", v);
  return b;
}

/// p in [0,1] of sorted `v`: the sample at the nearest rank of p * (n - 1),
/// as benchmarks/support/bench_support.cpp and lib/common.js take it.
double percentile(const std::vector<double>& v, double p) {
  if (v.empty()) return 0.0;
  const auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

/// The "latency" object of a subscribe result: nanosecond samples, the
/// first 10% dropped (connection warm-up), the rest in milliseconds.
std::string latency_summary(const std::vector<std::int64_t>& ns) {
  const std::size_t skip = ns.size() / 10;
  std::vector<double> ms;
  ms.reserve(ns.size() - skip);
  for (std::size_t i = skip; i < ns.size(); ++i) ms.push_back(static_cast<double>(ns[i]) / 1e6);
  std::sort(ms.begin(), ms.end());
  return "{\"samples\":" + std::to_string(ms.size()) + ",\"discarded\":" + std::to_string(skip) +
         ",\"p50_ms\":" + num(percentile(ms, 0.50)) + ",\"p90_ms\":" + num(percentile(ms, 0.90)) +
         ",\"p99_ms\":" + num(percentile(ms, 0.99)) +
         ",\"max_ms\":" + num(ms.empty() ? 0.0 : ms.back()) + "}";
}

// ---------------------------------------------------------------------------
// Roles.

constexpr long read_timeout_ms = 200;  // how often a blocked reader looks at its deadline

int subscribe(const options& o) {
  connection c(parse_url(o.url));
  std::string cmd;
  append_command(cmd, {"SUBSCRIBE", o.channel});
  c.write_all(cmd);
  c.set_read_timeout_ms(read_timeout_ms);
  const std::int64_t confirm_deadline = now_ns() + o.timeout_s * 1000000000LL;
  for (;;) {
    const auto v = c.wait_reply(confirm_deadline);
    if (!v) throw std::runtime_error("SUBSCRIBE: no confirmation within the timeout");
    check_not_error(*v, "SUBSCRIBE");
    if (is_event(*v, "subscribe")) break;
    throw std::runtime_error("SUBSCRIBE: unexpected reply of type " + std::string(1, v->type));
  }
  emit("{\"ready\":true}");

  std::vector<std::int64_t> lat_ns;
  lat_ns.reserve(static_cast<std::size_t>(o.messages));
  const auto want = static_cast<std::size_t>(o.messages);
  const std::int64_t deadline = now_ns() + o.timeout_s * 1000000000LL;
  while (lat_ns.size() < want && now_ns() < deadline) {
    if (!c.read_some(true)) continue;  // the read timeout: look at the deadline
    // One receive time for all that this read brought: when the bytes
    // reached this process.
    const std::int64_t t = now_ns();
    while (auto v = c.next_reply()) {
      check_not_error(*v, "subscriber");
      if (!is_event(*v, "message") || v->items.size() != 3) {
        throw std::runtime_error("subscriber: unexpected reply of type " + std::string(1, v->type));
      }
      const std::string& p = v->items[2].text;
      std::int64_t stamp = 0;
      const auto [end, ec] = std::from_chars(p.data(), p.data() + p.size(), stamp);
      if (ec != std::errc() || end != p.data() + p.size()) {
        throw std::runtime_error("subscriber: payload is not a nanosecond stamp: " +
                                 p.substr(0, 40));
      }
      lat_ns.push_back(t - stamp);
    }
  }
  emit("{\"subscribers\":1,\"received\":" + std::to_string(lat_ns.size()) +
       ",\"complete\":" + (lat_ns.size() >= want ? "true" : "false") +
       ",\"latency\":" + latency_summary(lat_ns) + "}");
  return 0;
}

int publish(const options& o) {
  connection c(parse_url(o.url));
  const std::int64_t deadline = now_ns() + o.timeout_s * 1000000000LL;
  // One PING first: a server that refuses commands (NOAUTH, LOADING) fails
  // here, before the schedule starts.
  std::string cmd;
  append_command(cmd, {"PING"});
  c.write_all(cmd);
  c.set_read_timeout_ms(read_timeout_ms);
  const auto pong = c.wait_reply(deadline);
  if (!pong) throw std::runtime_error("PING: no reply within the timeout");
  check_not_error(*pong, "PING");

  long acked = 0;
  auto count = [&](const resp_value& v) {
    check_not_error(v, "PUBLISH");
    if (v.type != ':')
      throw std::runtime_error("PUBLISH: unexpected reply of type " + std::string(1, v.type));
    ++acked;
  };
  const double cpu0 = own_cpu();
  const double period_ns = 1e9 / o.rate;
  const std::int64_t start = now_ns();
  long sent = 0;
  char stamp[24];
  for (; sent < o.messages; ++sent) {
    sleep_until_ns(start + std::llround(static_cast<double>(sent) * period_ns));
    if (now_ns() >= deadline) break;
    const std::int64_t t = now_ns();  // the stamp, right before the write
    const auto r = std::to_chars(stamp, stamp + sizeof stamp, t);
    cmd.clear();
    append_command(cmd, {"PUBLISH", o.channel, std::string_view(stamp, r.ptr - stamp)});
    c.write_all(cmd);
    // The replies that are already there; never wait for one here.
    while (c.read_some(false)) {
    }
    while (auto v = c.next_reply()) count(*v);
  }
  const double secs = static_cast<double>(now_ns() - start) / 1e9;
  while (acked < sent) {
    const auto v = c.wait_reply(deadline);
    if (!v) break;
    count(*v);
  }
  emit("{\"sent\":" + std::to_string(sent) + ",\"acked\":" + std::to_string(acked) +
       ",\"rate_achieved\":" + num(static_cast<double>(sent) / secs) +
       ",\"cpu_s\":" + num(own_cpu() - cpu0) +
       ",\"complete\":" + (sent == o.messages && acked == sent ? "true" : "false") + "}");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const options o = parse_args(argc, argv);
    return o.role == "subscribe" ? subscribe(o) : publish(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hop_floor: %s\n", e.what());
    return 1;
  }
}
