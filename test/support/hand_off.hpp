// Helpers for the hand-off tests (docs/jobs.md "Hand-off"): a taker's offer
// as the server holds it, a queue on a restricted user's client, and a put
// made while that client's subscriber is locked out.
#pragma once

#include "support/helpers.hpp"

#include "detail/keys.hpp"
#include "jobs/job_keys.hpp"
#include "thoonk_lua_scripts.hpp"

#include <thoonk/job_queue.hpp>

#include <string>
#include <utility>

namespace thoonk::test {

/// Worker `w`'s offer on f's queue (`<lapses at>:<slots>`), or "" when it
/// has none.
inline asio::awaitable<std::string> offer_of(thoonk::connection& c, const std::string& queue,
                                             const std::string& w) {
  auto v = co_await cmd(c, "HGET", key("takers", queue), w);
  co_return v.type == thoonk::resp3::type::null ? std::string{} : v.str;
}

/// Waits (up to 5 s) until worker `w` offers `slots` idle slots (0: until
/// it has no offer).
inline asio::awaitable<bool> offered(thoonk::connection& c, const std::string& queue,
                                     const std::string& w, int slots) {
  const auto suffix = ":" + std::to_string(slots);
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    const auto o = co_await offer_of(c, queue, w);
    if (slots == 0 ? o.empty() : o.size() > suffix.size() && o.ends_with(suffix)) co_return true;
    co_await sleep_for(2ms);
  }
  co_return false;
}

/// Creates job queue `name` on `c` with the default settings.
inline asio::awaitable<thoonk::job_queue> create_job_queue(thoonk::client& c, std::string name) {
  thoonk::job_queue::settings s;
  thoonk::job_queue_options o;
  auto q = co_await thoonk::job_queue::async_create_or_open(c, std::move(name), std::move(s),
                                                            std::move(o), asio::use_awaitable);
  co_return q;
}

/// The job queue `name`, made by `p.pub` (every permission), and the same
/// queue on the client of `p`'s gap user, whose permissions are `rules`
/// (ACL SETUSER ... reset on >pass rules...).
template <class... Rules>
asio::awaitable<std::pair<thoonk::job_queue, thoonk::job_queue>> restricted_pair(
    gap_parties& p, const std::string& name, const Rules&... rules) {
  co_await p.start();
  co_await p.user.create_with(p.admin, rules...);
  auto q = co_await create_job_queue(p.pub, name);
  auto theirs = co_await thoonk::job_queue::async_open(*p.c, name, asio::use_awaitable);
  co_return std::pair{std::move(q), std::move(theirs)};
}

/// In one write from `admin`: locks the gap user out (its subscriber
/// connection killed, no reconnect), then puts `item` on `name` with the
/// library's put script. The server runs the put before it reads anything
/// the runner sends after losing its subscriber, so the runner's offer is
/// still there: the put hands the job off, and the message reaches no one.
/// Returns the job's id.
inline asio::awaitable<std::string> put_while_unsubscribed(gap_parties& p, const std::string& name,
                                                           const std::string& item) {
  const thoonk::detail::feed_names names(p.pub.get_config(), name);
  const thoonk::detail::jobs::job_keys k(names);
  const auto& put = thoonk::detail::scripts::jobs_put();
  thoonk::request r;
  r.push("ACL", "SETUSER", p.user.name, "off");
  r.push("CLIENT", "KILL", "USER", p.user.name, "TYPE", "pubsub");
  std::vector<std::string> tail = k.keys;
  tail.push_back(std::to_string(std::chrono::duration_cast<std::chrono::milliseconds>(
                                    std::chrono::system_clock::now().time_since_epoch())
                                    .count()));
  tail.push_back("0");
  tail.push_back(k.wake_channel);
  tail.push_back(item);
  const std::string nkeys = std::to_string(k.keys.size());
  const std::string_view head[] = {put.source(), nkeys};
  r.push_range("EVAL", head, tail);
  auto resp = co_await raw_exec(p.admin, r);
  REQUIRE(resp.size() == 3);
  CHECK(resp[1].integer == 1);
  REQUIRE(resp[2].elements.size() == 1);
  co_return resp[2].elements[0].str;
}

}  // namespace thoonk::test
