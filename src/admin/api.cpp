#include "admin/api.hpp"

#include "detail/keys.hpp"

#include <thoonk/connection.hpp>
#include <thoonk/diagnostics.hpp>
#include <thoonk/error.hpp>
#include <thoonk/job_queue.hpp>
#include <thoonk/request.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/deferred.hpp>
#include <boost/asio/this_coro.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <exception>
#include <optional>
#include <tuple>
#include <utility>

namespace thoonk::admin::detail {

namespace asio = boost::asio;
namespace json = boost::json;

namespace {

constexpr auto nothrow = asio::as_tuple(asio::deferred);

/// A refusal raised inside a route and turned into its JSON answer by
/// api::handle (the routes read straight through instead of checking each
/// step's result by hand).
struct api_error {
  unsigned status;
  std::string code;
  std::string message;
  std::string server;
};

[[noreturn]] void fail(unsigned status, std::string code, std::string message) {
  throw api_error{status, std::move(code), std::move(message), {}};
}

void check(const boost::system::error_code& ec, const thoonk::diagnostics& diag) {
  if (ec) throw api_error{status_for(ec), code_for(ec), ec.message(), diag.server_message()};
}

std::string_view state_name(job_state s) {
  switch (s) {
    case job_state::waiting: return "waiting";
    case job_state::claimed: return "claimed";
    case job_state::stalled: return "dead";
    case job_state::scheduled: return "scheduled";
  }
  return "unknown";
}

json::object job_json(const job_info& j) {
  json::object o;
  o["id"] = j.id;
  o["item"] = j.item;
  o["state"] = state_name(j.state);
  o["failures"] = j.failures;
  o["run_at"] = j.run_at;
  o["retry_count"] = j.retry_count;
  o["stall_count"] = j.stall_count;
  o["last_error"] = j.last_error;
  o["progress"] = j.progress;
  o["held"] = j.held.has_value();
  return o;
}

/// Plain helpers for values chosen by a condition: g++ 12 mishandles
/// string temporaries of a ?: inside coroutines, so the coroutines below
/// call these instead.
std::string string_or(const resp3::value& v, std::string_view fallback) {
  if (v.is_string()) return v.str;
  return std::string(fallback);
}
/// A SCAN cursor as the API's `next`: "" for Redis's final "0".
std::string scan_next(const resp3::value& v) {
  if (v.str == "0") return {};
  return v.str;
}
/// The offset of the next page, or "" when this page was short.
std::string offset_next(std::size_t got, std::int64_t n, std::int64_t from) {
  if (static_cast<std::int64_t>(got) != n) return {};
  return std::to_string(from + n);
}
std::string public_state(const std::string& s) {
  if (s == "stalled") return "dead";
  return s;
}

api_response ok(json::value v) { return api_response{200, json::serialize(v)}; }

json::object parse_body(const std::string& body) {
  if (body.empty()) return {};
  boost::system::error_code ec;
  auto v = json::parse(body, ec);
  if (ec || !v.is_object()) fail(400, "invalid_body", "the request body must be a JSON object");
  return std::move(v.as_object());
}

std::string body_string(const json::object& o, std::string_view key) {
  auto* v = o.if_contains(key);
  if (!v || v->is_null()) return {};
  if (!v->is_string()) fail(400, "invalid_body", "'" + std::string(key) + "' must be a string");
  return std::string(v->as_string());
}

/// The library's check of names and ids, before any I/O.
void check_name(client& c, const std::string& name) {
  if (auto ec = thoonk::detail::validate_name(c.get_config(), name))
    fail(400, "invalid_name", "'" + name + "' is not a valid feed or queue name: " + ec.message());
}
void check_id(client& c, const std::string& id) {
  if (auto ec = thoonk::detail::validate_id(c.get_config(), id))
    fail(400, "invalid_id", ec.message());
}

/// Runs raw read commands (one round trip) and returns their replies; a
/// transport error or an error reply becomes an api_error with the server's
/// own words.
asio::awaitable<response> exec(client& c, const request& req) {
  auto [ec, resp] = co_await c.conn().async_exec(req, nothrow);
  if (ec) throw api_error{status_for(ec), code_for(ec), ec.message(), {}};
  for (const auto& v : resp)
    if (v.is_error()) throw api_error{502, "server_error", "Redis refused a read", v.str};
  co_return std::move(resp);
}

std::int64_t as_int(const resp3::value& v) {
  if (v.type == resp3::type::number) return v.integer;
  if (v.type == resp3::type::double_number) return static_cast<std::int64_t>(v.dbl);
  if (v.is_string()) {
    try {
      return std::stoll(v.str);
    } catch (const std::exception&) {
      return 0;
    }
  }
  return 0;
}

/// The type of each name (config field `type`; a feed made by a contract
/// client without one is a plain feed), in one round trip; nullopt for a
/// name no longer in `feeds`.
asio::awaitable<std::vector<std::optional<std::string>>> types_of(
    client& c, const std::vector<std::string>& names) {
  std::vector<std::optional<std::string>> out;
  if (names.empty()) co_return out;
  request req;
  for (const auto& n : names) {
    thoonk::detail::feed_names fn(c.get_config(), n);
    req.push("SISMEMBER", thoonk::detail::feeds_key, n);
    req.push("HGET", fn.key("config"), "type");
  }
  auto resp = co_await exec(c, req);
  for (std::size_t i = 0; i < names.size(); ++i) {
    if (as_int(resp[2 * i]) == 0) {
      out.emplace_back();
      continue;
    }
    const auto& t = resp[2 * i + 1];
    out.emplace_back(string_or(t, "feed"));
  }
  co_return out;
}

asio::awaitable<std::string> type_of(client& c, const std::string& name) {
  const std::vector<std::string> names{name};
  auto t = co_await types_of(c, names);
  if (!t[0]) fail(404, "feed_not_found", "no feed or queue named '" + name + "'");
  co_return *t[0];
}

bool is_queue_type(const std::string& t) { return t == "queue" || t == "job"; }
bool is_feed_type(const std::string& t) { return t == "feed" || t == "sorted_feed"; }

asio::awaitable<std::string> queue_type(client& c, const std::string& name) {
  check_name(c, name);
  auto t = co_await type_of(c, name);
  if (!is_queue_type(t))
    fail(409, "wrong_feed_type", "'" + name + "' is a " + t + ", not a queue or job queue");
  co_return t;
}

asio::awaitable<job_queue> job_queue_of(client& c, const std::string& name) {
  auto t = co_await queue_type(c, name);
  if (t != "job")
    fail(409, "wrong_feed_type", "'" + name + "' is a plain queue: it has no jobs to act on");
  co_return job_queue(c, name);
}

/// One queue's line in /api/queues and the head of /api/queues/{q}.
asio::awaitable<json::object> queue_summary(client& c, const std::string& name,
                                            const std::string& type) {
  json::object o;
  o["name"] = name;
  o["type"] = type;
  thoonk::detail::feed_names fn(c.get_config(), name);
  json::object counts;
  if (type == "job") {
    job_queue q(c, name);
    thoonk::diagnostics diag;
    auto [ec, n] = co_await q.async_counts(capture_diagnostics(diag, nothrow));
    check(ec, diag);
    auto [ec2, s] = co_await q.async_read_settings(capture_diagnostics(diag, nothrow));
    check(ec2, diag);
    request req;
    req.push("ZCARD", fn.key("workers"));
    auto resp = co_await exec(c, req);
    counts["waiting"] = n.waiting;
    counts["claimed"] = n.claimed;
    counts["scheduled"] = n.scheduled;
    counts["dead"] = n.stalled;
    counts["held"] = n.held;
    counts["items"] = n.items;
    counts["puts"] = n.puts;
    counts["finishes"] = n.finishes;
    o["paused"] = s.paused.value_or(false);
    o["rate_limit"] = s.rate_limit.value_or(0);
    o["workers"] = as_int(resp[0]);
  } else {
    request req;
    req.push("LLEN", fn.key("ids"));
    req.push("GET", fn.key("publishes"));
    auto resp = co_await exec(c, req);
    counts["waiting"] = as_int(resp[0]);
    counts["puts"] = as_int(resp[1]);
    o["paused"] = false;
    o["rate_limit"] = 0;
    o["workers"] = 0;
  }
  o["counts"] = std::move(counts);
  co_return o;
}

/// A page of the `feeds` set (SSCAN: bounded work per call) with the types
/// of its names. The cursor is SSCAN's; empty (or "0") starts.
struct name_page {
  std::vector<std::pair<std::string, std::string>> entries;  // name, type
  std::string next;
};
asio::awaitable<name_page> scan_names(client& c, const target& t) {
  auto count = parse_count(t.param("count"), default_page, max_page);
  if (!count)
    fail(400, "invalid_count",
         "count must be a whole number from 1 to " + std::to_string(max_page));
  std::string cursor = t.param("cursor", "0");
  if (cursor.empty()) cursor = "0";
  if (!parse_offset(cursor)) fail(400, "invalid_cursor", "cursor must be the 'next' of a page");
  request req;
  req.push("SSCAN", thoonk::detail::feeds_key, cursor, "COUNT", std::to_string(*count));
  auto resp = co_await exec(c, req);
  const auto& r = resp[0];
  if (r.elements.size() != 2) fail(502, "unexpected_type", "SSCAN answered an unexpected reply");
  name_page page;
  page.next = scan_next(r.elements[0]);
  std::vector<std::string> names;
  for (const auto& e : r.elements[1].elements) names.push_back(e.str);
  std::sort(names.begin(), names.end());
  auto types = co_await types_of(c, names);
  for (std::size_t i = 0; i < names.size(); ++i)
    if (types[i]) page.entries.emplace_back(names[i], *types[i]);
  co_return page;
}

asio::awaitable<api_response> get_queues(client& c, const target& t) {
  auto page = co_await scan_names(c, t);
  json::array qs;
  for (const auto& [name, type] : page.entries)
    if (is_queue_type(type)) qs.push_back(co_await queue_summary(c, name, type));
  json::object o;
  o["queues"] = std::move(qs);
  o["next"] = page.next;
  co_return ok(std::move(o));
}

asio::awaitable<api_response> get_feeds(client& c, const target& t) {
  auto page = co_await scan_names(c, t);
  json::array fs;
  for (const auto& [name, type] : page.entries) {
    if (!is_feed_type(type)) continue;
    thoonk::detail::feed_names fn(c.get_config(), name);
    request req;
    if (type == "feed") req.push("ZCARD", fn.key("ids"));
    else req.push("LLEN", fn.key("ids"));
    req.push("GET", fn.key("publishes"));
    auto resp = co_await exec(c, req);
    json::object f;
    f["name"] = name;
    f["type"] = type;
    f["length"] = as_int(resp[0]);
    f["publishes"] = as_int(resp[1]);
    fs.push_back(std::move(f));
  }
  json::object o;
  o["feeds"] = std::move(fs);
  o["next"] = page.next;
  co_return ok(std::move(o));
}

asio::awaitable<api_response> get_queue(client& c, const std::string& name) {
  auto type = co_await queue_type(c, name);
  auto o = co_await queue_summary(c, name, type);
  if (type == "job") {
    job_queue q(c, name);
    thoonk::diagnostics diag;
    auto [ec, s] = co_await q.async_read_settings(capture_diagnostics(diag, nothrow));
    check(ec, diag);
    json::object settings;
    for (const auto& [k, v] : s.to_fields()) settings[k] = v;
    o["settings"] = std::move(settings);
  }
  co_return ok(std::move(o));
}

/// Reads the jobs of `ids` one by one (each read is atomic; a job that
/// ended meanwhile is left out).
asio::awaitable<json::array> read_jobs(client& c, job_queue& q,
                                       const std::vector<std::string>& ids) {
  (void)c;
  json::array out;
  for (const auto& id : ids) {
    thoonk::diagnostics diag;
    auto [ec, j] = co_await q.async_get_job(id, capture_diagnostics(diag, nothrow));
    check(ec, diag);
    if (j) out.push_back(job_json(*j));
  }
  co_return out;
}

asio::awaitable<api_response> get_jobs(client& c, const std::string& name, const target& t) {
  const std::string state = t.param("state", "waiting");
  if (!valid_state(state))
    fail(400, "invalid_state",
         "state must be one of waiting, claimed, scheduled, dead, stalled, held");
  auto count = parse_count(t.param("count"), default_page, max_page);
  if (!count)
    fail(400, "invalid_count",
         "count must be a whole number from 1 to " + std::to_string(max_page));
  const std::string cursor = t.param("cursor");
  auto type = co_await queue_type(c, name);
  thoonk::detail::feed_names fn(c.get_config(), name);
  json::object o;
  o["state"] = public_state(state);
  const auto n = static_cast<std::int64_t>(*count);

  if (type == "queue") {
    // A plain queue has waiting items only: ids and items, one page.
    if (state != "waiting")
      fail(400, "invalid_state", "a plain queue has only waiting items (state=waiting)");
    auto from = parse_offset(cursor);
    if (!from) fail(400, "invalid_cursor", "cursor must be the 'next' of a page");
    request req;
    req.push("LRANGE", fn.key("ids"), std::to_string(-(*from + n)), std::to_string(-(*from + 1)));
    auto resp = co_await exec(c, req);
    std::vector<std::string> ids;
    for (auto it = resp[0].elements.rbegin(); it != resp[0].elements.rend(); ++it)
      ids.push_back(it->str);
    json::array jobs;
    if (!ids.empty()) {
      request items;
      items.push_range("HMGET", std::vector<std::string_view>{fn.key("items")}, ids);
      auto got = co_await exec(c, items);
      for (std::size_t i = 0; i < ids.size(); ++i) {
        json::object j;
        j["id"] = ids[i];
        j["item"] = string_or(got[0].elements[i], "");
        j["state"] = "waiting";
        jobs.push_back(std::move(j));
      }
    }
    o["jobs"] = std::move(jobs);
    o["next"] = offset_next(ids.size(), n, *from);
    co_return ok(std::move(o));
  }

  job_queue q(c, name);
  thoonk::diagnostics diag;
  if (state == "scheduled" || state == "dead" || state == "stalled") {
    if (state == "scheduled" && !parse_offset(cursor))
      fail(400, "invalid_cursor", "cursor must be the 'next' of a page");
    if (state != "scheduled" && !cursor.empty() && !parse_offset(cursor))
      fail(400, "invalid_cursor", "cursor must be the 'next' of a page");
    // (No co_await inside ?: — g++ 12 miscompiles some of those.)
    std::tuple<boost::system::error_code, job_page> got;
    if (state == "scheduled")
      got = co_await q.async_get_scheduled(cursor, *count, capture_diagnostics(diag, nothrow));
    else
      got = co_await q.async_get_dead_letters(cursor, *count, capture_diagnostics(diag, nothrow));
    auto& [ec, page] = got;
    check(ec, diag);
    json::array jobs;
    for (const auto& j : page.jobs) jobs.push_back(job_json(j));
    o["jobs"] = std::move(jobs);
    o["next"] = page.next;
    co_return ok(std::move(o));
  }

  std::vector<std::string> ids;
  std::string next;
  request req;
  if (state == "held") {
    std::string cur = cursor;
    if (cur.empty()) cur = "0";
    if (!parse_offset(cur)) fail(400, "invalid_cursor", "cursor must be the 'next' of a page");
    req.push("HSCAN", fn.key("held"), cur, "COUNT", std::to_string(n));
    auto resp = co_await exec(c, req);
    const auto& r = resp[0];
    if (r.elements.size() != 2) fail(502, "unexpected_type", "HSCAN answered an unexpected reply");
    next = scan_next(r.elements[0]);
    const auto& kv = r.elements[1].elements;
    for (std::size_t i = 0; i + 1 < kv.size(); i += 2) ids.push_back(kv[i].str);
  } else {
    auto from = parse_offset(cursor);
    if (!from) fail(400, "invalid_cursor", "cursor must be the 'next' of a page");
    if (state == "waiting") {
      // The right end of feed.ids is next out: list from there.
      req.push("LRANGE", fn.key("ids"), std::to_string(-(*from + n)), std::to_string(-(*from + 1)));
    } else {  // claimed: oldest claim (or heartbeat) first
      req.push("ZRANGE", fn.key("claimed"), std::to_string(*from), std::to_string(*from + n - 1));
    }
    auto resp = co_await exec(c, req);
    const auto& els = resp[0].elements;
    if (state == "waiting") {
      for (auto it = els.rbegin(); it != els.rend(); ++it) ids.push_back(it->str);
    } else {
      for (const auto& e : els) ids.push_back(e.str);
    }
    if (static_cast<std::int64_t>(ids.size()) == n) next = std::to_string(*from + n);
  }
  o["jobs"] = co_await read_jobs(c, q, ids);
  o["next"] = next;
  co_return ok(std::move(o));
}

asio::awaitable<api_response> get_job(client& c, const std::string& name, const std::string& id) {
  check_id(c, id);
  auto q = co_await job_queue_of(c, name);
  thoonk::diagnostics diag;
  auto [ec, j] = co_await q.async_get_job(id, capture_diagnostics(diag, nothrow));
  check(ec, diag);
  thoonk::detail::feed_names fn(c.get_config(), name);
  request req;
  req.push("HGET", fn.key("worker_jobs"), id);
  req.push("ZSCORE", fn.key("claimed"), id);
  req.push("LINDEX", fn.job_result_key(id), "0");
  auto resp = co_await exec(c, req);
  json::object o;
  if (j) {
    o = job_json(*j);
  } else if (resp[2].is_string()) {
    // Finished, its result still kept (result_ttl).
    o["id"] = id;
    o["state"] = "finished";
  } else {
    fail(404, "job_not_found",
         "no job '" + id + "' in '" + name +
             "' (never put, finished without a kept result, or "
             "retracted)");
  }
  const bool claimed = j && j->state == job_state::claimed;
  if (claimed && resp[0].is_string()) {
    // `worker\0token` (docs/contract.md, feed.worker_jobs).
    const auto& w = resp[0].str;
    o["worker"] = w.substr(0, w.find('\0'));
  }
  if (claimed && !resp[1].is_null()) o["claimed_at"] = as_int(resp[1]);
  if (resp[2].is_string()) o["result"] = resp[2].str;
  co_return ok(std::move(o));
}

asio::awaitable<api_response> get_workers(client& c, const std::string& name) {
  auto q = co_await job_queue_of(c, name);
  thoonk::diagnostics diag;
  auto [ec, ws] = co_await q.async_get_workers(capture_diagnostics(diag, nothrow));
  check(ec, diag);
  json::array out;
  for (const auto& w : ws) {
    json::object o;
    o["name"] = w.name;
    o["last_heartbeat"] = w.last_heartbeat;
    o["lapses_at"] = w.lapses_at;
    o["alive"] = w.lapses_at >= w.server_now;
    o["description"] = w.description;
    json::array claims;
    for (const auto& cl : w.claims) claims.push_back(json::value(cl.id));
    o["claims"] = std::move(claims);
    out.push_back(std::move(o));
  }
  json::object o;
  o["workers"] = std::move(out);
  co_return ok(std::move(o));
}

asio::awaitable<api_response> get_feed_items(client& c, const std::string& name, const target& t) {
  check_name(c, name);
  auto count = parse_count(t.param("count"), default_page, max_page);
  if (!count)
    fail(400, "invalid_count",
         "count must be a whole number from 1 to " + std::to_string(max_page));
  auto from = parse_offset(t.param("cursor"));
  if (!from) fail(400, "invalid_cursor", "cursor must be the 'next' of a page");
  auto type = co_await type_of(c, name);
  if (!is_feed_type(type))
    fail(409, "wrong_feed_type", "'" + name + "' is a " + type + ", not a feed");
  thoonk::detail::feed_names fn(c.get_config(), name);
  const auto n = static_cast<std::int64_t>(*count);
  request req;
  // Newest first: a feed's highest scores, a sorted feed's tail.
  if (type == "feed")
    req.push("ZREVRANGE", fn.key("ids"), std::to_string(*from), std::to_string(*from + n - 1));
  else
    req.push("LRANGE", fn.key("ids"), std::to_string(-(*from + n)), std::to_string(-(*from + 1)));
  auto resp = co_await exec(c, req);
  std::vector<std::string> ids;
  if (type == "feed") {
    for (const auto& e : resp[0].elements) ids.push_back(e.str);
  } else {
    for (auto it = resp[0].elements.rbegin(); it != resp[0].elements.rend(); ++it)
      ids.push_back(it->str);
  }
  json::array items;
  if (!ids.empty()) {
    request hm;
    hm.push_range("HMGET", std::vector<std::string_view>{fn.key("items")}, ids);
    auto got = co_await exec(c, hm);
    for (std::size_t i = 0; i < ids.size(); ++i) {
      if (!got[0].elements[i].is_string()) continue;  // retracted meanwhile
      json::object it;
      it["id"] = ids[i];
      it["item"] = got[0].elements[i].str;
      items.push_back(std::move(it));
    }
  }
  json::object o;
  o["name"] = name;
  o["type"] = type;
  o["items"] = std::move(items);
  o["next"] = offset_next(ids.size(), n, *from);
  co_return ok(std::move(o));
}

json::object done(std::string_view what) {
  json::object o;
  o["ok"] = true;
  o["done"] = what;
  return o;
}

asio::awaitable<api_response> job_action(client& c, route_id id, const std::string& name,
                                         const std::string& job, const std::string& body) {
  check_id(c, job);
  auto o = parse_body(body);
  auto q = co_await job_queue_of(c, name);
  thoonk::diagnostics diag;
  switch (id) {
    case route_id::job_retry: {
      auto [ec] = co_await q.async_retry(job, capture_diagnostics(diag, nothrow));
      check(ec, diag);
      co_return ok(done("retried"));
    }
    case route_id::job_retract: {
      auto [ec] = co_await q.async_retract(job, capture_diagnostics(diag, nothrow));
      check(ec, diag);
      co_return ok(done("retracted"));
    }
    case route_id::job_abort: {
      abort_options a;
      auto outcome = body_string(o, "outcome");
      if (outcome == "failed") a.outcome = abort_options::failed;
      else if (!outcome.empty() && outcome != "cancelled")
        fail(400, "invalid_body", "outcome must be 'cancelled' or 'failed'");
      a.error = body_string(o, "error");
      if (a.error.empty()) a.error = "aborted from the admin server";
      if (auto* p = o.if_contains("permanent")) {
        if (!p->is_bool()) fail(400, "invalid_body", "'permanent' must be true or false");
        a.permanent = p->as_bool();
      }
      auto [ec] = co_await q.async_abort(job, a, capture_diagnostics(diag, nothrow));
      check(ec, diag);
      co_return ok(done("aborted"));
    }
    case route_id::job_promote: {
      // Run now: a put under the job's id that moves its run_at to now and
      // keeps its item, retry strategy and counters (put_options::update).
      auto [ec, j] = co_await q.async_get_job(job, capture_diagnostics(diag, nothrow));
      check(ec, diag);
      if (!j) fail(404, "job_not_found", "no job '" + job + "' in '" + name + "'");
      if (j->state != job_state::scheduled)
        fail(409, "job_not_scheduled",
             "job '" + job + "' is " + std::string(state_name(j->state)) +
                 ", not scheduled: only a scheduled job can be run now");
      put_options p;
      p.id = job;
      p.run_at = now_epoch_ms();
      p.update.data = update_flags::data_mode::keep;
      p.update.run_at = update_flags::run_at_mode::always;
      p.update.strategy = update_flags::strategy_mode::keep;
      p.update.counters = update_flags::counters_mode::keep;
      auto [ec2, r] = co_await q.async_put(j->item, p, capture_diagnostics(diag, nothrow));
      check(ec2, diag);
      co_return ok(done("promoted"));
    }
    default: break;
  }
  fail(500, "internal", "unknown job action");
}

asio::awaitable<api_response> queue_action(client& c, const options& opts, route_id id,
                                           const std::string& name, const std::string& body) {
  auto o = parse_body(body);
  thoonk::diagnostics diag;
  switch (id) {
    case route_id::pause:
    case route_id::resume: {
      auto q = co_await job_queue_of(c, name);
      std::tuple<boost::system::error_code> got;
      if (id == route_id::pause) got = co_await q.async_pause(capture_diagnostics(diag, nothrow));
      else got = co_await q.async_resume(capture_diagnostics(diag, nothrow));
      check(std::get<0>(got), diag);
      if (id == route_id::pause) co_return ok(done("paused"));
      co_return ok(done("resumed"));
    }
    case route_id::rate_limit: {
      auto* v = o.if_contains("rate_limit");
      if (!v || !v->is_int64() || v->as_int64() < 0 || v->as_int64() > 1000000)
        fail(400, "invalid_body",
             "send {\"rate_limit\": N}, N a whole number of claims per second from 1 to "
             "1000000, or 0 for no limit");
      co_await job_queue_of(c, name);
      auto [ec] = co_await c.async_set_config(name, std::string(job_config::rate_limit),
                                              std::to_string(v->as_int64()),
                                              capture_diagnostics(diag, nothrow));
      check(ec, diag);
      co_return ok(done("rate_limit"));
    }
    case route_id::retry_dead: {
      auto q = co_await job_queue_of(c, name);
      std::size_t count = opts.max_retry_batch;
      if (auto* v = o.if_contains("count")) {
        if (!v->is_int64() || v->as_int64() < 1 ||
            v->as_int64() > static_cast<std::int64_t>(opts.max_retry_batch))
          fail(400, "invalid_body",
               "count must be a whole number from 1 to " + std::to_string(opts.max_retry_batch));
        count = static_cast<std::size_t>(v->as_int64());
      }
      auto cursor = body_string(o, "cursor");
      if (!cursor.empty() && !parse_offset(cursor))
        fail(400, "invalid_cursor", "cursor must be the 'next' of the previous answer");
      auto [ec, page] =
          co_await q.async_get_dead_letters(cursor, count, capture_diagnostics(diag, nothrow));
      check(ec, diag);
      std::int64_t retried = 0;
      json::array errors;
      for (const auto& j : page.jobs) {
        thoonk::diagnostics d;
        auto [e] = co_await q.async_retry(j.id, capture_diagnostics(d, nothrow));
        if (!e) {
          ++retried;
          continue;
        }
        // A job retried or retracted by someone else meanwhile is no
        // failure of this call; anything else is reported per job.
        if (e == thoonk::error::job_not_stalled || e == thoonk::error::job_not_found) continue;
        json::object err;
        err["id"] = j.id;
        err["code"] = code_for(e);
        err["message"] = e.message();
        errors.push_back(std::move(err));
      }
      json::object r;
      r["ok"] = errors.empty();
      r["retried"] = retried;
      r["errors"] = std::move(errors);
      r["next"] = page.next;
      co_return ok(std::move(r));
    }
    case route_id::delete_queue: {
      co_await queue_type(c, name);
      if (body_string(o, "confirm") != name)
        fail(400, "confirmation_required",
             "to delete the queue and all its jobs, send {\"confirm\": \"<the queue's name>\"}");
      auto [ec] = co_await c.async_delete_feed(name, capture_diagnostics(diag, nothrow));
      check(ec, diag);
      co_return ok(done("deleted"));
    }
    default: break;
  }
  fail(500, "internal", "unknown queue action");
}

}  // namespace

api_response error_response(unsigned status, std::string_view code, std::string_view message,
                            std::string_view server_message) {
  json::object e;
  e["code"] = code;
  e["message"] = message;
  if (!server_message.empty()) e["server"] = server_message;
  json::object o;
  o["error"] = std::move(e);
  return api_response{status, json::serialize(o)};
}

asio::awaitable<api_response> api::dispatch(api_request& r) {
  const auto& p = r.params;
  switch (r.id) {
    case route_id::queues: co_return co_await get_queues(c_, r.t);
    case route_id::queue: co_return co_await get_queue(c_, p.at(0));
    case route_id::jobs: co_return co_await get_jobs(c_, p.at(0), r.t);
    case route_id::job: co_return co_await get_job(c_, p.at(0), p.at(1));
    case route_id::workers: co_return co_await get_workers(c_, p.at(0));
    case route_id::feeds: co_return co_await get_feeds(c_, r.t);
    case route_id::feed_items: co_return co_await get_feed_items(c_, p.at(0), r.t);
    case route_id::job_retry:
    case route_id::job_retract:
    case route_id::job_abort:
    case route_id::job_promote: co_return co_await job_action(c_, r.id, p.at(0), p.at(1), r.body);
    case route_id::pause:
    case route_id::resume:
    case route_id::rate_limit:
    case route_id::retry_dead:
    case route_id::delete_queue: co_return co_await queue_action(c_, opts_, r.id, p.at(0), r.body);
    case route_id::page:
    case route_id::events: break;
  }
  co_return error_response(404, "not_found", "no such API route");
}

asio::awaitable<std::optional<api_response>> api::check_job_queue(std::string name) {
  std::optional<api_error> err;
  try {
    co_await job_queue_of(c_, name);
    co_return std::nullopt;
  } catch (api_error& e) {
    err = std::move(e);
  } catch (const std::exception& e) {
    err = api_error{500, "internal", e.what(), {}};
  }
  co_return error_response(err->status, err->code, err->message, err->server);
}

asio::awaitable<api_response> api::handle(api_request r) {
  std::optional<api_error> err;
  try {
    co_return co_await dispatch(r);
  } catch (api_error& e) {
    err = std::move(e);
  } catch (const std::bad_alloc&) {
    err = api_error{500, "out_of_memory", "the admin server ran out of memory", {}};
  } catch (const std::exception& e) {
    err = api_error{500, "internal", e.what(), {}};
  }
  co_return error_response(err->status, err->code, err->message, err->server);
}

}  // namespace thoonk::admin::detail
