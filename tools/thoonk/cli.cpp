#include "cli.hpp"

#include <thoonk/error.hpp>

#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <ctime>
#include <limits>

namespace thoonk::cli {

namespace json = boost::json;

const std::vector<option_spec>& global_options() {
  static const std::vector<option_spec> opts{
      {"url", true,
       "the Redis server: redis://[user[:password]@]host[:port][/db], rediss://... for TLS, "
       "unix:///path (default: $THOONK_REDIS_URL, else redis://127.0.0.1:6379)"},
      {"json", false, "print JSON (one object; `feed tail` and `top`: one per line)"},
      {"timeout", true, "give up on the server after this long (default 10s)"},
      {"help", false, "show this help"},
      {"version", false, "print the version and exit"},
  };
  return opts;
}

const std::vector<command_spec>& commands() {
  static const std::vector<command_spec> cmds{
      {"queues", "", "every queue and job queue with its counts", {}, 0, 0},
      {"jobs",
       "Q",
       "one page of the jobs of queue Q in one state",
       {{"state", true, "waiting (default), claimed, scheduled, dead or held"},
        {"count", true, "jobs per page, 1..500 (default 50)"},
        {"cursor", true, "the page to show: the cursor printed under the previous page"}},
       1,
       1},
      {"job",
       "Q ID",
       "one job: item, state, attempts, last error, progress, result, worker",
       {},
       2,
       2},
      {"put",
       "Q ITEM",
       "put a job on job queue Q; prints its id",
       {{"delay", true, "run it this long from now (e.g. 30s, 5m)"},
        {"id", true, "the job's id (a put for an existing id updates that job)"}},
       2,
       2},
      {"retry",
       "Q [ID]",
       "put a dead job (or, with --all-dead, every dead job) back on the line",
       {{"all-dead", false, "retry every dead job of Q, a page at a time"}},
       1,
       2},
      {"abort",
       "Q ID",
       "end the claim of a claimed job, whoever holds it",
       {{"failed", false, "count it as failed (retried after the backoff) rather than cancelled"},
        {"permanent", false, "with --failed: make it a dead letter at once"},
        {"error", true, "with --failed: the error to record"}},
       2,
       2},
      {"pause", "Q", "stop workers claiming from job queue Q", {}, 1, 1},
      {"resume", "Q", "let workers claim from job queue Q again", {}, 1, 1},
      {"workers", "Q", "the workers of job queue Q, their claims and heartbeats", {}, 1, 1},
      {"feeds", "", "every feed and sorted feed with its length", {}, 0, 0},
      {"feed tail",
       "F",
       "print the events of feed F as they happen, catching up after reconnects",
       {{"from", true, "first replay everything published after this cursor (0: from the start)"},
        {"count", true, "stop after this many events (default: until SIGINT or SIGTERM)"}},
       1,
       1},
      {"feed publish",
       "F ITEM",
       "publish ITEM on feed F; prints its id",
       {{"id", true, "the item's id (publishing an existing id edits it)"}},
       2,
       2},
      {"create",
       "NAME",
       "create a feed or queue",
       {{"type", true, "job (default), queue, feed or sorted_feed"}},
       1,
       1},
      {"top",
       "",
       "live counts and rates of every queue, refreshed in place",
       {{"interval", true, "time between refreshes (default 2s)"},
        {"once", false, "print one frame and exit"},
        {"iterations", true, "print this many frames and exit"}},
       0,
       0},
      {"dashboard",
       "",
       "serve the admin HTTP API and web dashboard until SIGINT or SIGTERM",
       {{"listen", true, "HOST:PORT to listen on (default 127.0.0.1:8089; port 0: any free one)"},
        {"read-only", false, "refuse every change (HTTP 405)"},
        {"token", true,
         "access token (16+ bytes) required as `Authorization: Bearer`; needed for a "
         "non-loopback address (default: $THOONK_ADMIN_TOKEN)"}},
       0,
       0},
  };
  return cmds;
}

const command_spec* find_command(std::string_view name) {
  for (const auto& c : commands())
    if (c.name == name) return &c;
  return nullptr;
}

std::string invocation::get(const std::string& name, std::string fallback) const {
  auto it = options.find(name);
  if (it == options.end()) return fallback;
  return it->second;
}

namespace {

const option_spec* find_option(const command_spec* cmd, std::string_view name) {
  for (const auto& o : global_options())
    if (o.name == name) return &o;
  if (cmd)
    for (const auto& o : cmd->options)
      if (o.name == name) return &o;
  return nullptr;
}

parse_result failure(std::string message, const command_spec* cmd) {
  parse_result r;
  r.error = std::move(message);
  r.command = cmd;
  return r;
}

}  // namespace

parse_result parse_command_line(const std::vector<std::string>& argv) {
  invocation inv;
  const command_spec* cmd = nullptr;
  bool options_done = false;
  std::size_t i = 0;
  auto take_option = [&](const std::string& arg, std::string* error) -> bool {
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.erase(eq);
    }
    const option_spec* spec = find_option(cmd, name);
    if (!spec) {
      if (!cmd)
        *error = "unknown option --" + name + " (a command's own options go after the command)";
      else *error = "unknown option --" + name;
      return false;
    }
    if (spec->takes_value) {
      if (!value) {
        if (i + 1 >= argv.size()) {
          *error = "--" + name + " needs a value";
          return false;
        }
        value = argv[++i];
      }
      inv.options[name] = *value;
    } else {
      if (value) {
        *error = "--" + name + " takes no value";
        return false;
      }
      inv.options[name] = "";
    }
    return true;
  };

  for (; i < argv.size(); ++i) {
    const std::string& arg = argv[i];
    if (!options_done && arg == "--") {
      options_done = true;
      continue;
    }
    if (!options_done && arg.size() > 2 && arg.rfind("--", 0) == 0) {
      std::string error;
      if (!take_option(arg, &error)) return failure(error, cmd);
      continue;
    }
    if (!options_done && arg == "-h") {
      inv.options["help"] = "";
      continue;
    }
    if (!cmd) {
      if (arg == "feed") {
        if (i + 1 >= argv.size() || (argv[i + 1] != "tail" && argv[i + 1] != "publish"))
          return failure("`thoonk feed` takes `tail` or `publish`", nullptr);
        cmd = find_command("feed " + argv[++i]);
      } else {
        cmd = find_command(arg);
        if (!cmd) return failure("unknown command '" + arg + "'", nullptr);
      }
      continue;
    }
    inv.args.push_back(arg);
  }

  inv.help = inv.has("help");
  if (!cmd) {
    if (inv.help || inv.has("version")) return parse_result{std::move(inv), {}, nullptr};
    return failure("no command given", nullptr);
  }
  inv.command = cmd->name;
  if (inv.help || inv.has("version")) return parse_result{std::move(inv), {}, cmd};
  if (inv.args.size() < cmd->min_args || inv.args.size() > cmd->max_args) {
    std::string msg = inv.args.size() < cmd->min_args ? "missing argument" : "too many arguments";
    return failure(msg + " for `thoonk " + cmd->name + "`", cmd);
  }
  // Per-command rules the table cannot say.
  if (cmd->name == "retry") {
    const bool all = inv.has("all-dead");
    if (all && inv.args.size() == 2) return failure("give a job ID or --all-dead, not both", cmd);
    if (!all && inv.args.size() == 1) return failure("give a job ID or --all-dead", cmd);
  }
  if (cmd->name == "abort" && !inv.has("failed") && (inv.has("permanent") || inv.has("error")))
    return failure("--permanent and --error go with --failed", cmd);
  if (cmd->name == "top" && inv.has("once") && inv.has("iterations"))
    return failure("give --once or --iterations, not both", cmd);
  // Values checked before any I/O, so that bad input never reaches the
  // server (the admin API checks --state, --count and --cursor of `jobs`).
  for (const char* name : {"timeout", "delay", "interval"}) {
    if (!inv.has(name)) continue;
    auto d = parse_duration(inv.get(name));
    if (!d || (std::string_view(name) != "delay" && d->count() == 0))
      return failure("--" + std::string(name) + " takes a duration such as 500ms, 10s, 5m or 1h",
                     cmd);
  }
  if (cmd->name != "jobs" && inv.has("count") && !parse_count(inv.get("count"), 1u << 30))
    return failure("--count takes a whole number from 1", cmd);
  if (inv.has("iterations") && !parse_count(inv.get("iterations"), 1u << 30))
    return failure("--iterations takes a whole number from 1", cmd);
  if (inv.has("from") && !parse_uint(inv.get("from")))
    return failure("--from takes a cursor: a whole number from 0", cmd);
  if (inv.has("listen") && !parse_listen(inv.get("listen")))
    return failure("--listen takes HOST:PORT, [IPV6]:PORT, HOST or :PORT", cmd);
  if (inv.has("type")) {
    const auto t = inv.get("type");
    if (t != "job" && t != "queue" && t != "feed" && t != "sorted_feed")
      return failure("--type takes job, queue, feed or sorted_feed", cmd);
  }
  return parse_result{std::move(inv), {}, cmd};
}

std::string usage_line(const command_spec& cmd) {
  std::string s = "usage: thoonk " + cmd.name;
  if (!cmd.args.empty()) s += " " + cmd.args;
  s += " [options]";
  return s;
}

namespace {
void append_options(std::string& out, const std::vector<option_spec>& opts) {
  std::size_t width = 0;
  for (const auto& o : opts) width = std::max(width, o.name.size() + (o.takes_value ? 4 : 0));
  for (const auto& o : opts) {
    std::string left = "--" + o.name + (o.takes_value ? " VAL" : "");
    out += "  " + left + std::string(width + 2 - (left.size() - 2) + 1, ' ') + o.help + "\n";
  }
}
}  // namespace

std::string help_text(const command_spec* cmd) {
  std::string out;
  if (!cmd) {
    out += "usage: thoonk COMMAND [ARGS] [options]\n\n";
    out += "See and steer the queues, job queues and feeds of a thoonk Redis server.\n\n";
    out += "Commands:\n";
    std::size_t width = 0;
    for (const auto& c : commands())
      width = std::max(width, c.name.size() + (c.args.empty() ? 0 : c.args.size() + 1));
    for (const auto& c : commands()) {
      std::string left = c.name + (c.args.empty() ? "" : " " + c.args);
      out += "  " + left + std::string(width + 2 - left.size(), ' ') + c.summary + "\n";
    }
    out += "\nOptions of every command:\n";
    append_options(out, global_options());
    out += "\n`thoonk COMMAND --help` shows a command's own options.\n";
    out += "Exit codes: 0 ok, 1 not found, 2 usage or bad input, 3 server unreachable or\n";
    out += "refused (connection, timeout, TLS, wrong password, ACL), 4 the operation failed\n";
    out += "(wrong state or type, another server error).\n";
    return out;
  }
  out += usage_line(*cmd) + "\n\n" + cmd->summary + "\n";
  if (!cmd->options.empty()) {
    out += "\nOptions:\n";
    append_options(out, cmd->options);
  }
  out += "\nOptions of every command:\n";
  append_options(out, global_options());
  return out;
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view s) {
  std::int64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || p == s.data() || n < 0) return std::nullopt;
  std::string_view unit(p, static_cast<std::size_t>(s.data() + s.size() - p));
  std::int64_t factor = 0;
  if (unit.empty() || unit == "s") factor = 1000;
  else if (unit == "ms") factor = 1;
  else if (unit == "m") factor = 60 * 1000;
  else if (unit == "h") factor = 3600 * 1000;
  else return std::nullopt;
  constexpr std::int64_t year_ms = 366LL * 24 * 3600 * 1000;
  if (n > year_ms / factor) return std::nullopt;
  return std::chrono::milliseconds(n * factor);
}

std::optional<std::uint64_t> parse_uint(std::string_view s) {
  std::uint64_t n = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return n;
}

std::optional<std::size_t> parse_count(std::string_view s, std::size_t max) {
  auto n = parse_uint(s);
  if (!n || *n < 1 || *n > max) return std::nullopt;
  return static_cast<std::size_t>(*n);
}

std::optional<listen_address> parse_listen(std::string_view s) {
  listen_address a;
  if (s.empty()) return std::nullopt;
  std::string_view host = s;
  std::string_view port;
  if (s.front() == '[') {
    auto close = s.find(']');
    if (close == std::string_view::npos) return std::nullopt;
    host = s.substr(1, close - 1);
    auto rest = s.substr(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return std::nullopt;
      port = rest.substr(1);
      if (port.empty()) return std::nullopt;
    }
  } else if (auto colon = s.rfind(':'); colon != std::string_view::npos) {
    if (s.find(':') != colon) return std::nullopt;  // a bare IPv6 address: use [..]
    host = s.substr(0, colon);
    port = s.substr(colon + 1);
    if (port.empty()) return std::nullopt;
  }
  if (!host.empty()) a.host = std::string(host);
  if (!port.empty()) {
    auto p = parse_uint(port);
    if (!p || *p > 65535) return std::nullopt;
    a.port = static_cast<unsigned short>(*p);
  }
  return a;
}

int exit_code_for_answer(unsigned status, std::string_view body) {
  if (status >= 200 && status < 300) return exit_ok;
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  if (!ec && v.is_object()) {
    if (auto* e = v.as_object().if_contains("error"); e && e->is_object()) {
      if (auto* srv = e->as_object().if_contains("server"); srv && srv->is_string()) {
        const auto& text = srv->as_string();
        if (std::string_view(text.data(), text.size()).rfind("NOPERM", 0) == 0)
          return exit_unreachable;
      }
    }
  }
  if (status == 404) return exit_not_found;
  if (status == 400 || status == 413) return exit_usage;
  if (status == 403 || status == 503) return exit_unreachable;
  return exit_failed;
}

int exit_code_for_error(const boost::system::error_code& ec) {
  if (!ec) return exit_ok;
  if (ec.category() == thoonk::category()) {
    switch (static_cast<thoonk::error>(ec.value())) {
      case error::feed_not_found:
      case error::job_not_found:
      case error::id_not_found:
      case error::worker_not_found: return exit_not_found;
      case error::invalid_name:
      case error::invalid_id:
      case error::item_too_large:
      case error::invalid_argument:
      case error::invalid_url: return exit_usage;
      case error::unknown_outcome:
      case error::not_connected:
      case error::connect_timeout:
      case error::health_check_timeout:
      case error::request_timeout:
      case error::handshake_failed:
      case error::auth_failed:
      case error::client_stopped:
      case error::subscribe_refused:
      case error::no_permission:
      case error::no_script_permission:
      case error::no_channel_permission:
      case error::no_key_permission:
      case error::tls_handshake_failed:
      case error::tls_certificate_rejected:
      case error::tls_config_invalid:
      case error::tls_required:
      case error::not_primary: return exit_unreachable;
      default: return exit_failed;
    }
  }
  // The system's and Asio's own codes are about reaching the server
  // (refused, reset, host not found, ...).
  return exit_unreachable;
}

std::string redact_url(std::string_view url) {
  const auto scheme = url.find("://");
  if (scheme == std::string_view::npos) return std::string(url);
  const auto start = scheme + 3;
  const auto at = url.find('@', start);
  const auto slash = url.find('/', start);
  if (at == std::string_view::npos || (slash != std::string_view::npos && slash < at)) {
    // unix:///path?password=...: drop the query's password.
    auto q = url.find("password=");
    if (q == std::string_view::npos) return std::string(url);
    auto end = url.find('&', q);
    return std::string(url.substr(0, q)) + "password=***" +
           std::string(end == std::string_view::npos ? std::string_view() : url.substr(end));
  }
  const auto colon = url.find(':', start);
  if (colon == std::string_view::npos || colon > at) return std::string(url);
  return std::string(url.substr(0, colon + 1)) + "***" + std::string(url.substr(at));
}

std::string terminal_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (unsigned char ch : s) {
    switch (ch) {
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      case '\\': out += "\\\\"; break;
      default:
        if (ch < 0x20 || ch == 0x7f) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\x%02x", ch);
          out += buf;
        } else {
          out += static_cast<char>(ch);
        }
    }
  }
  return out;
}

namespace {
/// Characters shown (UTF-8 continuation bytes take no column).
std::size_t display_width(std::string_view s) {
  std::size_t n = 0;
  for (unsigned char ch : s)
    if ((ch & 0xC0) != 0x80) ++n;
  return n;
}
}  // namespace

std::string clip(std::string_view s, std::size_t width) {
  if (width == 0 || display_width(s) <= width) return std::string(s);
  std::string out;
  std::size_t shown = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    const auto ch = static_cast<unsigned char>(s[i]);
    if ((ch & 0xC0) != 0x80) {
      if (shown + 1 == width) break;
      ++shown;
    }
    out += s[i];
  }
  return out + "\xE2\x80\xA6";  // …
}

std::string format_table(const std::vector<std::string>& headers,
                         const std::vector<std::vector<std::string>>& rows) {
  std::vector<std::vector<std::string>> all;
  all.reserve(rows.size() + 1);
  all.push_back(headers);
  for (const auto& r : rows) {
    std::vector<std::string> row;
    for (std::size_t i = 0; i < headers.size(); ++i)
      row.push_back(i < r.size() ? terminal_safe(r[i]) : std::string());
    all.push_back(std::move(row));
  }
  std::vector<std::size_t> width(headers.size(), 0);
  for (const auto& r : all)
    for (std::size_t i = 0; i < r.size(); ++i) width[i] = std::max(width[i], display_width(r[i]));
  std::string out;
  for (const auto& r : all) {
    std::string line;
    for (std::size_t i = 0; i < r.size(); ++i) {
      line += r[i];
      if (i + 1 < r.size()) line += std::string(width[i] - display_width(r[i]) + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string cell(const json::value& v) {
  if (v.is_string()) return std::string(v.as_string());
  if (v.is_null()) return {};
  return json::serialize(v);
}

std::string format_time(std::int64_t ms) {
  if (ms <= 0) return {};
  std::time_t secs = static_cast<std::time_t>(ms / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[96];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02d %02d:%02d:%02d.%03d", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<int>(ms % 1000));
  return buf;
}

namespace {
const json::value& field(const json::object& o, std::string_view key) {
  static const json::value null;
  if (auto* v = o.if_contains(key)) return *v;
  return null;
}
std::int64_t int_field(const json::object& o, std::string_view key) {
  const auto& v = field(o, key);
  if (v.is_int64()) return v.as_int64();
  if (v.is_uint64()) return static_cast<std::int64_t>(v.as_uint64());
  if (v.is_double()) return static_cast<std::int64_t>(v.as_double());
  return 0;
}
const json::object& object_field(const json::object& o, std::string_view key) {
  static const json::object empty;
  const auto& v = field(o, key);
  if (v.is_object()) return v.as_object();
  return empty;
}
std::string count_cell(const json::object& counts, std::string_view key) {
  if (!counts.if_contains(key)) return "-";
  return cell(counts.at(key));
}
std::string yes_no(const json::value& v) { return v.is_bool() && v.as_bool() ? "yes" : "no"; }
std::string fixed1(double d) {
  char buf[400];  // %.1f of any double fits
  std::snprintf(buf, sizeof buf, "%.1f", d);
  return buf;
}
}  // namespace

std::string render_queues(const json::array& queues) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : queues) {
    if (!q.is_object()) continue;
    const auto& o = q.as_object();
    const auto& c = object_field(o, "counts");
    rows.push_back({cell(field(o, "name")), cell(field(o, "type")), count_cell(c, "waiting"),
                    count_cell(c, "claimed"), count_cell(c, "scheduled"), count_cell(c, "dead"),
                    count_cell(c, "held"), cell(field(o, "workers")), yes_no(field(o, "paused")),
                    count_cell(c, "puts"), count_cell(c, "finishes")});
  }
  return format_table({"NAME", "TYPE", "WAITING", "CLAIMED", "SCHEDULED", "DEAD", "HELD", "WORKERS",
                       "PAUSED", "PUTS", "FINISHES"},
                      rows);
}

std::string render_feeds(const json::array& feeds) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& f : feeds) {
    if (!f.is_object()) continue;
    const auto& o = f.as_object();
    rows.push_back({cell(field(o, "name")), cell(field(o, "type")), cell(field(o, "length")),
                    cell(field(o, "publishes"))});
  }
  return format_table({"NAME", "TYPE", "LENGTH", "PUBLISHES"}, rows);
}

std::string render_jobs(const json::object& page, std::string_view queue) {
  std::vector<std::vector<std::string>> rows;
  const auto& jobs = field(page, "jobs");
  if (jobs.is_array()) {
    for (const auto& j : jobs.as_array()) {
      if (!j.is_object()) continue;
      const auto& o = j.as_object();
      rows.push_back({cell(field(o, "id")), cell(field(o, "state")), cell(field(o, "failures")),
                      format_time(int_field(o, "run_at")), clip(cell(field(o, "last_error")), 40),
                      clip(cell(field(o, "item")), 60)});
    }
  }
  std::string out =
      format_table({"ID", "STATE", "FAILURES", "RUN AT (UTC)", "LAST ERROR", "ITEM"}, rows);
  const auto next = cell(field(page, "next"));
  if (!next.empty()) {
    out += "(more: thoonk jobs " + terminal_safe(queue) + " --state " + cell(field(page, "state")) +
           " --cursor " + terminal_safe(next) + ")\n";
  }
  return out;
}

std::string render_job(const json::object& job) {
  static const std::vector<std::pair<std::string, std::string>> order{
      {"id", "id"},
      {"state", "state"},
      {"item", "item"},
      {"failures", "failures"},
      {"retry_count", "retries"},
      {"stall_count", "stalls"},
      {"last_error", "last error"},
      {"progress", "progress"},
      {"run_at", "run at (UTC)"},
      {"held", "held put"},
      {"worker", "worker"},
      {"claimed_at", "claimed at (UTC)"},
      {"result", "result"},
  };
  std::vector<std::vector<std::string>> rows;
  for (const auto& [key, label] : order) {
    auto* v = job.if_contains(key);
    if (!v) continue;
    std::string text;
    if (key == "run_at" || key == "claimed_at") {
      text = v->is_int64() ? format_time(v->as_int64()) : cell(*v);
    } else if (key == "held") {
      text = yes_no(*v);
    } else {
      text = cell(*v);
    }
    rows.push_back({label + ":", text});
  }
  // No header row for a record: format_table's first row is the first field.
  if (rows.empty()) return {};
  auto head = rows.front();
  rows.erase(rows.begin());
  return format_table(head, rows);
}

std::string render_workers(const json::array& workers) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& w : workers) {
    if (!w.is_object()) continue;
    const auto& o = w.as_object();
    std::string claims;
    const auto& cl = field(o, "claims");
    if (cl.is_array()) {
      for (const auto& c : cl.as_array()) {
        if (!claims.empty()) claims += ",";
        claims += cell(c);
      }
    }
    rows.push_back({cell(field(o, "name")), yes_no(field(o, "alive")),
                    format_time(int_field(o, "last_heartbeat")),
                    format_time(int_field(o, "lapses_at")), clip(claims, 60),
                    clip(cell(field(o, "description")), 40)});
  }
  return format_table(
      {"NAME", "ALIVE", "LAST HEARTBEAT (UTC)", "LAPSES AT (UTC)", "CLAIMS", "DESCRIPTION"}, rows);
}

std::string render_api_error(std::string_view body) {
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  if (ec || !v.is_object() || !v.as_object().if_contains("error") ||
      !v.as_object().at("error").is_object())
    return "thoonk: " + terminal_safe(body) + "\n";
  const auto& e = v.as_object().at("error").as_object();
  std::string out = "thoonk: " + terminal_safe(cell(field(e, "message"))) + "\n";
  const auto server = cell(field(e, "server"));
  if (!server.empty()) out += "thoonk: server said: " + terminal_safe(server) + "\n";
  return out;
}

std::string render_error(std::string_view what, const boost::system::error_code& ec,
                         std::string_view server_message) {
  std::string out = "thoonk: " + terminal_safe(what);
  if (ec) out += ": " + terminal_safe(ec.message());
  out += "\n";
  if (!server_message.empty())
    out += "thoonk: server said: " + terminal_safe(server_message) + "\n";
  return out;
}

rate_meter::rates rate_meter::sample(const std::string& queue, double now, std::int64_t puts,
                                     std::int64_t finishes) {
  rates r;
  auto it = last_.find(queue);
  if (it != last_.end()) {
    const double dt = now - it->second.at;
    if (dt > 0 && puts >= it->second.puts && finishes >= it->second.finishes) {
      r.puts = static_cast<double>(puts - it->second.puts) / dt;
      r.finishes = static_cast<double>(finishes - it->second.finishes) / dt;
    }
  }
  last_[queue] = last{now, puts, finishes};
  return r;
}

std::string render_top(const json::array& queues, rate_meter& meter, double now,
                       std::string_view title, json::array* json_out) {
  std::vector<std::vector<std::string>> rows;
  for (const auto& q : queues) {
    if (!q.is_object()) continue;
    const auto& o = q.as_object();
    const auto& c = object_field(o, "counts");
    const auto name = cell(field(o, "name"));
    auto r = meter.sample(name, now, int_field(c, "puts"), int_field(c, "finishes"));
    rows.push_back({name, count_cell(c, "waiting"), count_cell(c, "claimed"),
                    count_cell(c, "scheduled"), count_cell(c, "dead"), cell(field(o, "workers")),
                    yes_no(field(o, "paused")), fixed1(r.puts), fixed1(r.finishes)});
    if (json_out) {
      json::object j = o;
      j["puts_per_second"] = r.puts;
      j["finishes_per_second"] = r.finishes;
      json_out->push_back(std::move(j));
    }
  }
  return std::string(title) + "\n" +
         format_table({"QUEUE", "WAITING", "CLAIMED", "SCHEDULED", "DEAD", "WORKERS", "PAUSED",
                       "PUTS/S", "FINISHES/S"},
                      rows);
}

}  // namespace thoonk::cli
