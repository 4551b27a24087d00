// The `thoonk` command-line tool's decisions, without I/O (tested directly
// in test/cli/cli_unit_test.cpp): the command table and argument parsing,
// help texts, exit codes, and the text (tables) and JSON it prints.
// tools/thoonk/main.cpp is the thin I/O layer over it.
#pragma once

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>
#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::cli {

/// The tool's exit codes (docs/operations.md, "Command-line tool").
enum exit_code : int {
  exit_ok = 0,
  /// The queue, feed, job or worker does not exist.
  exit_not_found = 1,
  /// Bad command line or bad input (an invalid name, id, duration, URL).
  exit_usage = 2,
  /// The server could not be reached, or refused us: connection refused,
  /// timeout, TLS failure, wrong password, and ACL refusals (NOPERM).
  exit_unreachable = 3,
  /// The server answered, but the operation did not happen: the job is not
  /// in a state for it (retry of a job that is not dead, abort of a job
  /// that is not claimed), the name is another kind of feed, or Redis
  /// answered another error.
  exit_failed = 4,
};

/// One option of a command: `--name` or `--name VALUE`.
struct option_spec {
  std::string name;
  bool takes_value = false;
  std::string help;
};

/// One subcommand ("queues", "feed tail", ...).
struct command_spec {
  std::string name;
  std::string args;  ///< the positional arguments as shown in usage ("Q ID")
  std::string summary;
  std::vector<option_spec> options;
  std::size_t min_args = 0;
  std::size_t max_args = 0;
};

/// Every subcommand, in the order `thoonk --help` lists them.
const std::vector<command_spec>& commands();
/// The options every subcommand takes (--url, --json, --timeout, --help).
const std::vector<option_spec>& global_options();
/// The subcommand named `name`, or nullptr.
const command_spec* find_command(std::string_view name);

/// A parsed command line.
struct invocation {
  /// The subcommand's name; empty with `help` for `thoonk --help` alone.
  std::string command;
  std::vector<std::string> args;
  /// Given options by name (without "--"); a flag maps to "".
  std::map<std::string, std::string> options;
  bool help = false;

  bool has(const std::string& name) const { return options.count(name) != 0; }
  std::string get(const std::string& name, std::string fallback = {}) const;
};

struct parse_result {
  std::optional<invocation> inv;
  /// Set when `inv` is not: what is wrong, in one sentence.
  std::string error;
  /// The subcommand recognised before the error (for its usage line), or
  /// nullptr.
  const command_spec* command = nullptr;
};

/// Parses the arguments after the program's name. Options may come before
/// or after the subcommand's arguments, as `--name VALUE` or
/// `--name=VALUE`; `--` ends the options (an ITEM that starts with "--").
parse_result parse_command_line(const std::vector<std::string>& argv);

/// The text of `thoonk --help` (nullptr) or `thoonk CMD --help`.
std::string help_text(const command_spec* cmd);
/// "usage: thoonk CMD ARGS [options]".
std::string usage_line(const command_spec& cmd);

/// A duration: a whole number with a unit, ms, s, m or h ("500ms",
/// "10s"); a bare number is seconds. nullopt when it is none (or negative,
/// or beyond a year).
std::optional<std::chrono::milliseconds> parse_duration(std::string_view s);
/// A whole number from 1 to `max`; nullopt otherwise.
std::optional<std::size_t> parse_count(std::string_view s, std::size_t max);
/// A decimal number >= 0 (a feed cursor); nullopt otherwise.
std::optional<std::uint64_t> parse_uint(std::string_view s);

/// An address to listen on: "HOST:PORT", "[V6]:PORT", "HOST" (port
/// 8089) or ":PORT" (127.0.0.1). HOST must be an IP address.
struct listen_address {
  std::string host = "127.0.0.1";
  unsigned short port = 8089;
};
std::optional<listen_address> parse_listen(std::string_view s);

/// The exit code for an answer of the admin API: its HTTP status, and its
/// body for a refusal by Redis's ACL (NOPERM in the server's words: 3,
/// as the library's own ACL errors, which the API answers 403).
int exit_code_for_answer(unsigned status, std::string_view body);
/// The exit code for an error of the library (or the system).
int exit_code_for_error(const boost::system::error_code& ec);

/// `url` with its password replaced by "***", for messages.
std::string redact_url(std::string_view url);

/// `s` made safe to print on a terminal: control characters (an escape
/// sequence in a job item could rewrite the screen) become `\xNN`, `\n`,
/// `\t`, `\r`; a backslash is doubled. Other bytes are kept.
std::string terminal_safe(std::string_view s);
/// `s` cut to `width` characters (bytes of UTF-8 continuation not counted)
/// with "…" when cut; width 0: unchanged.
std::string clip(std::string_view s, std::size_t width);

/// A left-aligned table: the header row, then one row per entry, columns
/// two spaces apart; cells are made terminal_safe. A row shorter than the
/// header is padded with empty cells.
std::string format_table(const std::vector<std::string>& headers,
                         const std::vector<std::vector<std::string>>& rows);

/// A JSON value as a table cell: a string as it is, null as "", numbers
/// and booleans in JSON's spelling.
std::string cell(const boost::json::value& v);
/// Epoch milliseconds as UTC "YYYY-MM-DD HH:MM:SS.mmm"; 0 or less: "".
std::string format_time(std::int64_t epoch_ms);

/// The tables of the read commands, from the admin API's JSON answers
/// (docs/operations.md has their fields).
std::string render_queues(const boost::json::array& queues);
std::string render_feeds(const boost::json::array& feeds);
/// A page of jobs and, when `next` is not empty, the line to get the next.
std::string render_jobs(const boost::json::object& page, std::string_view queue);
/// One job, one "field: value" line each.
std::string render_job(const boost::json::object& job);
std::string render_workers(const boost::json::array& workers);

/// The error answer of the admin API (`{"error":{"code","message"[,
/// "server"]}}`) as the lines printed on stderr: "thoonk: MESSAGE" and,
/// when Redis said something, "thoonk: server said: TEXT".
std::string render_api_error(std::string_view body);
/// An error of the library: its message, and the server's words if any.
std::string render_error(std::string_view what, const boost::system::error_code& ec,
                         std::string_view server_message);

/// The rates of `thoonk top`: puts and finishes per second of each queue,
/// from the difference of two samples of the queues' counters.
class rate_meter {
 public:
  struct rates {
    double puts = 0;
    double finishes = 0;
  };
  /// Records a sample of `queue` at `now` (seconds, any origin) and returns
  /// its rates since the previous sample (0 for the first, and when a
  /// counter went backwards: the queue was deleted and re-created).
  rates sample(const std::string& queue, double now, std::int64_t puts, std::int64_t finishes);

 private:
  struct last {
    double at = 0;
    std::int64_t puts = 0;
    std::int64_t finishes = 0;
  };
  std::map<std::string, last> last_;
};

/// One frame of `thoonk top`: the queue table with rates, under a title
/// line. `queues` as /api/queues answers; rates taken from `meter` at `now`.
std::string render_top(const boost::json::array& queues, rate_meter& meter, double now,
                       std::string_view title, boost::json::array* json_out);

}  // namespace thoonk::cli
