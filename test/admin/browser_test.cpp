// The dashboard in a real browser: headless Chromium driven through
// chromedriver's WebDriver HTTP protocol (W3C), against the admin server and
// a real redis-server holding jobs in every state. Real clicks change real
// jobs; the hostile item must show as text; every view is saved as a PNG
// (THOONK_ADMIN_SCREENSHOTS, else ./admin-screenshots); any console error
// or alert fails the test. chromedriver is started on a free loopback port
// and stopped by its pid; Chromium is its child and ends with the session.
#include "admin/admin_fixture.hpp"

#include "support/child_process.hpp"

#include <boost/beast/core/detail/base64.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace thoonk::test;
using namespace thoonk::test::admin;
using thoonk::test::run_coro;

namespace {

constexpr const char* element_key = "element-6066-11e4-a52e-4f735466cecf";

unsigned short free_port() {
  asio::io_context ioc;
  asio::ip::tcp::acceptor a(ioc, {asio::ip::make_address("127.0.0.1"), 0});
  return a.local_endpoint().port();
}

std::string find_program(const std::vector<std::string>& names) {
  for (const auto& n : names)
    if (std::filesystem::exists(n)) return n;
  throw std::runtime_error("not installed: " + names.front() +
                           " (Debian packages chromium and chromium-driver; scripts/common.sh "
                           "installs them)");
}

std::string css_string(const std::string& s) {
  std::string out = "\"";
  for (char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    out += ch;
  }
  return out + "\"";
}

// A WebDriver session on chromedriver (the W3C protocol over HTTP).
class webdriver {
 public:
  explicit webdriver(unsigned short port) : port_(port) {}

  // One command; a WebDriver error answer throws with its message.
  asio::awaitable<json::value> cmd(http::verb method, std::string path, json::value body) {
    std::string text;
    if (method == http::verb::post) text = json::serialize(body);
    auto r = co_await call_for(port_, method, path, std::move(text), {}, 60);
    if (r.status != 200) {
      std::string msg = r.body.substr(0, 500);
      throw std::runtime_error("WebDriver " + path + ": HTTP " + std::to_string(r.status) + " " +
                               msg);
    }
    co_return r.json.at("value");
  }
  // The same, answering the HTTP status instead of throwing.
  asio::awaitable<unsigned> status_of(http::verb method, std::string path) {
    std::string text;
    if (method == http::verb::post) text = "{}";
    auto r = co_await call_for(port_, method, path, std::move(text), {}, 60);
    co_return r.status;
  }

  asio::awaitable<void> wait_ready() {
    for (int i = 0; i < 200; ++i) {
      try {
        auto r = co_await call_for(port_, http::verb::get, "/status", {}, {}, 2);
        if (r.status == 200 && r.json.at("value").at("ready").as_bool()) co_return;
      } catch (const std::exception&) {
        // not listening yet
      }
      co_await sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("chromedriver did not become ready within 20 s");
  }

  asio::awaitable<void> start(const std::string& chromium) {
    json::object opts;
    opts["binary"] = chromium;
    opts["args"] =
        json::array{"--headless=new",          "--no-sandbox",           "--disable-gpu",
                    "--disable-dev-shm-usage", "--window-size=1280,900", "--no-first-run",
                    "--disable-extensions"};
    json::object always;
    always["browserName"] = "chrome";
    always["goog:chromeOptions"] = opts;
    json::object logging;
    logging["browser"] = "ALL";
    always["goog:loggingPrefs"] = logging;
    json::object caps;
    caps["alwaysMatch"] = always;
    json::object body;
    body["capabilities"] = caps;
    auto v = co_await cmd(http::verb::post, "/session", body);
    session_ = std::string(v.at("sessionId").as_string());
  }

  asio::awaitable<void> quit() {
    if (session_.empty()) co_return;
    co_await status_of(http::verb::delete_, "/session/" + session_);
    session_.clear();
  }

  std::string s(const std::string& rest) const { return "/session/" + session_ + rest; }

  asio::awaitable<void> go(const std::string& url) {
    json::object b;
    b["url"] = url;
    co_await cmd(http::verb::post, s("/url"), b);
  }

  asio::awaitable<std::vector<std::string>> find_all(const std::string& css) {
    json::object b;
    b["using"] = "css selector";
    b["value"] = css;
    auto v = co_await cmd(http::verb::post, s("/elements"), b);
    std::vector<std::string> out;
    for (const auto& e : v.as_array()) out.emplace_back(e.at(element_key).as_string());
    co_return out;
  }

  // Waits (10 s at most) for an element matching `css`; throws if none.
  asio::awaitable<std::string> find(const std::string& css) {
    for (int i = 0; i < 100; ++i) {
      auto all = co_await find_all(css);
      if (!all.empty()) co_return all.front();
      co_await sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error("no element matches " + css + " within 10 s");
  }

  // Waits (10 s at most) until nothing matches `css`.
  asio::awaitable<bool> gone(const std::string& css) {
    for (int i = 0; i < 100; ++i) {
      auto all = co_await find_all(css);
      if (all.empty()) co_return true;
      co_await sleep_for(std::chrono::milliseconds(100));
    }
    co_return false;
  }

  asio::awaitable<std::string> text(const std::string& element) {
    auto v = co_await cmd(http::verb::get, s("/element/" + element + "/text"), nullptr);
    co_return std::string(v.as_string());
  }

  // Waits (10 s at most) until the first element matching `css` has text
  // `want`; answers the text last seen.
  asio::awaitable<std::string> wait_text(const std::string& css, const std::string& want) {
    std::string last;
    for (int i = 0; i < 100; ++i) {
      auto all = co_await find_all(css);
      if (!all.empty()) {
        last = co_await text(all.front());
        if (last == want) co_return last;
      }
      co_await sleep_for(std::chrono::milliseconds(100));
    }
    co_return last;
  }

  asio::awaitable<void> click(const std::string& css) {
    auto e = co_await find(css);
    co_await cmd(http::verb::post, s("/element/" + e + "/click"), json::object{});
  }

  asio::awaitable<void> clear(const std::string& css) {
    auto e = co_await find(css);
    co_await cmd(http::verb::post, s("/element/" + e + "/clear"), json::object{});
  }

  asio::awaitable<void> type(const std::string& css, const std::string& text) {
    auto e = co_await find(css);
    json::object b;
    b["text"] = text;
    co_await cmd(http::verb::post, s("/element/" + e + "/value"), b);
  }

  // Saves a screenshot of the page as `name`.png in `dir`.
  asio::awaitable<void> screenshot(const std::filesystem::path& dir, const std::string& name) {
    auto v = co_await cmd(http::verb::get, s("/screenshot"), nullptr);
    const auto& b64 = v.as_string();
    std::string png(boost::beast::detail::base64::decoded_size(b64.size()), '\0');
    auto [written, read] = boost::beast::detail::base64::decode(png.data(), b64.data(), b64.size());
    png.resize(written);
    std::ofstream(dir / (name + ".png"), std::ios::binary) << png;
  }

  // The browser's console messages since the last call (chromedriver's
  // log endpoint), as "LEVEL message" lines.
  asio::awaitable<std::vector<std::string>> console() {
    json::object b;
    b["type"] = "browser";
    auto v = co_await cmd(http::verb::post, s("/se/log"), b);
    std::vector<std::string> out;
    for (const auto& e : v.as_array())
      out.push_back(std::string(e.at("level").as_string()) + " " +
                    std::string(e.at("message").as_string()));
    co_return out;
  }

  // The text of an open alert, or "" when none is open.
  asio::awaitable<std::string> alert_text() {
    auto r = co_await call_for(port_, http::verb::get, s("/alert/text"), {}, {}, 10);
    if (r.status != 200) co_return std::string();
    co_return std::string(r.json.at("value").as_string());
  }

 private:
  unsigned short port_;
  std::string session_;
};

std::filesystem::path screenshot_dir() {
  const char* d = std::getenv("THOONK_ADMIN_SCREENSHOTS");
  std::filesystem::path p = d && *d ? d : "admin-screenshots";
  std::filesystem::create_directories(p);
  return p;
}

}  // namespace

TEST_CASE(
    "admin dashboard in headless Chromium: real clicks, hostile items as text, no "
    "console errors",
    "[admin][browser]") {
  const auto chromium = find_program({"/usr/bin/chromium", "/usr/bin/chromium-browser"});
  const auto driver_bin = find_program({"/usr/bin/chromedriver"});
  const auto shots = screenshot_dir();
  const auto driver_port = free_port();
  thoonk::test::child_process driver(driver_bin, {"--port=" + std::to_string(driver_port)});
  asio::io_context ioc;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        thoonk::client c(ioc.get_executor(), test_config());
        co_await c.async_connect(asio::use_awaitable);
        auto s = co_await seed(c);
        running_server srv(c, {});
        const std::string base = "http://127.0.0.1:" + std::to_string(srv.port()) + "/";
        webdriver wd(driver_port);
        co_await wd.wait_ready();
        co_await wd.start(chromium);
        std::vector<std::string> console;
        auto collect = [&]() -> asio::awaitable<void> {
          auto lines = co_await wd.console();
          for (auto& line : lines) console.push_back(line);
        };
        std::exception_ptr failure;
        try {
          auto q = co_await thoonk::job_queue::async_open(c, s.jobs, asio::use_awaitable);
          auto state_of = [&](std::string id) -> asio::awaitable<std::string> {
            auto j = co_await q.async_get_job(id, asio::use_awaitable);
            if (!j) co_return std::string("gone");
            co_return std::to_string(static_cast<int>(j->state));
          };
          const std::string waiting = std::to_string(static_cast<int>(thoonk::job_state::waiting));
          const std::string row = "tr[data-queue=" + css_string(s.jobs) + "]";

          // Queues: counts per state.
          co_await wd.go(base + "#queues");
          auto dead_count = co_await wd.wait_text(row + " td.dead", "1");
          CHECK(dead_count == "1");
          auto waiting_count = co_await wd.wait_text(row + " td.waiting", "3");
          CHECK(waiting_count == "3");
          auto scheduled_count = co_await wd.wait_text(row + " td.scheduled", "1");
          CHECK(scheduled_count == "1");
          co_await wd.screenshot(shots, "queues");

          // Dead letters: a click on Retry moves d1 to waiting.
          const std::string qpath = base + "#queue/" + s.jobs;
          co_await wd.go(qpath + "/dead");
          co_await wd.find("tr[data-job=\"d1\"]");
          auto err = co_await wd.wait_text("tr[data-job=\"d1\"] td.error", "boom");
          CHECK(err == "boom");
          co_await wd.screenshot(shots, "dead");
          co_await wd.click("tr[data-job=\"d1\"] button.act-retry");
          bool left = co_await wd.gone("tr[data-job=\"d1\"]");
          CHECK(left);
          auto d1 = co_await state_of("d1");
          CHECK(d1 == waiting);

          // Pause shows paused (and the queue is paused); resume again.
          auto running = co_await wd.wait_text("#queue-status", "running");
          CHECK(running == "running");
          co_await wd.click("#pause-btn");
          auto paused = co_await wd.wait_text("#queue-status", "paused");
          CHECK(paused == "paused");
          auto settings = co_await q.async_read_settings(asio::use_awaitable);
          CHECK(settings.paused == true);
          co_await wd.screenshot(shots, "paused");
          co_await wd.click("#pause-btn");
          auto resumed = co_await wd.wait_text("#queue-status", "running");
          CHECK(resumed == "running");
          auto settings2 = co_await q.async_read_settings(asio::use_awaitable);
          CHECK(!settings2.paused.value_or(false));

          // Rate limit: typed and set.
          co_await wd.clear("#rate-input");
          co_await wd.type("#rate-input", "25");
          co_await wd.click("#rate-btn");
          bool limited = co_await wait_until(
              [&]() -> asio::awaitable<bool> {
                auto st = co_await q.async_read_settings(asio::use_awaitable);
                co_return st.rate_limit.value_or(0) == 25;
              },
              10s);
          CHECK(limited);

          // Scheduled: "Run now" makes s1 waiting.
          co_await wd.go(qpath + "/scheduled");
          co_await wd.find("tr[data-job=\"s1\"]");
          co_await wd.screenshot(shots, "scheduled");
          co_await wd.click("tr[data-job=\"s1\"] button.act-promote");
          bool promoted = co_await wd.gone("tr[data-job=\"s1\"]");
          CHECK(promoted);
          auto s1 = co_await state_of("s1");
          CHECK(s1 == waiting);

          // Waiting: the hostile item is text, and no element came of it.
          co_await wd.go(qpath + "/waiting");
          auto shown = co_await wd.wait_text("tr[data-job=\"wx\"] td.item", hostile);
          CHECK(shown == hostile);
          auto imgs = co_await wd.find_all("img");
          CHECK(imgs.empty());
          co_await wd.screenshot(shots, "waiting");

          // Search by id opens the detail view.
          co_await wd.type("#search-id", "c1");
          co_await wd.click("#search-form button");
          auto id_shown = co_await wd.wait_text(".job-id", "c1");
          CHECK(id_shown == "c1");
          // The id shows before the rest of the view is filled in: wait for it.
          std::string detail_text;
          for (int i = 0; i < 100; ++i) {
            auto detail = co_await wd.find("#job-detail");
            detail_text = co_await wd.text(detail);
            if (detail_text.find("being worked on") != std::string::npos) break;
            co_await sleep_for(std::chrono::milliseconds(100));
          }
          CHECK(detail_text.find("claimed") != std::string::npos);
          CHECK(detail_text.find("being worked on") != std::string::npos);
          co_await wd.screenshot(shots, "job");

          // Feeds, and a feed's newest items, the hostile one as text.
          co_await wd.go(base + "#feeds");
          co_await wd.find("tr[data-feed=" + css_string(s.feed) + "]");
          co_await wd.screenshot(shots, "feeds");
          co_await wd.go(base + "#feed/" + s.feed);
          auto news = co_await wd.wait_text("tr[data-item=\"n3\"] td.item", hostile);
          CHECK(news == hostile);
          auto imgs2 = co_await wd.find_all("img");
          CHECK(imgs2.empty());
          co_await wd.screenshot(shots, "feed");

          // Live updates: the queue view of a queue with the events setting
          // holds an event stream open (the page marks it), and a put shows.
          const std::string live_name = unique_name("adm-live");
          thoonk::job_queue::settings live_set;
          live_set.events = true;
          auto live = co_await thoonk::job_queue::async_create_or_open(c, live_name, live_set,
                                                                       asio::use_awaitable);
          co_await wd.go(base + "#queue/" + live_name + "/waiting");
          co_await wd.find("#view[data-live=\"on\"]");
          thoonk::put_options lp;
          lp.id = "live1";
          co_await live.async_put("arrived live", lp, asio::use_awaitable);
          auto live_item = co_await wd.wait_text("tr[data-job=\"live1\"] td.item", "arrived live");
          CHECK(live_item == "arrived live");

          // "Retry all dead" retries every dead letter, in bounded steps.
          thoonk::fail_options perm;
          perm.permanent = true;
          for (int i = 0; i < 3; ++i) {
            co_await live.async_put("doomed", asio::use_awaitable);
            auto doomed = co_await live.async_claim(1s, asio::use_awaitable);
            co_await live.async_fail(doomed, "bad", perm, asio::use_awaitable);
          }
          co_await wd.go(base + "#queue/" + live_name + "/dead");
          co_await wd.find("#jobs-table tbody tr");
          co_await wd.click("#retry-all-btn");
          bool all_retried = co_await wait_until(
              [&]() -> asio::awaitable<bool> {
                auto n = co_await live.async_counts(asio::use_awaitable);
                co_return n.stalled == 0;
              },
              10s);
          CHECK(all_retried);
          bool table_empty = co_await wd.gone("#jobs-table tbody tr");
          CHECK(table_empty);

          // No alert ran, and the console has no error.
          auto alert = co_await wd.alert_text();
          CHECK(alert.empty());
          // A probe error of our own proves the console log is read: it
          // must come back, and nothing else may be an error.
          json::object script;
          script["script"] = "console.error('thoonk-admin-probe'); return 1;";
          script["args"] = json::array{};
          co_await wd.cmd(http::verb::post, wd.s("/execute/sync"), script);
          co_await collect();
          bool probe_seen = false;
          for (const auto& line : console) {
            if (line.find("thoonk-admin-probe") != std::string::npos) {
              probe_seen = true;
              continue;
            }
            INFO("console: " << line);
            CHECK(line.rfind("SEVERE", 0) != 0);
          }
          CHECK(probe_seen);
        } catch (...) {
          failure = std::current_exception();
        }
        // Leave no browser behind, then fail with the original error.
        co_await wd.quit();
        co_await srv.stop();
        if (failure) std::rethrow_exception(failure);
      },
      std::chrono::seconds(180));
  auto rc_ioc = asio::io_context();
  int rc = -1;
  run_coro(rc_ioc, [&]() -> asio::awaitable<void> { rc = co_await driver.stop(5s); });
  CHECK(rc != -1);
}
