// The multiplexer's bookkeeping without I/O: ordering, batching, replies,
// cancellation, disconnects.
#include "connection/request_queue.hpp"

#include <thoonk/error.hpp>
#include <thoonk/request.hpp>

#include <catch2/catch.hpp>

#include "support/resp3_values.hpp"

using boost::system::error_code;
using thoonk::detail::completion;
using thoonk::detail::exec_handler;
using thoonk::detail::request_queue;
using thoonk::test::string_reply;

namespace {
struct recorder {
  std::vector<std::pair<int, error_code>> calls;
  exec_handler handler(int tag) {
    return exec_handler(
        [this, tag](error_code ec, thoonk::response) { calls.emplace_back(tag, ec); });
  }
};

void run(std::vector<completion>& out) {
  for (auto& c : out) c.handler.take()(c.ec, std::move(c.replies));
  out.clear();
}

std::string cmd_bytes(std::string_view word) {
  thoonk::request r;
  r.push("ECHO", word);
  return r.payload();
}
}  // namespace

TEST_CASE("request_queue: a batch holds every queued request in order", "[unit][queue]") {
  request_queue q;
  recorder rec;
  q.push(cmd_bytes("a"), 1, rec.handler(1), true);
  q.push(cmd_bytes("b"), 2, rec.handler(2), true);
  REQUIRE(q.has_unwritten());
  auto batch = q.take_batch();
  CHECK(batch == cmd_bytes("a") + cmd_bytes("b"));
  CHECK(!q.has_unwritten());
  CHECK(q.in_flight() == 2);
  std::vector<completion> out;
  REQUIRE(q.on_reply(string_reply("a"), out));
  run(out);
  CHECK(rec.calls.size() == 1);
  REQUIRE(q.on_reply(string_reply("b1"), out));
  CHECK(out.empty());  // request 2 expects two replies
  REQUIRE(q.on_reply(string_reply("b2"), out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].replies.size() == 2);
  run(out);
  CHECK(q.size() == 0);
  // A reply nobody waits for is a desync.
  CHECK_FALSE(q.on_reply(string_reply("stray"), out));
}

TEST_CASE("request_queue: cancelling a queued request removes its bytes", "[unit][queue]") {
  request_queue q;
  recorder rec;
  q.push(cmd_bytes("a"), 1, rec.handler(1), true);
  auto s2 = q.push(cmd_bytes("b"), 1, rec.handler(2), true);
  q.push(cmd_bytes("c"), 1, rec.handler(3), true);
  std::vector<completion> out;
  q.cancel(s2, boost::asio::error::operation_aborted, out);
  run(out);
  REQUIRE(rec.calls.size() == 1);
  CHECK(rec.calls[0] == std::pair<int, error_code>{2, boost::asio::error::operation_aborted});
  CHECK(q.take_batch() == cmd_bytes("a") + cmd_bytes("c"));
  // Cancelling again is a no-op.
  q.cancel(s2, boost::asio::error::operation_aborted, out);
  CHECK(out.empty());
}

TEST_CASE("request_queue: a cancelled written request's replies are discarded", "[unit][queue]") {
  request_queue q;
  recorder rec;
  auto s1 = q.push(cmd_bytes("a"), 2, rec.handler(1), true);
  q.push(cmd_bytes("b"), 1, rec.handler(2), true);
  q.take_batch();
  std::vector<completion> out;
  REQUIRE(q.on_reply(string_reply("a1"), out));  // one of two replies arrived
  q.cancel(s1, boost::asio::error::operation_aborted, out);
  REQUIRE(out.size() == 1);
  CHECK(out[0].ec == boost::asio::error::operation_aborted);
  run(out);
  REQUIRE(q.on_reply(string_reply("a2"), out));  // discarded: still request 1's
  CHECK(out.empty());
  REQUIRE(q.on_reply(string_reply("b"), out));
  REQUIRE(out.size() == 1);
  CHECK(out[0].replies.at(0).str == "b");  // aligned
}

TEST_CASE("request_queue: disconnect fails written requests as unknown, keeps queued ones",
          "[unit][queue]") {
  request_queue q;
  recorder rec;
  q.push(cmd_bytes("a"), 1, rec.handler(1), true);
  q.push(cmd_bytes("b"), 1, rec.handler(2), true);
  q.take_batch();
  q.push(cmd_bytes("c"), 1, rec.handler(3), true);   // waits for reconnect
  q.push(cmd_bytes("d"), 1, rec.handler(4), false);  // asked not to wait
  q.push(cmd_bytes("e"), 1, exec_handler{}, false);  // internal (PING), no handler
  std::vector<completion> out;
  q.on_disconnect(out, thoonk::error::bulk_too_large);
  run(out);
  REQUIRE(rec.calls.size() == 3);
  CHECK(rec.calls[0] == std::pair<int, error_code>{1, thoonk::error::bulk_too_large});
  CHECK(rec.calls[1] == std::pair<int, error_code>{2, thoonk::error::unknown_outcome});
  CHECK(rec.calls[2] == std::pair<int, error_code>{4, thoonk::error::not_connected});
  CHECK(q.size() == 1);
  CHECK(q.in_flight() == 0);
  CHECK(q.take_batch() == cmd_bytes("c"));
}

TEST_CASE("request_queue: requests expecting no reply complete when written", "[unit][queue]") {
  request_queue q;
  recorder rec;
  thoonk::request sub;
  sub.push("SUBSCRIBE", "ch");
  REQUIRE(sub.expected_replies() == 0);
  q.push(sub.payload(), 0, rec.handler(1), true);
  q.push(cmd_bytes("a"), 1, rec.handler(2), true);
  q.take_batch();
  std::vector<completion> out;
  q.on_batch_written(out);
  run(out);
  REQUIRE(rec.calls.size() == 1);
  CHECK(rec.calls[0].first == 1);
  REQUIRE(q.on_reply(string_reply("a"), out));
  run(out);
  CHECK(rec.calls.size() == 2);
}

TEST_CASE("request_queue: stop fails everything", "[unit][queue]") {
  request_queue q;
  recorder rec;
  q.push(cmd_bytes("a"), 1, rec.handler(1), true);
  q.take_batch();
  q.push(cmd_bytes("b"), 1, rec.handler(2), true);
  std::vector<completion> out;
  q.fail_all(thoonk::error::client_stopped, out);
  run(out);
  REQUIRE(rec.calls.size() == 2);
  CHECK(rec.calls[0].second == thoonk::error::unknown_outcome);
  CHECK(rec.calls[1].second == thoonk::error::client_stopped);
  CHECK(q.size() == 0);
}

TEST_CASE("request_queue: held_memory counts the replies of a request that waits for more",
          "[unit][queue][limits]") {
  request_queue q;
  recorder rec;
  std::vector<completion> out;
  q.push(cmd_bytes("a"), 3, rec.handler(1), true);
  q.push(cmd_bytes("b"), 2, rec.handler(2), true);
  q.take_batch();
  CHECK(q.held_memory() == 0);
  REQUIRE(q.on_reply(string_reply("a1"), out, 100));
  REQUIRE(q.on_reply(string_reply("a2"), out, 50));
  CHECK(out.empty());
  CHECK(q.held_memory() == 150);
  // The last reply completes the request: its replies are the caller's now.
  REQUIRE(q.on_reply(string_reply("a3"), out, 1000));
  REQUIRE(out.size() == 1);
  CHECK(out[0].replies.size() == 3);
  CHECK(q.held_memory() == 0);
  run(out);
  REQUIRE(q.on_reply(string_reply("b1"), out, 7));
  CHECK(q.held_memory() == 7);
  REQUIRE(q.on_reply(string_reply("b2"), out, 0));
  CHECK(q.held_memory() == 0);
  run(out);
  CHECK(rec.calls.size() == 2);
}

TEST_CASE("request_queue: held replies stop counting when their request fails or is abandoned",
          "[unit][queue][limits]") {
  request_queue q;
  recorder rec;
  std::vector<completion> out;
  auto s1 = q.push(cmd_bytes("a"), 3, rec.handler(1), true);
  q.push(cmd_bytes("b"), 2, rec.handler(2), true);
  q.take_batch();

  SECTION("cancelled: the replies it held and those still to come are discarded") {
    REQUIRE(q.on_reply(string_reply("a1"), out, 100));
    CHECK(q.held_memory() == 100);
    q.cancel(s1, thoonk::error::request_timeout, out);
    CHECK(q.held_memory() == 0);
    REQUIRE(q.on_reply(string_reply("a2"), out, 100));
    REQUIRE(q.on_reply(string_reply("a3"), out, 100));
    CHECK(q.held_memory() == 0);
    REQUIRE(q.on_reply(string_reply("b1"), out, 5));
    CHECK(q.held_memory() == 5);
    run(out);
    REQUIRE(rec.calls.size() == 1);
    CHECK(rec.calls[0] == std::pair<int, error_code>{1, thoonk::error::request_timeout});
  }
  SECTION("the connection is lost: the request gets the parser's error") {
    REQUIRE(q.on_reply(string_reply("a1"), out, 100));
    q.on_disconnect(out, thoonk::error::reply_memory_exceeded);
    CHECK(q.held_memory() == 0);
    run(out);
    REQUIRE(rec.calls.size() == 2);
    CHECK(rec.calls[0] == std::pair<int, error_code>{1, thoonk::error::reply_memory_exceeded});
    CHECK(rec.calls[1] == std::pair<int, error_code>{2, thoonk::error::unknown_outcome});
  }
  SECTION("stopped") {
    REQUIRE(q.on_reply(string_reply("a1"), out, 100));
    q.fail_all(thoonk::error::client_stopped, out);
    CHECK(q.held_memory() == 0);
    run(out);
    CHECK(rec.calls.size() == 2);
  }
}
