// The admin server's decisions, without I/O (tested directly in
// test/admin/rules_test.cpp): request targets, the route table, the access
// checks (token, CSRF header, read-only, Host), paging arguments and the
// HTTP status of each library error.
#pragma once

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::admin::detail {

/// The header every write must carry (any value). A cross-site HTML form
/// cannot set a header, and a cross-site script that sets one needs a CORS
/// preflight, which this server never grants: so a write can only come
/// from the dashboard's own page or a program (docs/operations.md).
inline constexpr std::string_view csrf_header = "X-Thoonk-Admin";

/// A request target split into its percent-decoded path segments and query
/// parameters. `ok` false: a malformed escape, a NUL, or no leading '/'.
struct target {
  bool ok = false;
  std::vector<std::string> segments;
  std::map<std::string, std::string> query;
  /// The query parameter, or `fallback` when absent.
  std::string param(const std::string& name, std::string fallback = {}) const;
};
target parse_target(std::string_view raw);
/// Decodes %XX escapes (and '+' as a space when `plus_is_space`).
/// nullopt on a malformed escape.
std::optional<std::string> percent_decode(std::string_view s, bool plus_is_space);

/// What a route does; the table (make_router()) maps method and path to one.
enum class route_id {
  page,
  queues,
  queue,
  jobs,
  job,
  workers,
  feeds,
  feed_items,
  job_retry,
  job_retract,
  job_abort,
  job_promote,
  pause,
  resume,
  rate_limit,
  retry_dead,
  delete_queue,
  events,
};

struct route {
  std::string method;  ///< "GET" or "POST"
  /// Path segments; "{name}" matches any one segment (captured in order).
  std::vector<std::string> pattern;
  route_id id;
  /// Changes something: refused in read-only mode, needs the CSRF header.
  bool write = false;
};

struct route_match {
  enum class outcome { found, not_found, method_not_allowed } result = outcome::not_found;
  const route* r = nullptr;
  std::vector<std::string> params;
  /// For method_not_allowed: the methods the path takes ("GET, POST").
  std::string allow;
};

/// The route table: routes are matched in the order added. Further routes
/// (a /metrics page) are one add() each.
class router {
 public:
  void add(std::string method, std::string_view pattern, route_id id, bool write);
  route_match match(std::string_view method, const std::vector<std::string>& segments) const;
  const std::vector<route>& routes() const noexcept { return routes_; }

 private:
  std::vector<route> routes_;
};
/// The admin server's table (docs/operations.md lists it).
router make_router();

/// Equal bytes, in a time that depends on the lengths only.
bool constant_time_equal(std::string_view a, std::string_view b) noexcept;

/// What the access check needs of a request.
struct request_facts {
  bool write = false;
  /// Under /api (the page itself is public: it holds no data).
  bool api = false;
  std::string_view authorization;  ///< the Authorization header ("" if none)
  bool has_csrf_header = false;
  std::string_view host;  ///< the Host header ("" if none)
};

/// A refusal: HTTP status, a stable code and a sentence saying what to do.
struct refusal {
  unsigned status = 0;
  std::string code;
  std::string message;
};

/// The server's access rules.
class access_policy {
 public:
  /// `loopback`: the server listens on a loopback address; then, without a
  /// token, the Host header must name this machine (a web page of another
  /// site whose name resolves to 127.0.0.1 — DNS rebinding — is refused).
  access_policy(std::string token, bool read_only, bool loopback, unsigned short port);
  /// nullopt: allowed. Checked in this order: Host, token, read-only,
  /// CSRF header.
  std::optional<refusal> check(const request_facts& r) const;

 private:
  bool host_allowed(std::string_view host) const;
  std::string token_;
  bool read_only_;
  bool loopback_;
  unsigned short port_;
};

/// A paging count: `text` empty → `fallback`; else a decimal 1..max.
/// nullopt when it is not.
std::optional<std::size_t> parse_count(std::string_view text, std::size_t fallback,
                                       std::size_t max);
/// A decimal offset cursor (empty: 0). nullopt when not a number.
std::optional<std::int64_t> parse_offset(std::string_view text);

/// The job states a listing takes (`state=`): waiting, claimed, scheduled,
/// dead (alias stalled: the contract's name of this set), held.
bool valid_state(std::string_view s);

/// HTTP status for an error of the library (404 for a missing feed or job,
/// 409 for a job in the wrong state, 400 for bad input, 403 for ACL
/// refusals, 503 when Redis cannot be reached, 502 otherwise).
unsigned status_for(const boost::system::error_code& ec);
/// A short stable code for the JSON body ("job_not_found"): the library's
/// enumerator name for its own errors, else "error".
std::string code_for(const boost::system::error_code& ec);

/// One Server-Sent Events frame: `event: <name>` and one `data:` line per
/// line of `data` (JSON has none: its newlines are escaped), then a blank
/// line.
std::string sse_frame(std::string_view name, std::string_view data);

/// The events waiting to be written to one /api/events client: at most
/// `capacity`; when a slow client lets more pile up, the oldest are dropped
/// and the next take() starts with an `overflow` frame saying how many, so
/// the page knows to reload rather than trust its live view.
class event_buffer {
 public:
  explicit event_buffer(std::size_t capacity) : capacity_(capacity) {}
  void push(std::string frame);
  bool empty() const noexcept { return frames_.empty() && dropped_ == 0; }
  /// Everything waiting, as one string to write; empties the buffer.
  std::string take();
  std::size_t size() const noexcept { return frames_.size(); }

 private:
  std::size_t capacity_;
  std::size_t dropped_ = 0;
  std::vector<std::string> frames_;
};

}  // namespace thoonk::admin::detail
