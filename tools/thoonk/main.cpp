// `thoonk`: the command-line tool (docs/operations.md, "Command-line tool").
// The I/O layer: it connects, runs one subcommand through the admin
// server's JSON API (src/admin/api.hpp, called in-process, no HTTP) or the
// library's operations, and prints what tools/thoonk/cli.hpp renders.
#include "cli.hpp"

#include "admin/api.hpp"

#include <thoonk/admin/server.hpp>
#include <thoonk/client.hpp>
#include <thoonk/config.hpp>
#include <thoonk/diagnostics.hpp>
#include <thoonk/error.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/job_queue.hpp>
#include <thoonk/sorted_feed.hpp>
#include <thoonk/version.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/cancellation_signal.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/json.hpp>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <exception>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

namespace asio = boost::asio;
namespace json = boost::json;
namespace cli = thoonk::cli;
using thoonk::admin::detail::api_response;
using thoonk::admin::detail::route_id;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::use_awaitable);

// g++ 12 cannot compile a braced list (std::initializer_list) inside a
// coroutine ("array used as initializer"): the argument lists are built by
// these plain functions instead.
std::vector<std::string> one(const std::string& s) { return std::vector<std::string>{s}; }
std::map<std::string, std::string> no_query() { return {}; }
std::map<std::string, std::string> page_query(const std::string& cursor) {
  return {{"cursor", cursor}, {"count", "500"}};
}
std::map<std::string, std::string> one_item() { return {{"count", "1"}}; }

/// Listings sorted by name.
void sort_by_name(json::array& a) {
  auto name = [](const json::value& v) {
    const auto& s = v.as_object().at("name").as_string();
    return std::string_view(s.data(), s.size());
  };
  std::sort(a.begin(), a.end(),
            [&](const json::value& x, const json::value& y) { return name(x) < name(y); });
}

/// One run of the tool: the client, the in-process admin API and the
/// subcommand's state. Lives in main() until the io_context is done.
class app {
 public:
  app(asio::io_context& ioc, cli::invocation inv, thoonk::config cfg, std::string url)
      : ioc_(ioc),
        inv_(std::move(inv)),
        url_(std::move(url)),
        json_(inv_.has("json")),
        c_(ioc.get_executor(), std::move(cfg)),
        api_(c_, admin_opts_),
        signals_(ioc, SIGINT, SIGTERM),
        wake_(ioc, asio::steady_timer::time_point::max()) {}

  int exit_code() const { return rc_; }

  /// The first `n` positional arguments (the parser checked their count).
  std::vector<std::string> first(std::size_t n) const {
    return std::vector<std::string>(inv_.args.begin(), inv_.args.begin() + static_cast<long>(n));
  }

  asio::awaitable<void> run() {
    try {
      rc_ = co_await run_command();
    } catch (const std::exception& e) {
      std::cerr << "thoonk: " << cli::terminal_safe(e.what()) << "\n";
      rc_ = cli::exit_failed;
    }
    std::cout.flush();
    // The connections keep timers and reads pending: stop them, then the
    // io_context, so that main() returns.
    signals_.cancel();
    c_.stop();
    ioc_.stop();
  }

 private:
  asio::awaitable<int> run_command() {
    const auto& cmd = inv_.command;
    if (cmd == "feed tail" || cmd == "top" || cmd == "dashboard") watch_signals();
    if (int rc = co_await connect()) co_return rc;
    const auto& a = inv_.args;
    if (cmd == "queues") co_return co_await list_all(route_id::queues, std::string("queues"));
    if (cmd == "feeds") co_return co_await list_all(route_id::feeds, std::string("feeds"));
    if (cmd == "jobs") co_return co_await jobs(a.at(0));
    if (cmd == "job") co_return co_await show(route_id::job, first(2), no_query(), render_job);
    if (cmd == "workers")
      co_return co_await show(route_id::workers, first(1), no_query(), render_workers);
    if (cmd == "put") co_return co_await put(a.at(0), a.at(1));
    if (cmd == "retry") {
      if (inv_.has("all-dead")) co_return co_await retry_all_dead(a.at(0));
      co_return co_await act(route_id::job_retry, first(2), std::string());
    }
    if (cmd == "abort") co_return co_await act(route_id::job_abort, first(2), abort_body());
    if (cmd == "pause") co_return co_await act(route_id::pause, first(1), std::string());
    if (cmd == "resume") co_return co_await act(route_id::resume, first(1), std::string());
    if (cmd == "feed publish") co_return co_await publish(a.at(0), a.at(1));
    if (cmd == "feed tail") co_return co_await tail(a.at(0));
    if (cmd == "create") co_return co_await create(a.at(0));
    if (cmd == "top") co_return co_await top();
    if (cmd == "dashboard") co_return co_await dashboard();
    std::cerr << "thoonk: unknown command '" << cmd << "'\n";
    co_return cli::exit_usage;
  }

  // ---- connecting ----------------------------------------------------------

  asio::awaitable<int> connect() {
    // The server's words for a refused setup (WRONGPASS, NOPERM) come as
    // a connection event, before the connect completes.
    c_.conn().on_event([this](const thoonk::connection_event& e) {
      if (e.kind == thoonk::connection_event::connect_failed && !e.server_message.empty())
        server_message_ = e.server_message;
    });
    auto [ec] = co_await c_.async_connect(nothrow);
    if (!ec) co_return cli::exit_ok;
    std::cerr << cli::render_error("cannot use the Redis server at " + url_, ec, server_message_);
    co_return cli::exit_code_for_error(ec);
  }

  void watch_signals() {
    signals_.async_wait([this](const boost::system::error_code& ec, int) {
      if (ec) return;
      stopping_ = true;
      wake_.cancel();
      stop_.emit(asio::cancellation_type::terminal);
    });
  }

  // ---- the admin API, in-process -----------------------------------------

  asio::awaitable<api_response> call(route_id id, std::vector<std::string> params,
                                     std::map<std::string, std::string> query, std::string body) {
    thoonk::admin::detail::api_request r;
    r.id = id;
    r.params = std::move(params);
    r.t.ok = true;
    r.t.query = std::move(query);
    r.body = std::move(body);
    co_return co_await api_.handle(std::move(r));
  }

  /// A failed answer on stderr; its exit code.
  static int report(const api_response& r) {
    std::cerr << cli::render_api_error(r.body);
    return cli::exit_code_for_answer(r.status, r.body);
  }

  static std::string render_job(const json::value& v) { return cli::render_job(v.as_object()); }
  static std::string render_workers(const json::value& v) {
    return cli::render_workers(v.at("workers").as_array());
  }

  /// A read answered as one JSON object: printed as is (--json) or rendered.
  asio::awaitable<int> show(route_id id, std::vector<std::string> params,
                            std::map<std::string, std::string> query,
                            std::string (*render)(const json::value&)) {
    auto r = co_await call(id, std::move(params), std::move(query), std::string());
    if (r.status != 200) co_return report(r);
    if (json_) std::cout << r.body << "\n";
    else std::cout << render(json::parse(r.body));
    co_return cli::exit_ok;
  }

  /// Every page of /api/queues or /api/feeds (SSCAN pages of the feeds
  /// set: the work is bounded per page, not per queue length).
  asio::awaitable<int> fetch_all(route_id id, std::string key, json::array& out) {
    std::string cursor;
    do {
      auto r = co_await call(id, std::vector<std::string>(), page_query(cursor), std::string());
      if (r.status != 200) co_return report(r);
      auto v = json::parse(r.body);
      for (auto& e : v.at(key).as_array()) out.push_back(std::move(e));
      cursor = std::string(v.at("next").as_string());
    } while (!cursor.empty());
    co_return cli::exit_ok;
  }

  asio::awaitable<int> list_all(route_id id, std::string key) {
    json::array all;
    if (int rc = co_await fetch_all(id, key, all)) co_return rc;
    sort_by_name(all);
    if (json_) {
      json::object o;
      o[key] = std::move(all);
      std::cout << json::serialize(o) << "\n";
    } else if (id == route_id::queues) {
      std::cout << cli::render_queues(all);
    } else {
      std::cout << cli::render_feeds(all);
    }
    co_return cli::exit_ok;
  }

  asio::awaitable<int> jobs(const std::string& q) {
    std::map<std::string, std::string> query;
    query["state"] = inv_.get("state", "waiting");
    if (inv_.has("count")) query["count"] = inv_.get("count");
    if (inv_.has("cursor")) query["cursor"] = inv_.get("cursor");
    auto r = co_await call(route_id::jobs, one(q), std::move(query), std::string());
    if (r.status != 200) co_return report(r);
    if (json_) std::cout << r.body << "\n";
    else std::cout << cli::render_jobs(json::parse(r.body).as_object(), q);
    co_return cli::exit_ok;
  }

  /// A write: prints what was done ("retried", ...) or the answer (--json).
  asio::awaitable<int> act(route_id id, std::vector<std::string> params, std::string body) {
    auto r = co_await call(id, std::move(params), no_query(), std::move(body));
    if (r.status != 200) co_return report(r);
    if (json_) std::cout << r.body << "\n";
    else std::cout << cli::cell(json::parse(r.body).at("done")) << "\n";
    co_return cli::exit_ok;
  }

  std::string abort_body() const {
    json::object o;
    if (inv_.has("failed")) {
      o["outcome"] = "failed";
      o["permanent"] = inv_.has("permanent");
      o["error"] = inv_.get("error", "aborted with the thoonk command-line tool");
    }
    return json::serialize(o);
  }

  /// Every dead letter, a page (the admin server's batch) per call, in
  /// passes until one pass finds none to retry: a retry moves the job out
  /// of the set being scanned, which SSCAN may then skip over.
  asio::awaitable<int> retry_all_dead(const std::string& q) {
    std::int64_t retried = 0;
    json::array errors;
    for (int pass = 0; pass < 100; ++pass) {
      std::int64_t this_pass = 0;
      std::string cursor;
      do {
        json::object body;
        body["cursor"] = cursor;
        auto r = co_await call(route_id::retry_dead, one(q), no_query(), json::serialize(body));
        if (r.status != 200) co_return report(r);
        auto v = json::parse(r.body).as_object();
        this_pass += v.at("retried").as_int64();
        for (auto& e : v.at("errors").as_array()) errors.push_back(std::move(e));
        cursor = std::string(v.at("next").as_string());
      } while (!cursor.empty());
      retried += this_pass;
      if (this_pass == 0 || !errors.empty()) break;
    }
    if (json_) {
      json::object o;
      o["ok"] = errors.empty();
      o["retried"] = retried;
      o["errors"] = errors;
      std::cout << json::serialize(o) << "\n";
    } else {
      std::cout << "retried " << retried << "\n";
      for (const auto& e : errors)
        std::cerr << "thoonk: " << cli::terminal_safe(cli::cell(e.at("id"))) << ": "
                  << cli::terminal_safe(cli::cell(e.at("message"))) << "\n";
    }
    co_return errors.empty() ? cli::exit_ok : cli::exit_failed;
  }

  // ---- the library's operations -------------------------------------------

  asio::awaitable<int> put(const std::string& q, std::string item) {
    if (auto err = co_await api_.check_job_queue(q)) co_return report(*err);
    thoonk::put_options p;
    if (inv_.has("id")) p.id = inv_.get("id");
    if (inv_.has("delay")) p.delay = *cli::parse_duration(inv_.get("delay"));
    thoonk::job_queue jq(c_, q);
    thoonk::diagnostics diag;
    auto [ec, res] = co_await jq.async_put(std::move(item), std::move(p),
                                           thoonk::capture_diagnostics(diag, nothrow));
    if (ec) {
      std::cerr << cli::render_error("cannot put on '" + q + "'", ec, diag.server_message());
      co_return cli::exit_code_for_error(ec);
    }
    if (json_) {
      json::object o;
      o["id"] = res.id;
      const char* outcome = "added";
      if (res.outcome == thoonk::put_result::updated) outcome = "updated";
      if (res.outcome == thoonk::put_result::held) outcome = "held";
      o["outcome"] = outcome;
      std::cout << json::serialize(o) << "\n";
    } else {
      std::cout << cli::terminal_safe(res.id) << "\n";
    }
    co_return cli::exit_ok;
  }

  /// The feed's type ("feed" or "sorted_feed") through the API's item
  /// listing (one item): a missing name or a queue is its error answer.
  asio::awaitable<int> read_feed_type(const std::string& f, std::string& type) {
    auto r = co_await call(route_id::feed_items, one(f), one_item(), std::string());
    if (r.status != 200) co_return report(r);
    type = std::string(json::parse(r.body).at("type").as_string());
    co_return cli::exit_ok;
  }

  asio::awaitable<int> publish(const std::string& f, std::string item) {
    std::string type;
    if (int rc = co_await read_feed_type(f, type)) co_return rc;
    thoonk::diagnostics diag;
    std::tuple<boost::system::error_code, thoonk::publish_result> got;
    if (type == "sorted_feed") {
      if (inv_.has("id")) {
        std::cerr << "thoonk: a sorted feed makes its own ids: --id is for feeds\n";
        co_return cli::exit_usage;
      }
      thoonk::sorted_feed sf(c_, f);
      auto [ec, id] =
          co_await sf.async_append(std::move(item), thoonk::capture_diagnostics(diag, nothrow));
      std::get<0>(got) = ec;
      std::get<1>(got).id = id;
    } else {
      thoonk::feed fd(c_, f);
      if (inv_.has("id"))
        got = co_await fd.async_publish(thoonk::item_id(inv_.get("id")), std::move(item),
                                        thoonk::capture_diagnostics(diag, nothrow));
      else
        got =
            co_await fd.async_publish(std::move(item), thoonk::capture_diagnostics(diag, nothrow));
    }
    auto& [ec, res] = got;
    if (ec) {
      std::cerr << cli::render_error("cannot publish on '" + f + "'", ec, diag.server_message());
      co_return cli::exit_code_for_error(ec);
    }
    if (json_) {
      json::object o;
      o["id"] = res.id;
      o["edited"] = res.edited;
      std::cout << json::serialize(o) << "\n";
    } else {
      std::cout << cli::terminal_safe(res.id) << "\n";
    }
    co_return cli::exit_ok;
  }

  void on_feed_event(const thoonk::feed_event& e) {
    if (done_) return;
    const char* kind = "publish";
    if (e.kind == thoonk::feed_event::edit) kind = "edit";
    if (e.kind == thoonk::feed_event::retract) kind = "retract";
    if (e.kind == thoonk::feed_event::position) kind = "position";
    if (json_) {
      json::object o;
      o["event"] = kind;
      o["id"] = e.id;
      if (e.kind == thoonk::feed_event::publish || e.kind == thoonk::feed_event::edit)
        o["item"] = e.item;
      if (e.kind == thoonk::feed_event::position) o["position"] = e.where.to_string();
      o["replayed"] = e.replayed;
      std::cout << json::serialize(o) << "\n";
    } else {
      std::cout << kind << "  " << cli::terminal_safe(e.id);
      if (e.kind == thoonk::feed_event::publish || e.kind == thoonk::feed_event::edit)
        std::cout << "  " << cli::terminal_safe(e.item);
      if (e.kind == thoonk::feed_event::position)
        std::cout << "  " << cli::terminal_safe(e.where.to_string());
      std::cout << "\n";
    }
    std::cout.flush();
    ++events_;
    if (max_events_ != 0 && events_ >= max_events_) finish_wait();
  }

  void finish_wait() {
    done_ = true;
    wake_.cancel();
  }

  template <class Feed>
  asio::awaitable<int> follow(Feed f) {
    thoonk::feed_subscribe_options o;
    o.catch_up = true;
    if (inv_.has("from")) o.resume_from = *cli::parse_uint(inv_.get("from"));
    o.on_catch_up = [this](const thoonk::catch_up_info& info) {
      if (!info.error) return;
      std::cerr << cli::render_error("cannot follow the feed", info.error, {});
      tail_rc_ = cli::exit_code_for_error(info.error);
      finish_wait();
    };
    thoonk::diagnostics diag;
    auto [ec, sub] =
        co_await f.async_subscribe([this](const thoonk::feed_event& e) { on_feed_event(e); },
                                   std::move(o), thoonk::capture_diagnostics(diag, nothrow));
    if (ec) {
      std::cerr << cli::render_error("cannot follow '" + f.name() + "'", ec, diag.server_message());
      co_return cli::exit_code_for_error(ec);
    }
    while (!done_ && !stopping_) {
      wake_.expires_at(asio::steady_timer::time_point::max());
      co_await wake_.async_wait(nothrow);
    }
    sub.reset();
    co_return tail_rc_;
  }

  asio::awaitable<int> tail(const std::string& f) {
    if (inv_.has("count")) max_events_ = *cli::parse_uint(inv_.get("count"));
    std::string type;
    if (int rc = co_await read_feed_type(f, type)) co_return rc;
    if (type == "sorted_feed") co_return co_await follow(thoonk::sorted_feed(c_, f));
    co_return co_await follow(thoonk::feed(c_, f));
  }

  asio::awaitable<int> create(const std::string& name) {
    auto type = thoonk::feed_type_from_string(inv_.get("type", "job"));
    thoonk::diagnostics diag;
    auto [ec] =
        co_await c_.async_create_feed(name, *type, {}, thoonk::capture_diagnostics(diag, nothrow));
    if (ec) {
      std::cerr << cli::render_error("cannot create '" + name + "'", ec, diag.server_message());
      co_return cli::exit_code_for_error(ec);
    }
    if (json_) std::cout << "{\"ok\":true,\"done\":\"created\"}\n";
    else std::cout << "created\n";
    co_return cli::exit_ok;
  }

  asio::awaitable<int> top() {
    std::uint64_t iterations = 0;  // 0: until stopped
    if (inv_.has("once")) iterations = 1;
    if (inv_.has("iterations")) iterations = *cli::parse_uint(inv_.get("iterations"));
    const auto interval = *cli::parse_duration(inv_.get("interval", "2s"));
    const bool in_place = !json_ && ::isatty(STDOUT_FILENO) == 1;
    cli::rate_meter meter;
    const auto start = std::chrono::steady_clock::now();
    for (std::uint64_t n = 0; !stopping_;) {
      json::array queues;
      if (int rc = co_await fetch_all(route_id::queues, std::string("queues"), queues))
        co_return rc;
      sort_by_name(queues);
      const double now =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      const auto wall = std::chrono::duration_cast<std::chrono::milliseconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
      const std::string title = "thoonk top  " + cli::format_time(wall) + " UTC  " + url_;
      if (json_) {
        json::array out;
        cli::render_top(queues, meter, now, title, &out);
        json::object o;
        o["time"] = wall;
        o["queues"] = std::move(out);
        std::cout << json::serialize(o) << "\n";
      } else {
        auto frame = cli::render_top(queues, meter, now, title, nullptr);
        // In place on a terminal (cursor home, clear); frames one after
        // the other, a blank line apart, into a pipe or file.
        if (in_place) std::cout << "\x1b[H\x1b[2J" << frame;
        else std::cout << frame << "\n";
      }
      std::cout.flush();
      if (iterations != 0 && ++n >= iterations) break;
      wake_.expires_after(interval);
      co_await wake_.async_wait(nothrow);
    }
    co_return cli::exit_ok;
  }

  asio::awaitable<int> dashboard() {
    thoonk::admin::options o;
    auto where = *cli::parse_listen(inv_.get("listen", "127.0.0.1:8089"));
    o.address = where.host;
    o.port = where.port;
    o.read_only = inv_.has("read-only");
    const char* env_token = std::getenv("THOONK_ADMIN_TOKEN");
    o.token = inv_.get("token", env_token ? env_token : "");
    thoonk::admin::server srv(c_, o);
    if (auto ec = srv.listen()) {
      std::cerr << cli::render_error(
          "cannot serve the dashboard on " + where.host + ":" + std::to_string(where.port), ec, {});
      co_return ec.category() == thoonk::admin::admin_category() ? cli::exit_usage
                                                                 : cli::exit_failed;
    }
    std::ostringstream url;
    url << "http://" << srv.local_endpoint() << "/";
    std::cout << "dashboard: " << url.str() << std::endl;
    if (stopping_) co_return cli::exit_ok;
    auto [ec] = co_await srv.async_run(asio::bind_cancellation_slot(stop_.slot(), nothrow));
    if (ec && ec != asio::error::operation_aborted) {
      std::cerr << cli::render_error("the dashboard stopped", ec, {});
      co_return cli::exit_failed;
    }
    co_return cli::exit_ok;
  }

  asio::io_context& ioc_;
  cli::invocation inv_;
  std::string url_;
  bool json_;
  thoonk::client c_;
  thoonk::admin::options admin_opts_;
  thoonk::admin::detail::api api_;
  asio::signal_set signals_;
  asio::steady_timer wake_;
  asio::cancellation_signal stop_;
  std::string server_message_;
  bool stopping_ = false;
  bool done_ = false;
  std::uint64_t events_ = 0;
  std::uint64_t max_events_ = 0;
  int tail_rc_ = cli::exit_ok;
  int rc_ = cli::exit_failed;
};

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  auto parsed = cli::parse_command_line(args);
  if (!parsed.inv) {
    std::cerr << "thoonk: " << parsed.error << "\n";
    if (parsed.command) std::cerr << cli::usage_line(*parsed.command) << "\n";
    std::cerr << "Run 'thoonk " << (parsed.command ? parsed.command->name + " " : "")
              << "--help' for help.\n";
    return cli::exit_usage;
  }
  auto& inv = *parsed.inv;
  if (inv.help) {
    std::cout << cli::help_text(parsed.command);
    return cli::exit_ok;
  }
  if (inv.has("version")) {
    std::cout << "thoonk " << THOONK_VERSION_STRING << " (library " << thoonk::version() << ")\n";
    return cli::exit_ok;
  }

  std::string url = inv.get("url");
  if (url.empty()) {
    const char* env = std::getenv("THOONK_REDIS_URL");
    url = env && *env ? env : "redis://127.0.0.1:6379";
  }
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url(url, ec);
  if (ec) {
    std::cerr << cli::render_error("invalid --url / THOONK_REDIS_URL", ec, {});
    return cli::exit_usage;
  }
  const auto timeout = *cli::parse_duration(inv.get("timeout", "10s"));
  cfg.client_name = "thoonk-cli";
  cfg.connect_timeout = timeout;
  cfg.request_timeout = timeout;

  asio::io_context ioc;
  app a(ioc, std::move(inv), std::move(cfg), cli::redact_url(url));
  asio::co_spawn(ioc, a.run(), [](std::exception_ptr e) {
    if (e) std::rethrow_exception(e);
  });
  ioc.run();
  return a.exit_code();
}
