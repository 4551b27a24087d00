// thoonk::diagnostics through capture_diagnostics: the server's own text for
// server_error, script_error, subscribe_refused and ACL refusals reaches
// the caller of a typed operation, with every kind of completion token, and
// an operation that does not fail on the server leaves it empty.
#include "support/helpers.hpp"

#include <boost/asio/deferred.hpp>

using namespace thoonk::test;
using E = thoonk::error;

namespace {

// A feed listed in `feeds` whose config hash is a string: every read of
// its config is refused by the server with WRONGTYPE.
asio::awaitable<std::string> broken_feed(thoonk::connection& admin) {
  auto name = unique_name("diag");
  co_await cmd(admin, "SADD", "feeds", name);
  co_await cmd(admin, "SET", key("config", name), "not a hash");
  co_return name;
}

// Runs `body(f, name)` (a coroutine) with a connected fixture and a broken
// feed `name`.
template <class Body>
void on_broken_feed(Body body) {
  fixture f("diag");
  f.run_connected(
      [&]() -> asio::awaitable<void> { co_await body(f, co_await broken_feed(f.c.conn())); });
}

}  // namespace

TEST_CASE("diagnostics: a server error reply's text reaches the caller of a typed operation",
          "[diagnostics][get_config][feed_exists]") {
  on_broken_feed([](fixture& f, std::string name) -> asio::awaitable<void> {
    thoonk::diagnostics diag;
    auto [ec, v] =
        co_await f.c.async_get_config(name, "type", thoonk::capture_diagnostics(diag, nothrow));
    CHECK(ec == E::server_error);
    CHECK(!v);
    CHECK(diag.server_message().starts_with("WRONGTYPE"));

    // The same object, reused: an operation that succeeds clears it.
    auto [ec2, exists] =
        co_await f.c.async_feed_exists(name, thoonk::capture_diagnostics(diag, nothrow));
    CHECK(!ec2);
    CHECK(exists);
    CHECK(diag.server_message().empty());

    // An error found before any I/O has no server text either.
    co_await f.c.async_get_config(name, "type", thoonk::capture_diagnostics(diag, nothrow));
    REQUIRE(!diag.server_message().empty());
    auto [ec3, v3] = co_await f.c.async_get_config(std::string(), "type",
                                                   thoonk::capture_diagnostics(diag, nothrow));
    CHECK(ec3 == E::invalid_name);
    CHECK(diag.server_message().empty());
  });
}

TEST_CASE("diagnostics: a Lua error inside a library script keeps its text and line",
          "[diagnostics][script_error][set_config]") {
  on_broken_feed([](fixture& f, std::string name) -> asio::awaitable<void> {
    thoonk::diagnostics diag;
    // set_config's script HSETs the config hash: the server refuses it
    // inside the script.
    auto [ec] = co_await f.c.async_set_config(name, "max_length", "5",
                                              thoonk::capture_diagnostics(diag, nothrow));
    CHECK(ec == E::script_error);
    CHECK(diag.server_message().find("WRONGTYPE") != std::string::npos);
    CHECK(diag.server_message().find("user_") != std::string::npos);  // _script or _function
    auto raw = co_await cmd(f.c.conn(), "GET", key("config", name));
    CHECK(raw.str == "not a hash");  // nothing was written
  });
}

TEST_CASE("diagnostics: with every kind of completion token (callback, deferred, use_awaitable)",
          "[diagnostics][get_config]") {
  on_broken_feed([](fixture& f, std::string name) -> asio::awaitable<void> {
    // A callback: the text is there when the handler runs.
    thoonk::diagnostics d1;
    std::string seen;
    bool called = false;
    f.c.async_get_config(name, "type",
                         thoonk::capture_diagnostics(
                             d1, [&](boost::system::error_code ec, std::optional<std::string>) {
                               CHECK(ec == E::server_error);
                               seen = d1.server_message();
                               called = true;
                             }));
    auto arrived = co_await wait_until([&] { return called; });
    CHECK(arrived);
    CHECK(seen.starts_with("WRONGTYPE"));

    // deferred: nothing runs until launched; then as above.
    thoonk::diagnostics d2;
    auto op = f.c.async_get_config(name, "type", thoonk::capture_diagnostics(d2, asio::deferred));
    co_await sleep_for(std::chrono::milliseconds(20));
    CHECK(d2.server_message().empty());
    auto [ec2, v2] = co_await std::move(op)(nothrow);
    CHECK(ec2 == E::server_error);
    CHECK(d2.server_message().starts_with("WRONGTYPE"));

    // use_awaitable (throwing): the exception carries the code; the text is
    // in the diagnostics.
    thoonk::diagnostics d3;
    try {
      co_await f.c.async_get_config(name, "type",
                                    thoonk::capture_diagnostics(d3, asio::use_awaitable));
      FAIL("no exception");
    } catch (const boost::system::system_error& e) {
      CHECK(e.code() == E::server_error);
    }
    CHECK(d3.server_message().starts_with("WRONGTYPE"));
  });
}

TEST_CASE("diagnostics: a move-only completion handler wrapped in capture_diagnostics",
          "[diagnostics][create_or_open_feed]") {
  fixture f("diag");
  f.run_connected([&]() -> asio::awaitable<void> {
    thoonk::diagnostics diag;
    auto owned = std::make_unique<int>(7);
    int got = 0;
    bool created = false;
    f.c.async_create_or_open_feed(
        f.name, thoonk::feed_type::feed, {},
        thoonk::capture_diagnostics(
            diag, [&, p = std::move(owned)](boost::system::error_code ec, bool c) mutable {
              CHECK(!ec);
              created = c;
              got = *p;
            }));
    auto arrived = co_await wait_until([&] { return got == 7; });
    CHECK(arrived);
    CHECK(created);
    CHECK(diag.server_message().empty());
  });
}

TEST_CASE("diagnostics: ACL refusals name the refused command in the server's words",
          "[diagnostics][acl][create_feed][subscribe]") {
  fixture f("diag");
  gap_user no_scripts, no_channels;
  f.run_connected([&]() -> asio::awaitable<void> {
    co_await no_scripts.create_with(f.c.conn(), "~*", "+@all", "-evalsha", "-eval", "-fcall",
                                    "allchannels");
    co_await no_channels.create_with(f.c.conn(), "~*", "+@all", "resetchannels");

    {
      thoonk::client limited(f.ioc.get_executor(), no_scripts.config());
      co_await limited.async_connect(asio::use_awaitable);
      thoonk::diagnostics diag;
      auto [ec] = co_await limited.async_create_feed(f.name, thoonk::feed_type::feed, {},
                                                     thoonk::capture_diagnostics(diag, nothrow));
      CHECK(ec == E::no_script_permission);
      CHECK(diag.server_message().starts_with("NOPERM"));
      CHECK(diag.server_message().find("evalsha") != std::string::npos);
      limited.stop();
    }
    {
      thoonk::subscriber sub(f.ioc.get_executor(), no_channels.config());
      co_await sub.async_connect(asio::use_awaitable);
      thoonk::diagnostics diag;
      auto [ec, s] = co_await sub.async_subscribe(
          "diag-channel", [](const thoonk::message&) {},
          thoonk::capture_diagnostics(diag, nothrow));
      CHECK(ec == E::subscribe_refused);
      // Redis 7.0 says "NOPERM this user has no permissions to access one
      // of the channels used as arguments".
      CHECK(diag.server_message().starts_with("NOPERM"));
      CHECK(diag.server_message().find("channel") != std::string::npos);
      sub.stop();
    }
    co_await no_scripts.remove(f.c.conn());
    co_await no_channels.remove(f.c.conn());
  });
}
