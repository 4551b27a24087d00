// Getting feed and sorted-feed handles (open, create_or_open), typed
// settings, item ids that cannot be swapped with items, move-only
// completion handlers on every operation, and the server's text through
// capture_diagnostics, against a real redis-server.
#include "support/helpers.hpp"

#include <thoonk/diagnostics.hpp>

#include <concepts>
#include <memory>
#include <type_traits>

using namespace thoonk::test;
using thoonk::feed_type;
using thoonk::item_id;
using E = thoonk::error;

namespace {

// ---- item_id: swapped arguments do not compile ------------------------------

static_assert(!std::is_convertible_v<std::string, item_id>);
static_assert(!std::is_convertible_v<const char*, item_id>);
static_assert(!std::is_convertible_v<item_id, std::string>);

template <class F>
concept publishes_id_and_item = requires(const F& f) {
  f.async_publish(item_id("id"), std::string("item"), asio::detached);
};
template <class F>
concept publishes_two_strings = requires(const F& f) {
  f.async_publish(std::string("id"), std::string("item"), asio::detached);
};
template <class F>
concept publishes_item_then_id = requires(const F& f) {
  f.async_publish(std::string("item"), item_id("id"), asio::detached);
};
static_assert(publishes_id_and_item<thoonk::feed>);
static_assert(!publishes_two_strings<thoonk::feed>);
static_assert(!publishes_item_then_id<thoonk::feed>);

template <class S>
concept edits_with_two_strings = requires(const S& s) {
  s.async_edit(std::string("1"), std::string("item"), asio::detached);
};
template <class S>
concept inserts_after_with_two_strings = requires(const S& s) {
  s.async_publish_after(std::string("1"), std::string("item"), asio::detached);
};
static_assert(!edits_with_two_strings<thoonk::sorted_feed>);
static_assert(!inserts_after_with_two_strings<thoonk::sorted_feed>);

// The config hash of feed `name`.
asio::awaitable<std::map<std::string, std::string>> config_of(thoonk::client& c,
                                                              const std::string& name) {
  return hash_of(c.conn(), key("config", name));
}

}  // namespace

CLIENT_TEST_CASE("handle",
                 "feed handles: create_or_open creates, then opens without touching the config",
                 "[feed][sorted_feed][create_or_open][open][read_settings][delete_feed]") {
  auto cap = co_await capture_patterns(fx.raw, "newfeed");

  thoonk::feed::settings s;
  s.max_length = 5;
  auto f = co_await thoonk::feed::async_create_or_open(c, fx.name, s, asio::use_awaitable);
  CHECK(f.name() == fx.name);
  auto conf = co_await config_of(c, fx.name);
  CHECK(conf == std::map<std::string, std::string>{{"type", "feed"}, {"max_length", "5"}});
  auto read = co_await f.async_read_settings(asio::use_awaitable);
  CHECK(read == s);

  // Opening again with other settings: the feed keeps its own.
  thoonk::feed::settings other;
  other.max_length = 9;
  auto again = co_await thoonk::feed::async_create_or_open(c, fx.name, other, asio::use_awaitable);
  auto read2 = co_await again.async_read_settings(asio::use_awaitable);
  CHECK(read2.max_length == 5);
  auto opened = co_await thoonk::feed::async_open(c, fx.name, asio::use_awaitable);
  auto len = co_await opened.async_length(asio::use_awaitable);
  CHECK(len == 0);

  // Default settings: no max_length field at all.
  auto plain_name = fx.name + ".plain";
  auto plain = co_await thoonk::feed::async_create_or_open(c, plain_name, asio::use_awaitable);
  auto plain_conf = co_await config_of(c, plain_name);
  CHECK(plain_conf == std::map<std::string, std::string>{{"type", "feed"}});
  auto plain_settings = co_await plain.async_read_settings(asio::use_awaitable);
  CHECK(!plain_settings.max_length);

  // Sorted feeds: no settings; the same two calls.
  auto sorted_name = fx.name + ".sorted";
  auto sf = co_await thoonk::sorted_feed::async_create_or_open(c, sorted_name, asio::use_awaitable);
  auto sf2 =
      co_await thoonk::sorted_feed::async_create_or_open(c, sorted_name, {}, asio::use_awaitable);
  auto id = co_await sf.async_append("x", asio::use_awaitable);
  auto item = co_await sf2.async_get_item(id, asio::use_awaitable);
  CHECK(item == "x");
  auto none = co_await sf.async_read_settings(asio::use_awaitable);
  CHECK(none == thoonk::sorted_feed::settings{});

  // One newfeed per creation, none per open.
  auto created = [&] {
    return std::count_if(cap->msgs.begin(), cap->msgs.end(),
                         [&](const msg& m) { return m.second.starts_with(fx.name); });
  };
  bool arrived = co_await wait_until([&] { return created() >= 3; });
  CHECK(arrived);
  co_await fence(fx.raw, c.conn());
  CHECK(created() == 3);
  std::vector<std::string> names{fx.name, plain_name, sorted_name};
  for (const auto& n : names) co_await c.async_delete_feed(n, asio::use_awaitable);
}

CLIENT_TEST_CASE("handle-type", "feed handles: the wrong type is refused and changes nothing",
                 "[feed][sorted_feed][create_or_open][open][read_settings][delete_feed]") {
  co_await thoonk::sorted_feed::async_create_or_open(c, fx.name, asio::use_awaitable);
  auto before = co_await config_of(c, fx.name);

  thoonk::feed::settings s;
  s.max_length = 3;
  auto [e1, f1] = co_await thoonk::feed::async_create_or_open(c, fx.name, s, nothrow);
  CHECK(e1 == E::wrong_feed_type);
  auto [e2, f2] = co_await thoonk::feed::async_open(c, fx.name, nothrow);
  CHECK(e2 == E::wrong_feed_type);
  auto [e3, r3] = co_await thoonk::feed(c, fx.name).async_read_settings(nothrow);
  CHECK(e3 == E::wrong_feed_type);
  auto config = co_await config_of(c, fx.name);
  CHECK(config == before);

  // Missing feeds: open and read_settings do not create.
  auto missing = fx.name + ".missing";
  auto [e4, f4] = co_await thoonk::sorted_feed::async_open(c, missing, nothrow);
  CHECK(e4 == E::feed_not_found);
  auto [e5, r5] = co_await thoonk::feed(c, missing).async_read_settings(nothrow);
  CHECK(e5 == E::feed_not_found);
  auto exists = co_await c.async_feed_exists(missing, asio::use_awaitable);
  CHECK(!exists);
  co_await c.async_delete_feed(fx.name, asio::use_awaitable);
}

TEST_CASE("feed handles: settings convert to and from the contract's fields",
          "[feed][create_or_open][read_settings][set_config][delete_feed]") {
  thoonk::feed::settings s;
  CHECK(s.to_fields().empty());
  CHECK(s.problem().empty());
  s.max_length = 0;
  CHECK(s.to_fields() == thoonk::feed_config{{"max_length", "0"}});
  s.max_length = (std::uint64_t{1} << 53) - 1;
  CHECK(s.to_fields() == thoonk::feed_config{{"max_length", "9007199254740991"}});
  CHECK(s.problem().empty());
  CHECK(thoonk::feed::settings::from_fields(s.to_fields()) == s);
  // Other fields are ignored; values the scripts would not use read as unset.
  thoonk::feed_config odd{{"type", "feed"}, {"app", "x"}, {"max_length", "-1"}};
  CHECK(!thoonk::feed::settings::from_fields(odd).max_length);
  odd.back().second = "12";
  CHECK(thoonk::feed::settings::from_fields(odd).max_length == 12);

  // Too large for a Lua number: refused before any I/O.
  s.max_length = std::uint64_t{1} << 53;
  CHECK(!s.problem().empty());
  fixture fx("handle-settings");
  auto& c = fx.c;
  run_coro(fx.ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    auto requests = c.conn().stats().requests;
    auto [e1, f1] = co_await thoonk::feed::async_create_or_open(c, fx.name, s, nothrow);
    CHECK(e1 == E::invalid_argument);
    auto [e2, f2] = co_await thoonk::feed::async_create_or_open(c, "", nothrow);
    CHECK(e2 == E::invalid_name);
    CHECK(c.conn().stats().requests == requests);
    auto exists = co_await c.async_feed_exists(fx.name, asio::use_awaitable);
    CHECK(!exists);

    // A value written with set_config reads back typed.
    auto f = co_await thoonk::feed::async_create_or_open(c, fx.name, asio::use_awaitable);
    co_await c.async_set_config(fx.name, "max_length", "42", asio::use_awaitable);
    auto read = co_await f.async_read_settings(asio::use_awaitable);
    CHECK(read.max_length == 42);
    co_await c.async_delete_feed(fx.name, asio::use_awaitable);
    c.stop();
  });
}

CLIENT_TEST_CASE(
    "handle-moveonly", "feed handles: every operation completes a move-only handler",
    "[feed][sorted_feed][append][create_or_open][edit][get_all][get_ids][get_item]"
    "[get_items][has_id][insert][length][move][move_after][move_before][move_to_begin]"
    "[move_to_end][open][prepend][publish][publish_after][publish_before][read_settings]"
    "[retract][subscribe][delete_feed]") {
  auto f = co_await thoonk::feed::async_create_or_open(c, fx.name, asio::use_awaitable);
  auto sorted_name = fx.name + ".sorted";
  auto s = co_await thoonk::sorted_feed::async_create_or_open(c, sorted_name, asio::use_awaitable);
  co_await s.async_append("a", asio::use_awaitable);  // 1
  co_await s.async_append("b", asio::use_awaitable);  // 2

  int started = 0, ok = 0;
  std::vector<boost::system::error_code> errors;
  // A completion handler that can only be moved (it owns a unique_ptr).
  auto handler = [&] {
    ++started;
    return
        [&ok, &errors, owned = std::make_unique<int>(1)](boost::system::error_code ec, auto&&...) {
          if (ec) errors.push_back(ec);
          else ok += *owned;
        };
  };
  thoonk::feed::async_open(c, fx.name, handler());
  thoonk::feed::async_create_or_open(c, fx.name, handler());
  thoonk::feed::async_create_or_open(c, fx.name, thoonk::feed::settings{}, handler());
  f.async_publish("item", handler());
  f.async_publish(item_id("x"), "item", handler());
  f.async_retract("nope", handler());
  f.async_get_ids(handler());
  f.async_get_item("x", handler());
  f.async_get_items(std::vector<std::string>{"x"}, handler());
  f.async_get_all(handler());
  f.async_has_id("x", handler());
  f.async_length(handler());
  f.async_read_settings(handler());
  f.async_subscribe([](const thoonk::feed_event&) {}, handler());
  f.async_subscribe([](const thoonk::feed_event&) {}, thoonk::feed_subscribe_options{}, handler());
  thoonk::sorted_feed::async_open(c, sorted_name, handler());
  s.async_append("c", handler());
  s.async_prepend("d", handler());
  s.async_publish_before(item_id("1"), "e", handler());
  s.async_publish_after(item_id("1"), "f", handler());
  s.async_insert(thoonk::feed_position::at_end(), "g", handler());
  s.async_edit(item_id("1"), "A", handler());
  s.async_move_to_begin("2", handler());
  s.async_move_to_end("2", handler());
  s.async_move_before("2", "1", handler());
  s.async_move_after("2", "1", handler());
  s.async_move("2", thoonk::feed_position::at_begin(), handler());
  s.async_retract("nope", handler());
  s.async_read_settings(handler());
  thoonk::async_subscribe_feed_admin(
      c, [](const thoonk::feed_admin_event&) {}, handler());

  bool all = co_await wait_until([&] { return ok + static_cast<int>(errors.size()) == started; });
  CHECK(all);
  CHECK(errors.empty());
  CHECK(ok == started);
  co_await c.async_delete_feed(fx.name, asio::use_awaitable);
  co_await c.async_delete_feed(sorted_name, asio::use_awaitable);
}

TEST_CASE("feed handles: capture_diagnostics gives the server's text of a failed feed operation",
          "[feed][sorted_feed][acl][diagnostics][get_ids][publish][subscribe][create_or_open]"
          "[edit][delete_feed]") {
  fixture fx("handle-diag");
  auto& c = fx.c;
  thoonk::diagnostics diag;
  auto with_diag = thoonk::capture_diagnostics(diag, nothrow);
  run_coro(fx.ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    auto f = co_await thoonk::feed::async_create_or_open(c, fx.name, asio::use_awaitable);
    co_await f.async_publish(item_id("a"), "A", asio::use_awaitable);

    // A key of the feed that holds another type: the plain command's error
    // (server_error) and the script's (script_error), each with its text.
    co_await cmd(c.conn(), "DEL", key("ids", fx.name));
    co_await cmd(c.conn(), "SET", key("ids", fx.name), "not a zset");
    auto [e1, ids] = co_await f.async_get_ids(with_diag);
    CHECK(e1 == E::server_error);
    CHECK(diag.server_message().find("WRONGTYPE") != std::string::npos);
    auto [e2, r2] = co_await f.async_publish(item_id("b"), "B", with_diag);
    CHECK(e2 == E::script_error);
    CHECK(diag.server_message().find("WRONGTYPE") != std::string::npos);
    CHECK(diag.server_message().find("user_") != std::string::npos);  // _script or _function
    // Success clears it.
    auto [e3, has] = co_await f.async_has_id("a", with_diag);
    CHECK(e3 == E::server_error);
    auto [e4, item] = co_await f.async_get_item("a", with_diag);
    CHECK(!e4);
    CHECK(item == "A");
    CHECK(diag.server_message().empty());
    // An error the library finds itself has no server text.
    auto [e5, r5] = co_await f.async_publish(item_id(""), "x", with_diag);
    CHECK(e5 == E::invalid_id);
    CHECK(diag.server_message().empty());
    co_await c.async_delete_feed(fx.name, asio::use_awaitable);

    // ACL refusals through the typed feed operations.
    gap_user user;
    co_await user.create_with(c.conn(), "~*", "&*", "+@all", "-evalsha", "-fcall");
    thoonk::client uc(fx.ioc.get_executor(), user.config());
    co_await uc.async_connect(asio::use_awaitable);
    auto sorted_name = fx.name + ".sorted";
    auto [e6, s] = co_await thoonk::sorted_feed::async_create_or_open(uc, sorted_name, with_diag);
    CHECK(e6 == E::no_script_permission);
    CHECK(diag.server_message().find("evalsha") != std::string::npos);
    auto admin_s =
        co_await thoonk::sorted_feed::async_create_or_open(c, sorted_name, asio::use_awaitable);
    auto [e7] =
        co_await thoonk::sorted_feed(uc, sorted_name).async_edit(item_id("1"), "x", with_diag);
    CHECK(e7 == E::no_script_permission);
    CHECK(diag.server_message().find("evalsha") != std::string::npos);
    uc.stop();

    // A subscriber refused the feed's channels: subscribe_refused, with text.
    gap_user listener;
    co_await listener.create_with(c.conn(), "~*", "resetchannels", "+@all");
    thoonk::client lc(fx.ioc.get_executor(), listener.config());
    co_await lc.async_connect(asio::use_awaitable);
    auto [e8, sub] = co_await thoonk::sorted_feed(lc, sorted_name)
                         .async_subscribe([](const thoonk::feed_event&) {}, with_diag);
    CHECK(e8 == E::subscribe_refused);
    CHECK(!diag.server_message().empty());
    lc.stop();

    co_await user.remove(c.conn());
    co_await listener.remove(c.conn());
    co_await c.async_delete_feed(admin_s.name(), asio::use_awaitable);
    c.stop();
  });
}
