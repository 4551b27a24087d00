// The `thoonk` tool's decisions without I/O (tools/thoonk/cli.hpp): the
// command line, durations and addresses, exit codes, and what it prints.
#include "cli.hpp"

#include <thoonk/error.hpp>

#include <catch2/catch.hpp>

#include <boost/asio/error.hpp>
#include <boost/json.hpp>

using namespace thoonk::cli;
namespace json = boost::json;
using namespace std::chrono_literals;

namespace {
parse_result parse(std::vector<std::string> a) { return parse_command_line(a); }
}  // namespace

TEST_CASE("cli_unit: commands, arguments and options", "[cli-unit]") {
  auto r = parse({"jobs", "orders", "--state", "dead", "--count=20", "--json"});
  REQUIRE(r.inv);
  CHECK(r.inv->command == "jobs");
  CHECK(r.inv->args == std::vector<std::string>{"orders"});
  CHECK(r.inv->get("state") == "dead");
  CHECK(r.inv->get("count") == "20");
  CHECK(r.inv->has("json"));
  CHECK_FALSE(r.inv->has("cursor"));
  CHECK(r.inv->get("cursor", "x") == "x");

  // Global options before the command; a command's own after it.
  r = parse({"--url", "redis://h:1", "put", "q", "item", "--delay", "5m"});
  REQUIRE(r.inv);
  CHECK(r.inv->get("url") == "redis://h:1");
  CHECK(r.inv->get("delay") == "5m");
  r = parse({"--delay", "5m", "put", "q", "item"});
  CHECK_FALSE(r.inv);
  CHECK(r.error.find("unknown option --delay") != std::string::npos);

  // Two-word commands.
  r = parse({"feed", "tail", "news", "--count", "3"});
  REQUIRE(r.inv);
  CHECK(r.inv->command == "feed tail");
  CHECK(r.inv->args == std::vector<std::string>{"news"});
  r = parse({"feed", "publish", "news", "hello"});
  REQUIRE(r.inv);
  CHECK(r.inv->command == "feed publish");
  r = parse({"feed", "list"});
  CHECK_FALSE(r.inv);
  CHECK(r.error.find("tail") != std::string::npos);

  // `--` lets an item start with dashes.
  r = parse({"put", "q", "--", "--not-an-option"});
  REQUIRE(r.inv);
  CHECK(r.inv->args.at(1) == "--not-an-option");

  // Help, alone and per command; it wins over missing arguments.
  r = parse({"--help"});
  REQUIRE(r.inv);
  CHECK(r.inv->help);
  CHECK(r.inv->command.empty());
  r = parse({"--version"});
  REQUIRE(r.inv);
  CHECK(r.inv->has("version"));
  r = parse({"job", "-h"});
  REQUIRE(r.inv);
  CHECK(r.inv->help);
  CHECK(r.command == find_command("job"));
}

TEST_CASE("cli_unit: usage errors say what is wrong", "[cli-unit]") {
  struct bad {
    std::vector<std::string> argv;
    std::string says;
  };
  const std::vector<bad> cases{
      {{}, "no command given"},
      {{"nope"}, "unknown command 'nope'"},
      {{"jobs"}, "missing argument for `thoonk jobs`"},
      {{"job", "q", "id", "extra"}, "too many arguments"},
      {{"jobs", "q", "--state"}, "--state needs a value"},
      {{"queues", "--json=yes"}, "--json takes no value"},
      {{"queues", "--color"}, "unknown option --color"},
      {{"retry", "q"}, "give a job ID or --all-dead"},
      {{"retry", "q", "id", "--all-dead"}, "not both"},
      {{"abort", "q", "id", "--permanent"}, "go with --failed"},
      {{"top", "--once", "--iterations", "2"}, "not both"},
      {{"put", "q", "x", "--delay", "tomorrow"}, "--delay takes a duration"},
      {{"top", "--interval", "0"}, "--interval takes a duration"},
      {{"queues", "--timeout", "-1s"}, "--timeout takes a duration"},
      {{"feed", "tail", "f", "--count", "0"}, "--count takes a whole number"},
      {{"feed", "tail", "f", "--from", "x"}, "--from takes a cursor"},
      {{"top", "--iterations", "many"}, "--iterations takes"},
      {{"dashboard", "--listen", "::1"}, "--listen takes"},
      {{"create", "x", "--type", "list"}, "--type takes"},
  };
  for (const auto& c : cases) {
    INFO(c.says);
    auto r = parse(c.argv);
    CHECK_FALSE(r.inv);
    CHECK(r.error.find(c.says) != std::string::npos);
  }
  // The command is known for its usage line.
  auto r = parse({"jobs"});
  REQUIRE(r.command);
  CHECK(usage_line(*r.command) == "usage: thoonk jobs Q [options]");
}

TEST_CASE("cli_unit: help texts", "[cli-unit]") {
  const auto all = help_text(nullptr);
  for (const auto& c : commands()) CHECK(all.find("  " + c.name) != std::string::npos);
  CHECK(all.find("Exit codes: 0 ok, 1 not found, 2 usage") != std::string::npos);
  for (const auto& c : commands()) {
    const auto h = help_text(&c);
    CHECK(h.rfind(usage_line(c), 0) == 0);
    for (const auto& o : c.options) CHECK(h.find("--" + o.name) != std::string::npos);
    CHECK(h.find("--url") != std::string::npos);
  }
}

TEST_CASE("cli_unit: durations, counts, cursors and listen addresses", "[cli-unit]") {
  CHECK(parse_duration("500ms") == 500ms);
  CHECK(parse_duration("10s") == 10s);
  CHECK(parse_duration("10") == 10s);
  CHECK(parse_duration("5m") == 5min);
  CHECK(parse_duration("2h") == 2h);
  CHECK(parse_duration("0") == 0ms);
  CHECK_FALSE(parse_duration(""));
  CHECK_FALSE(parse_duration("-5s"));
  CHECK_FALSE(parse_duration("5d"));
  CHECK_FALSE(parse_duration("s"));
  CHECK_FALSE(parse_duration("10000h"));  // beyond a year

  CHECK(parse_count("1", 10) == 1u);
  CHECK(parse_count("10", 10) == 10u);
  CHECK_FALSE(parse_count("0", 10));
  CHECK_FALSE(parse_count("11", 10));
  CHECK_FALSE(parse_count("3x", 10));
  CHECK(parse_uint("0") == 0u);
  CHECK_FALSE(parse_uint(""));
  CHECK_FALSE(parse_uint("-1"));

  auto a = parse_listen("0.0.0.0:9000");
  REQUIRE(a);
  CHECK(a->host == "0.0.0.0");
  CHECK(a->port == 9000);
  a = parse_listen("[::1]:0");
  REQUIRE(a);
  CHECK(a->host == "::1");
  CHECK(a->port == 0);
  a = parse_listen(":7000");
  REQUIRE(a);
  CHECK(a->host == "127.0.0.1");
  CHECK(a->port == 7000);
  a = parse_listen("10.0.0.1");
  REQUIRE(a);
  CHECK(a->port == 8089);
  CHECK_FALSE(parse_listen(""));
  CHECK_FALSE(parse_listen("h:70000"));
  CHECK_FALSE(parse_listen("h:"));
  CHECK_FALSE(parse_listen("::1"));
  CHECK_FALSE(parse_listen("[::1"));
}

TEST_CASE("cli_unit: exit codes", "[cli-unit]") {
  CHECK(exit_code_for_answer(200, "{}") == exit_ok);
  CHECK(exit_code_for_answer(404, "") == exit_not_found);
  CHECK(exit_code_for_answer(400, "") == exit_usage);
  CHECK(exit_code_for_answer(403, "") == exit_unreachable);
  CHECK(exit_code_for_answer(503, "") == exit_unreachable);
  CHECK(exit_code_for_answer(409, "") == exit_failed);
  CHECK(exit_code_for_answer(502, R"({"error":{"code":"server_error","message":"m"}})") ==
        exit_failed);
  CHECK(exit_code_for_answer(
            502, R"({"error":{"code":"server_error","message":"m","server":"NOPERM User x"}})") ==
        exit_unreachable);

  using thoonk::error;
  CHECK(exit_code_for_error({}) == exit_ok);
  CHECK(exit_code_for_error(error::job_not_found) == exit_not_found);
  CHECK(exit_code_for_error(error::feed_not_found) == exit_not_found);
  CHECK(exit_code_for_error(error::invalid_id) == exit_usage);
  CHECK(exit_code_for_error(error::auth_failed) == exit_unreachable);
  CHECK(exit_code_for_error(error::no_key_permission) == exit_unreachable);
  CHECK(exit_code_for_error(error::connect_timeout) == exit_unreachable);
  CHECK(exit_code_for_error(error::job_not_stalled) == exit_failed);
  CHECK(exit_code_for_error(error::feed_exists) == exit_failed);
  CHECK(exit_code_for_error(boost::asio::error::connection_refused) == exit_unreachable);
}

TEST_CASE("cli_unit: terminal safety, URLs and tables", "[cli-unit]") {
  CHECK(terminal_safe("plain <b>text</b>") == "plain <b>text</b>");
  CHECK(terminal_safe("a\x1b[2Jb") == "a\\x1b[2Jb");
  CHECK(terminal_safe("l1\nl2\t\\") == "l1\\nl2\\t\\\\");
  CHECK(terminal_safe(std::string("\0x", 2)) == "\\x00x");
  CHECK(terminal_safe("caf\xC3\xA9") == "caf\xC3\xA9");

  CHECK(clip("abcdef", 4) == "abc\xE2\x80\xA6");
  CHECK(clip("abc", 4) == "abc");
  CHECK(clip("\xC3\xA9\xC3\xA9\xC3\xA9", 3) == "\xC3\xA9\xC3\xA9\xC3\xA9");

  CHECK(redact_url("redis://user:secret@h:6379/0") == "redis://user:***@h:6379/0");
  CHECK(redact_url("rediss://:secret@h") == "rediss://:***@h");
  CHECK(redact_url("redis://h:6379") == "redis://h:6379");
  CHECK(redact_url("unix:///tmp/r.sock?password=pw&db=1") ==
        "unix:///tmp/r.sock?password=***&db=1");

  CHECK(format_table({"A", "LONGER"}, {{"xxxx", "1"}, {"y"}}) ==
        "A     LONGER\n"
        "xxxx  1\n"
        "y\n");
  // A cell's control characters are escaped, and the columns still align.
  CHECK(format_table({"ID", "ITEM"}, {{"a\nb", "x"}}) ==
        "ID    ITEM\n"
        "a\\nb  x\n");

  CHECK(cell(json::value("s")) == "s");
  CHECK(cell(json::value(nullptr)).empty());
  CHECK(cell(json::value(42)) == "42");
  CHECK(cell(json::value(true)) == "true");
  CHECK(format_time(0).empty());
  CHECK(format_time(1700000000123) == "2023-11-14 22:13:20.123");
}

TEST_CASE("cli_unit: rendering the API's answers", "[cli-unit]") {
  auto queues = json::parse(R"([{"name":"orders","type":"job","paused":true,"workers":2,
      "counts":{"waiting":5,"claimed":1,"scheduled":0,"dead":3,"held":0,"puts":9,"finishes":4}},
      {"name":"plain","type":"queue","paused":false,"workers":0,"counts":{"waiting":7,"puts":7}}])")
                    .as_array();
  auto t = render_queues(queues);
  CHECK(t.rfind("NAME    TYPE   WAITING  CLAIMED  SCHEDULED  DEAD  HELD  WORKERS  PAUSED", 0) == 0);
  CHECK(t.find("orders  job    5        1        0          3     0     2        yes") !=
        std::string::npos);
  CHECK(t.find("plain   queue  7        -") != std::string::npos);

  auto page = json::parse(R"({"state":"dead","next":"40","jobs":[{"id":"j1","state":"dead",
      "failures":2,"run_at":0,"last_error":"boom","item":"payload"}]})")
                  .as_object();
  auto j = render_jobs(page, "orders");
  CHECK(j.find("j1  dead   2") != std::string::npos);
  CHECK(j.find("boom") != std::string::npos);
  CHECK(j.find("(more: thoonk jobs orders --state dead --cursor 40)") != std::string::npos);
  page["next"] = "";
  CHECK(render_jobs(page, "orders").find("(more") == std::string::npos);

  auto job = json::parse(R"({"id":"j1","state":"claimed","item":"x","failures":0,
      "worker":"w-1","claimed_at":1700000000000,"held":false})")
                 .as_object();
  auto d = render_job(job);
  CHECK(d.find("id:") == 0);
  CHECK(d.find("worker:") != std::string::npos);
  CHECK(d.find("w-1") != std::string::npos);
  CHECK(d.find("2023-11-14 22:13:20.000") != std::string::npos);

  auto workers = json::parse(R"([{"name":"w-1","alive":true,"last_heartbeat":1700000000000,
      "lapses_at":1700000030000,"claims":["a","b"],"description":"host 1"}])")
                     .as_array();
  CHECK(render_workers(workers).find("w-1   yes    2023-11-14 22:13:20.000") != std::string::npos);
  CHECK(render_workers(workers).find("a,b") != std::string::npos);

  auto feeds =
      json::parse(R"([{"name":"news","type":"feed","length":3,"publishes":10}])").as_array();
  CHECK(render_feeds(feeds) == "NAME  TYPE  LENGTH  PUBLISHES\nnews  feed  3       10\n");

  CHECK(render_api_error(R"({"error":{"code":"job_not_found","message":"no job 'x'"}})") ==
        "thoonk: no job 'x'\n");
  CHECK(
      render_api_error(
          R"({"error":{"code":"server_error","message":"Redis refused a read","server":"NOPERM no"}})") ==
      "thoonk: Redis refused a read\nthoonk: server said: NOPERM no\n");
  CHECK(render_api_error("not json") == "thoonk: not json\n");
  CHECK(render_error("cannot connect", thoonk::error::auth_failed, "WRONGPASS bad")
            .find("thoonk: server said: WRONGPASS bad\n") != std::string::npos);
}

TEST_CASE("cli_unit: rates of top", "[cli-unit]") {
  rate_meter m;
  auto r = m.sample("q", 10.0, 100, 50);
  CHECK(r.puts == 0);
  r = m.sample("q", 12.0, 120, 56);
  CHECK(r.puts == Approx(10.0));
  CHECK(r.finishes == Approx(3.0));
  r = m.sample("q", 13.0, 5, 1);  // re-created: counters went back
  CHECK(r.puts == 0);
  r = m.sample("q", 14.0, 6, 2);
  CHECK(r.puts == Approx(1.0));

  rate_meter m2;
  auto queues = json::parse(R"([{"name":"q","paused":false,"workers":1,
      "counts":{"waiting":1,"claimed":0,"scheduled":0,"dead":0,"puts":10,"finishes":0}}])")
                    .as_array();
  json::array out;
  auto frame = render_top(queues, m2, 0.0, "title", &out);
  CHECK(frame.rfind("title\nQUEUE", 0) == 0);
  queues[0].as_object()["counts"].as_object()["puts"] = 30;
  out.clear();
  frame = render_top(queues, m2, 2.0, "title", &out);
  CHECK(frame.find("10.0") != std::string::npos);
  CHECK(out.at(0).at("puts_per_second").as_double() == Approx(10.0));
}
