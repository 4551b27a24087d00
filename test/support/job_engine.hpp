// Helpers for the job engine's integration tests (scheduling, de-duplication,
// retries, dead letters): a queue made with typed settings, puts with
// options, and reads of a job's state.
#pragma once

#include "support/helpers.hpp"

#include <thoonk/job_queue.hpp>

#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace thoonk::test {

/// Connects f's client and creates f.name as a job queue with `s`.
inline asio::awaitable<thoonk::job_queue> engine_queue(fixture& f,
                                                       thoonk::job_queue::settings s = {},
                                                       thoonk::job_queue_options o = {}) {
  co_await f.c.async_connect(asio::use_awaitable);
  auto q = co_await thoonk::job_queue::async_create_or_open(f.c, f.name, std::move(s), std::move(o),
                                                            asio::use_awaitable);
  co_return q;
}

/// Settings whose failed jobs come back after a short backoff (min..max),
/// dead letters after `max_retries` failures.
inline thoonk::job_queue::settings retries(std::int64_t max_retries,
                                           std::chrono::milliseconds min_backoff,
                                           std::chrono::milliseconds max_backoff) {
  thoonk::job_queue::settings s;
  s.retry.max_retries = max_retries;
  s.retry.min_backoff = min_backoff;
  s.retry.max_backoff = max_backoff;
  return s;
}

/// Connects `other` (another client) and opens the queue `name` on it.
inline asio::awaitable<thoonk::job_queue> open_on(thoonk::client& other, std::string name) {
  co_await other.async_connect(asio::use_awaitable);
  auto q = co_await thoonk::job_queue::async_open(other, std::move(name), asio::use_awaitable);
  co_return q;
}

/// A put with an explicit id, run_at and update flags.
inline asio::awaitable<thoonk::put_result> put_id(thoonk::job_queue& q, std::string id,
                                                  std::string item, thoonk::epoch_ms run_at,
                                                  thoonk::update_flags flags = {}) {
  thoonk::put_options o;
  o.id = std::move(id);
  o.run_at = run_at;
  o.update = flags;
  auto r = co_await q.async_put(std::move(item), std::move(o), asio::use_awaitable);
  co_return r;
}

/// Puts at least `n` jobs of `item` on `q` in a trickle: one to three per
/// put, 0 – 3 ms apart, as `rng` draws, so that workers waiting on the queue
/// are often dry. Returns the ids in put order.
inline asio::awaitable<std::vector<std::string>> trickle_put(thoonk::job_queue& q, std::size_t n,
                                                             std::minstd_rand& rng,
                                                             std::string item) {
  std::vector<std::string> ids;
  while (ids.size() < n) {
    std::vector<std::string> items(1 + rng() % 3, item);
    auto got =
        co_await q.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
    ids.insert(ids.end(), got.begin(), got.end());
    co_await sleep_for(std::chrono::milliseconds(rng() % 4));
  }
  co_return ids;
}

/// Checks that `seen` counts each of `ids` exactly once and holds no other
/// id: every job of a stress test ran (or finished) once.
inline void check_each_once(const std::vector<std::string>& ids,
                            const std::map<std::string, int>& seen) {
  std::size_t once = 0;
  for (const auto& id : ids) {
    auto it = seen.find(id);
    once += it != seen.end() && it->second == 1;
  }
  CHECK(once == ids.size());
  CHECK(seen.size() == ids.size());
}

/// Checks that a stress test met no error it did not expect (each listed).
inline void check_none_unexpected(const std::vector<std::string>& unexpected) {
  for (const auto& e : unexpected) UNSCOPED_INFO(e);
  CHECK(unexpected.empty());
}

/// A put (new id) that runs at `run_at`.
inline asio::awaitable<std::string> put_at(thoonk::job_queue& q, std::string item,
                                           thoonk::epoch_ms run_at) {
  thoonk::put_options o;
  o.run_at = run_at;
  auto r = co_await q.async_put(std::move(item), std::move(o), asio::use_awaitable);
  co_return r.id;
}

/// Puts `n` jobs whose item is `item` in one put_many; their ids, in order.
inline asio::awaitable<std::vector<std::string>> put_copies(thoonk::job_queue& q, std::size_t n,
                                                            std::string item) {
  std::vector<std::string> items(n, std::move(item));
  auto ids =
      co_await q.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
  co_return ids;
}

/// get_job, which must find the job.
inline asio::awaitable<thoonk::job_info> job_of(thoonk::job_queue& q, std::string id) {
  auto j = co_await q.async_get_job(std::move(id), asio::use_awaitable);
  REQUIRE(j);
  co_return std::move(*j);
}

/// One claim attempt on the server (timeout 0): the job, or nullopt when
/// none is claimable.
inline asio::awaitable<std::optional<thoonk::claimed_job>> try_claim(thoonk::job_queue& q) {
  auto [ec, j] = co_await q.async_claim(std::chrono::milliseconds(0), nothrow);
  if (ec == thoonk::error::queue_empty) co_return std::nullopt;
  REQUIRE(!ec);
  co_return std::move(j);
}

/// Makes the claim of `id` look lapsed (claim time 0) so that the next
/// maintain() counts a stall.
inline asio::awaitable<void> lapse(fixture& f, const std::string& id) {
  co_await cmd(f.c.conn(), "ZADD", key("claimed", f.name), "XX", "0", id);
}

}  // namespace thoonk::test

namespace Catch {
template <>
struct StringMaker<thoonk::job_state> {
  static std::string convert(thoonk::job_state s) {
    switch (s) {
      case thoonk::job_state::waiting: return "waiting";
      case thoonk::job_state::claimed: return "claimed";
      case thoonk::job_state::stalled: return "stalled";
      case thoonk::job_state::scheduled: return "scheduled";
    }
    return "?";
  }
};
}  // namespace Catch
