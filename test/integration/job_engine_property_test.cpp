// A model-based property test of the job engine: seeded random
// interleavings of put-with-id (random flags and run_at), claim, finish,
// fail, cancel, lease lapse and stale finishes on five ids, checked after
// every step against a plain model of docs/jobs.md §9: an id is never
// claimed twice at once, nothing is lost (every job's item, counts and
// held put are what the model says), counts per state match.
//
// THOONK_PROPERTY_SEED=<n> replays a seed; THOONK_PROPERTY_STEPS=<n>
// changes the number of steps (default 10,000).
#include "support/job_engine.hpp"

#include <cstdlib>
#include <deque>
#include <map>
#include <random>
#include <sstream>

using namespace thoonk::test;
using flags = thoonk::update_flags;
using state = thoonk::job_state;

namespace {

constexpr std::int64_t max_retries = 3;
constexpr std::int64_t max_stalls = 2;

struct held_model {
  std::string item;
  thoonk::epoch_ms run_at = 0;
  flags f;
};

struct job_model {
  state st = state::waiting;
  std::string item;
  thoonk::epoch_ms run_at = 0;  // scheduled only
  std::int64_t retries = 0, stalls = 0, failures = 0;
  std::optional<held_model> held;
  std::optional<thoonk::claimed_job> claim;  // while claimed
};

thoonk::epoch_ms merge(flags::run_at_mode m, thoonk::epoch_ms cur, thoonk::epoch_ms put) {
  switch (m) {
    case flags::run_at_mode::always: return put;
    case flags::run_at_mode::if_later: return put > cur ? put : cur;
    case flags::run_at_mode::if_earlier: return put < cur ? put : cur;
    case flags::run_at_mode::never: return cur;
  }
  return cur;
}

class model {
 public:
  std::map<std::string, job_model> jobs;

  // A put for an id that is not claimed (de-duplication), as the engine
  // applies it; `now` is the put's time.
  void dispatch(const std::string& id, const std::string& item, thoonk::epoch_ms run_at,
                const flags& f, thoonk::epoch_ms now) {
    auto it = jobs.find(id);
    if (it == jobs.end()) {
      job_model j;
      j.item = item;
      j.st = run_at > now ? state::scheduled : state::waiting;
      j.run_at = j.st == state::scheduled ? run_at : 0;
      jobs[id] = j;
      return;
    }
    auto& j = it->second;
    const thoonk::epoch_ms cur = j.st == state::scheduled ? j.run_at : 0;
    if (f.data == flags::data_mode::replace) j.item = item;
    const auto ra = merge(f.run_at, cur, run_at);
    if (f.counters == flags::counters_mode::reset) j.retries = j.stalls = j.failures = 0;
    if (ra > now) {
      j.st = state::scheduled;
      j.run_at = ra;
    } else {
      j.st = state::waiting;
      j.run_at = 0;
    }
  }

  void put(const std::string& id, const std::string& item, thoonk::epoch_ms run_at, const flags& f,
           thoonk::epoch_ms now) {
    auto it = jobs.find(id);
    if (it != jobs.end() && it->second.st == state::claimed) {
      auto& h = it->second.held;
      if (!h) {
        h = held_model{item, run_at, f};
      } else {
        if (f.data == flags::data_mode::replace) h->item = item;
        h->run_at = merge(f.run_at, h->run_at, run_at);
        h->f = f;
      }
      return;
    }
    dispatch(id, item, run_at, f, now);
  }

  // The claim of `id` ended (the job is in its new state, or gone).
  void release(const std::string& id, std::optional<held_model> h, thoonk::epoch_ms now) {
    if (h) dispatch(id, h->item, h->run_at, h->f, now);
  }
};

std::string name_of(state s) { return Catch::StringMaker<state>::convert(s); }

}  // namespace

TEST_CASE("job engine property: random interleavings agree with the model after every step",
          "[job][property][dedupe][held][fail][cancel][claim][finish][maintain]") {
  std::uint64_t seed = std::random_device{}();
  if (const char* s = std::getenv("THOONK_PROPERTY_SEED")) seed = std::strtoull(s, nullptr, 10);
  int steps = 10000;
  if (const char* s = std::getenv("THOONK_PROPERTY_STEPS")) steps = std::atoi(s);
  WARN("job engine property test: seed " << seed << " (THOONK_PROPERTY_SEED), " << steps
                                         << " steps");
  std::mt19937_64 rng(seed);
  auto pick = [&](int n) { return static_cast<int>(rng() % static_cast<std::uint64_t>(n)); };

  fixture f("prop");
  run_coro(
      f.ioc,
      [&]() -> asio::awaitable<void> {
        thoonk::job_queue::settings s;
        s.retry.max_retries = max_retries;
        s.retry.max_stalls = max_stalls;
        s.retry.min_backoff = 0ms;  // a retry without retry_at is claimable at once
        s.retry.max_backoff = 0ms;
        auto q = co_await engine_queue(f, s);
        model m;
        std::deque<std::string> history;
        std::vector<thoonk::claimed_job> ended;  // claims that are over
        const std::string ids[] = {"a", "b", "c", "d", "e"};
        const thoonk::epoch_ms far = thoonk::now_epoch_ms() + 10 * 3600000;
        int counter = 0;

        for (int step = 0; step < steps; ++step) {
          const int op = pick(100);
          const std::string id = ids[pick(5)];
          std::ostringstream what;
          const auto now = thoonk::now_epoch_ms();
          if (op < 35) {
            // put with an id, random flags and run_at.
            flags fl;
            fl.data = pick(2) ? flags::data_mode::replace : flags::data_mode::keep;
            fl.run_at = static_cast<flags::run_at_mode>(pick(4));
            fl.counters = pick(5) == 0 ? flags::counters_mode::reset : flags::counters_mode::keep;
            const thoonk::epoch_ms at = pick(3) == 0 ? far + pick(1000) : now - 1 - pick(1000);
            const std::string item = "v" + std::to_string(++counter);
            what << "put " << id << " " << item << " run_at " << (at > now ? "far" : "past")
                 << " data " << static_cast<int>(fl.data) << " mode " << static_cast<int>(fl.run_at)
                 << " counters " << static_cast<int>(fl.counters);
            thoonk::put_options o;
            o.id = id;
            o.run_at = at;
            o.update = fl;
            auto r = co_await q.async_put(item, o, asio::use_awaitable);
            const bool claimed = m.jobs.count(id) && m.jobs[id].st == state::claimed;
            const bool existed = m.jobs.count(id) > 0;
            CHECK(r.outcome == (claimed   ? thoonk::put_result::outcome_t::held
                                : existed ? thoonk::put_result::outcome_t::updated
                                          : thoonk::put_result::outcome_t::added));
            m.put(id, item, at, fl, thoonk::now_epoch_ms());
          } else if (op < 60) {
            what << "claim";
            auto j = co_await try_claim(q);
            std::vector<std::string> waiting;
            for (auto& [k, v] : m.jobs)
              if (v.st == state::waiting) waiting.push_back(k);
            if (!j) {
              CHECK(waiting.empty());
            } else {
              what << " -> " << j->id;
              auto it = m.jobs.find(j->id);
              REQUIRE(it != m.jobs.end());
              // Never claimed twice at once; only waiting jobs are claimable.
              CHECK(it->second.st == state::waiting);
              CHECK(j->item == it->second.item);
              CHECK(j->failures == it->second.failures);
              it->second.st = state::claimed;
              it->second.claim = *j;
            }
          } else {
            // End a claim, if the id is claimed: finish, fail, cancel or lapse.
            auto it = m.jobs.find(id);
            if (it == m.jobs.end() || it->second.st != state::claimed) {
              // A stale claim, if any: must be refused and change nothing.
              if (!ended.empty()) {
                auto& old = ended[static_cast<std::size_t>(pick(static_cast<int>(ended.size())))];
                what << "stale finish " << old.id << " token " << old.token;
                auto [ec] = co_await q.async_finish(old, nothrow);
                CHECK(ec);
              } else {
                what << "nothing";
              }
            } else {
              auto& jm = it->second;
              const auto claim = *jm.claim;
              auto held = jm.held;
              jm.held.reset();
              jm.claim.reset();
              const int kind = pick(4);
              if (kind == 0) {
                what << "finish " << id;
                co_await q.async_finish(claim, asio::use_awaitable);
                m.jobs.erase(it);
              } else if (kind == 1) {
                const bool permanent = pick(4) == 0;
                const bool later = pick(3) == 0;
                what << "fail " << id << (permanent ? " permanent" : "") << (later ? " later" : "");
                thoonk::fail_options fo;
                fo.permanent = permanent;
                if (later) fo.retry_at = far + pick(1000);
                auto r = co_await q.async_fail(claim, "e" + std::to_string(step), fo,
                                               asio::use_awaitable);
                ++jm.retries;
                ++jm.failures;
                if (permanent || jm.retries >= max_retries) {
                  CHECK(r.outcome == thoonk::fail_result::outcome_t::dead_lettered);
                  jm.st = state::stalled;
                  jm.run_at = 0;
                } else {
                  CHECK(r.outcome == thoonk::fail_result::outcome_t::retry_scheduled);
                  jm.st = later ? state::scheduled : state::waiting;
                  jm.run_at = later ? *fo.retry_at : 0;
                }
              } else if (kind == 2) {
                what << "cancel " << id;
                co_await q.async_cancel(claim, asio::use_awaitable);
                ++jm.failures;
                jm.st = state::waiting;
              } else {
                what << "lapse " << id;
                co_await lapse(f, id);
                auto rep = co_await q.async_maintain(no_stats(), asio::use_awaitable);
                CHECK(rep.requeued + rep.stalled == 1);
                ++jm.stalls;
                ++jm.failures;
                jm.st = jm.stalls >= max_stalls ? state::stalled : state::waiting;
              }
              ended.push_back(claim);
              if (ended.size() > 50) ended.erase(ended.begin());
              m.release(id, held, thoonk::now_epoch_ms());
            }
          }
          history.push_back(std::to_string(step) + ": " + what.str());
          if (history.size() > 30) history.pop_front();

          // The check: every job as the model says, and the counts.
          auto all = co_await q.async_get_jobs(asio::use_awaitable);
          std::map<std::string, thoonk::job_info> got;
          for (auto& j : all) got[j.id] = std::move(j);
          bool ok = got.size() == m.jobs.size();
          std::ostringstream diff;
          for (const auto& [k, v] : m.jobs) {
            auto g = got.find(k);
            if (g == got.end()) {
              ok = false;
              diff << k << ": missing\n";
              continue;
            }
            const auto& j = g->second;
            const bool same =
                j.state == v.st && j.item == v.item &&
                (v.st != state::scheduled || j.run_at == v.run_at) && j.retry_count == v.retries &&
                j.stall_count == v.stalls && j.failures == v.failures &&
                j.held.has_value() == v.held.has_value() &&
                (!v.held || (j.held->item == v.held->item && j.held->run_at == v.held->run_at));
            if (!same) {
              ok = false;
              diff << k << ": server " << name_of(j.state) << " " << j.item << " rc "
                   << j.retry_count << " sc " << j.stall_count << " f " << j.failures << " held "
                   << (j.held ? *j.held->item : "-") << " run_at " << j.run_at << "; model "
                   << name_of(v.st) << " " << v.item << " rc " << v.retries << " sc " << v.stalls
                   << " f " << v.failures << " held " << (v.held ? v.held->item : "-") << " run_at "
                   << v.run_at << "\n";
            }
          }
          auto c = co_await q.async_counts(asio::use_awaitable);
          std::int64_t w = 0, cl = 0, st = 0, sc = 0, h = 0;
          for (const auto& [k, v] : m.jobs) {
            w += v.st == state::waiting;
            cl += v.st == state::claimed;
            st += v.st == state::stalled;
            sc += v.st == state::scheduled;
            h += v.held.has_value();
          }
          if (c.waiting != w || c.claimed != cl || c.stalled != st || c.scheduled != sc ||
              c.held != h) {
            ok = false;
            diff << "counts: server w " << c.waiting << " c " << c.claimed << " s " << c.stalled
                 << " sch " << c.scheduled << " held " << c.held << "; model " << w << " " << cl
                 << " " << st << " " << sc << " " << h << "\n";
          }
          if (!ok) {
            std::ostringstream hist;
            for (const auto& line : history) hist << line << "\n";
            FAIL("seed " << seed << ", step " << step << " disagrees:\n"
                         << diff.str() << "last steps:\n"
                         << hist.str());
          }
        }
      },
      std::chrono::milliseconds(600000));
}
