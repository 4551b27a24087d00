// The admin server's decisions without I/O (src/admin/rules.hpp): targets,
// the route table, the access policy, paging arguments and error statuses.
#include "admin/rules.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>
#include <catch2/catch.hpp>

using namespace thoonk::admin::detail;

TEST_CASE("admin rules: targets are split and percent-decoded", "[admin][unit]") {
  auto t = parse_target("/api/queues/a%2Fb/jobs?state=dead&cursor=&count=5&x=a+b%21");
  REQUIRE(t.ok);
  CHECK(t.segments == std::vector<std::string>{"api", "queues", "a/b", "jobs"});
  CHECK(t.param("state") == "dead");
  CHECK(t.param("cursor", "none").empty());
  CHECK(t.param("missing", "fb") == "fb");
  CHECK(t.param("x") == "a b!");
  CHECK(parse_target("/").segments.empty());
  CHECK(parse_target("/api/queues/").segments == std::vector<std::string>{"api", "queues"});
  CHECK(!parse_target("api").ok);
  CHECK(!parse_target("").ok);
  CHECK(!parse_target("/a%2").ok);
  CHECK(!parse_target("/a%zz").ok);
  CHECK(!parse_target("/a%00b").ok);  // NUL is never part of a name
  CHECK(!parse_target("/a?x=%00").ok);
  CHECK(percent_decode("%41%62+c", false) == "Ab+c");
  CHECK(percent_decode("%41%62+c", true) == "Ab c");
  CHECK(!percent_decode("%4", true));
}

TEST_CASE("admin rules: the route table matches method and path", "[admin][unit]") {
  auto r = make_router();
  auto seg = [](std::string_view p) { return parse_target(p).segments; };
  auto m = r.match("GET", seg("/api/queues/orders/jobs/42"));
  REQUIRE(m.result == route_match::outcome::found);
  CHECK(m.r->id == route_id::job);
  CHECK(m.params == std::vector<std::string>{"orders", "42"});
  CHECK(!m.r->write);
  auto w = r.match("POST", seg("/api/queues/orders/jobs/42/retry"));
  REQUIRE(w.result == route_match::outcome::found);
  CHECK(w.r->id == route_id::job_retry);
  CHECK(w.r->write);
  CHECK(r.match("GET", seg("/")).r->id == route_id::page);
  auto wrong = r.match("GET", seg("/api/queues/orders/pause"));
  CHECK(wrong.result == route_match::outcome::method_not_allowed);
  CHECK(wrong.allow == "POST");
  auto del = r.match("DELETE", seg("/api/queues"));
  CHECK(del.result == route_match::outcome::method_not_allowed);
  CHECK(del.allow == "GET");
  CHECK(r.match("GET", seg("/api/nothing")).result == route_match::outcome::not_found);
  CHECK(r.match("GET", seg("/api/queues/a/b/c/d/e/f")).result == route_match::outcome::not_found);
  // Every write is a POST and every POST a write.
  for (const auto& rt : r.routes()) CHECK(rt.write == (rt.method == "POST"));
  // A further route is one line (a /metrics page).
  r.add("GET", "/metrics", route_id::page, false);
  CHECK(r.match("GET", seg("/metrics")).result == route_match::outcome::found);
}

TEST_CASE("admin rules: constant-time comparison", "[admin][unit]") {
  CHECK(constant_time_equal("secret-token", "secret-token"));
  CHECK(!constant_time_equal("secret-token", "secret-tokeN"));
  CHECK(!constant_time_equal("secret-token", "secret"));
  CHECK(!constant_time_equal("secret", "secret-token"));
  CHECK(!constant_time_equal("", "x"));
  CHECK(constant_time_equal("", ""));
}

TEST_CASE("admin rules: the access policy", "[admin][unit]") {
  request_facts read;
  read.api = true;
  read.host = "127.0.0.1:8089";
  request_facts write = read;
  write.write = true;
  write.has_csrf_header = true;

  access_policy open("", false, true, 8089);
  CHECK(!open.check(read));
  CHECK(!open.check(write));
  auto no_csrf = write;
  no_csrf.has_csrf_header = false;
  REQUIRE(open.check(no_csrf));
  CHECK(open.check(no_csrf)->status == 403);
  for (std::string_view h : {"localhost", "LOCALHOST:8089", "[::1]:8089", "127.0.0.1"}) {
    auto r = read;
    r.host = h;
    CHECK(!open.check(r));
  }
  for (std::string_view h : {"evil.example", "127.0.0.1:9999", "127.0.0.1.evil:8089", ""}) {
    auto r = read;
    r.host = h;
    REQUIRE(open.check(r));
    CHECK(open.check(r)->status == 421);
  }

  access_policy ro("", true, true, 8089);
  CHECK(!ro.check(read));
  REQUIRE(ro.check(write));
  CHECK(ro.check(write)->status == 405);

  access_policy tok("0123456789abcdef", false, false, 8089);
  auto any_host = read;
  any_host.host = "admin.internal:8089";  // with a token, names are free
  REQUIRE(tok.check(any_host));
  CHECK(tok.check(any_host)->status == 401);
  any_host.authorization = "Bearer 0123456789abcdef";
  CHECK(!tok.check(any_host));
  any_host.authorization = "bearer 0123456789abcdef";  // the scheme is case-insensitive
  CHECK(!tok.check(any_host));
  any_host.authorization = "Bearer 0123456789abcdeF";
  CHECK(tok.check(any_host)->status == 401);
  any_host.authorization = "Bearer ";
  CHECK(tok.check(any_host)->status == 401);
  auto page = any_host;
  page.api = false;
  page.authorization = "";
  CHECK(!tok.check(page));  // the page itself holds no data
  auto tok_write = any_host;
  tok_write.authorization = "Bearer 0123456789abcdef";
  tok_write.write = true;
  REQUIRE(tok.check(tok_write));  // the token does not replace the CSRF header
  CHECK(tok.check(tok_write)->status == 403);
  tok_write.has_csrf_header = true;
  CHECK(!tok.check(tok_write));
}

TEST_CASE("admin rules: paging arguments and states", "[admin][unit]") {
  CHECK(parse_count("", 50, 500) == 50u);
  CHECK(parse_count("1", 50, 500) == 1u);
  CHECK(parse_count("500", 50, 500) == 500u);
  CHECK(!parse_count("0", 50, 500));
  CHECK(!parse_count("501", 50, 500));
  CHECK(!parse_count("5x", 50, 500));
  CHECK(!parse_count("-1", 50, 500));
  CHECK(parse_offset("") == 0);
  CHECK(parse_offset("1234") == 1234);
  CHECK(!parse_offset("-3"));
  CHECK(!parse_offset("a"));
  CHECK(!parse_offset("99999999999999999999999"));
  for (auto s : {"waiting", "claimed", "scheduled", "dead", "stalled", "held"})
    CHECK(valid_state(s));
  CHECK(!valid_state("finished"));
  CHECK(!valid_state(""));
}

TEST_CASE("admin rules: library errors map to HTTP statuses and codes", "[admin][unit]") {
  using E = thoonk::error;
  CHECK(status_for(E::job_not_found) == 404);
  CHECK(status_for(E::feed_not_found) == 404);
  CHECK(status_for(E::job_not_stalled) == 409);
  CHECK(status_for(E::wrong_feed_type) == 409);
  CHECK(status_for(E::invalid_id) == 400);
  CHECK(status_for(E::no_permission) == 403);
  CHECK(status_for(E::request_timeout) == 503);
  CHECK(status_for(E::server_error) == 502);
  CHECK(status_for(boost::asio::error::connection_refused) == 503);
  CHECK(code_for(E::job_not_found) == "job_not_found");
  CHECK(code_for(E::no_channel_permission) == "no_channel_permission");
  CHECK(code_for(boost::asio::error::connection_refused) == "error");
}

TEST_CASE("admin rules: Server-Sent Events frames and the bounded event buffer", "[admin][unit]") {
  CHECK(sse_frame("job", R"({"id":"1"})") == "event: job\ndata: {\"id\":\"1\"}\n\n");
  CHECK(sse_frame("x", "a\nb") == "event: x\ndata: a\ndata: b\n\n");
  event_buffer b(2);
  CHECK(b.empty());
  b.push("1");
  b.push("2");
  CHECK(!b.empty());
  CHECK(b.take() == "12");
  CHECK(b.empty());
  b.push("a");
  b.push("b");
  b.push("c");  // the oldest goes; the next take says how many
  CHECK(b.size() == 2);
  CHECK(b.take() == sse_frame("overflow", R"({"dropped":1})") + "bc");
  CHECK(b.empty());
  CHECK(b.take().empty());
  auto r = make_router();
  auto m = r.match("GET", parse_target("/api/queues/q/events").segments);
  REQUIRE(m.result == route_match::outcome::found);
  CHECK(m.r->id == route_id::events);
}
