// Worker processes killed with SIGKILL at random moments while a queue of
// jobs runs. Each worker (worker/fault_worker.cpp) logs every claim and
// finish; the test kills one at random, starts a replacement, and at the
// end checks the history: no job lost, every job finished exactly once on
// the server, and each job claimed more than once only because a worker
// holding it was killed (or its lease lapsed while it lived, which its log
// shows as a refused finish). It also times each kill to the reclaim of
// the jobs the killed worker held.
#include "fault_support.hpp"
#include "support/helpers.hpp"

#include <algorithm>
#include <csignal>
#include <fstream>
#include <functional>
#include <future>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <thread>

using namespace thoonk::test;
using namespace thoonk::faults;

namespace {

// One line of a worker's log (see fault_worker.cpp).
struct log_record {
  std::int64_t t = 0;
  char kind = 0;
  std::string id;
  std::int64_t token = 0;
};

std::vector<log_record> read_log(const std::string& path) {
  std::vector<log_record> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream l(line);
    log_record r;
    std::string kind;
    l >> r.t >> kind;
    if (kind.size() != 1) continue;
    r.kind = kind[0];
    if (r.kind != 'E') l >> r.id >> r.token;
    out.push_back(std::move(r));
  }
  return out;
}

// One worker process's life: its log, and when the test killed it.
struct incarnation {
  std::string log;
  bool killed = false;
  std::int64_t kill_ms = 0;
};

std::int64_t percentile(std::vector<std::int64_t> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<std::size_t>(p * static_cast<double>(v.size() - 1))];
}

}  // namespace

TEST_CASE("faults: worker processes killed with SIGKILL lose no job", "[faults][worker_kill]") {
  const auto& prof = current_profile();
  constexpr int workers = 4;
  constexpr auto claim_timeout = 1000ms;
  constexpr int maintenance_ms = 200;
  thoonk::test::redis_server srv;
  temp_dir dir("thoonk-faults");
  asio::io_context ioc;
  thoonk::client admin(ioc.get_executor(), fault_config(srv.url()));
  const std::string name = "faults-jobs";
  std::vector<std::string> ids;
  thoonk::job_queue q;
  // When maintenance counted each lapsed lease (job id, steady ms): the
  // `stalled` events of the queue, on the client's thread.
  std::vector<std::pair<std::string, std::int64_t>> stalls;
  thoonk::subscription events;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await admin.async_connect(asio::use_awaitable);
        auto s = requeue_on_lapse(claim_timeout);
        s.events = true;
        q = co_await thoonk::job_queue::async_create_or_open(admin, name, s, asio::use_awaitable);
        std::function<void(const thoonk::job_event&)> on_event = [&](const thoonk::job_event& e) {
          if (e.kind == thoonk::job_event::kind_t::stalled) stalls.emplace_back(e.id, now_ms());
        };
        events = co_await q.async_subscribe_events(on_event, asio::use_awaitable);
        std::vector<std::string> items(static_cast<std::size_t>(prof.jobs), "job");
        ids = co_await q.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
      },
      60s);
  REQUIRE(ids.size() == static_cast<std::size_t>(prof.jobs));
  // From here the client runs on its own thread; this one kills workers
  // and asks for counts through futures.
  io_thread client_thread(ioc, prof.scenario_limit + 60s);

  std::vector<incarnation> lives;
  std::vector<std::unique_ptr<logged_process>> procs(workers);
  std::vector<std::size_t> life_of(workers);
  auto spawn = [&](int slot) {
    const std::string base = dir.path() + "/worker-" + std::to_string(lives.size());
    lives.push_back(incarnation{base + ".log"});
    life_of[static_cast<std::size_t>(slot)] = lives.size() - 1;
    procs[static_cast<std::size_t>(slot)] = std::make_unique<logged_process>(
        std::vector<std::string>{THOONK_FAULT_WORKER, srv.url(), name, "2", base + ".log",
                                 std::to_string(prof.scenario_limit.count()), "20",
                                 std::to_string(maintenance_ms)},
        base + ".out");
  };
  for (int i = 0; i < workers; ++i) spawn(i);

  // Each kill happens once the run has finished a random share (2 % to
  // 90 %) of the jobs, at a random moment of the 20–80 ms poll, so every
  // kill lands while jobs run however fast this machine is.
  std::mt19937 rng{std::random_device{}()};
  std::vector<std::int64_t> kill_at;
  for (int i = 0; i < prof.worker_kills; ++i)
    kill_at.push_back(
        std::uniform_int_distribution<std::int64_t>(prof.jobs / 50, prof.jobs * 9 / 10)(rng));
  std::sort(kill_at.begin(), kill_at.end());
  const auto t0 = std::chrono::steady_clock::now();
  int kills = 0;
  std::int64_t finishes = 0;
  while (finishes < prof.jobs && std::chrono::steady_clock::now() - t0 < prof.scenario_limit) {
    std::this_thread::sleep_for(
        std::chrono::milliseconds(std::uniform_int_distribution<int>(20, 80)(rng)));
    if (kills < prof.worker_kills && finishes >= kill_at[static_cast<std::size_t>(kills)]) {
      const int slot = std::uniform_int_distribution<int>(0, workers - 1)(rng);
      auto& life = lives[life_of[static_cast<std::size_t>(slot)]];
      life.kill_ms = now_ms();
      procs[static_cast<std::size_t>(slot)]->kill_now();
      life.killed = true;
      ++kills;
      spawn(slot);
    }
    auto counts = q.async_counts(asio::use_future);
    if (counts.wait_for(5s) == std::future_status::ready) finishes = counts.get().finishes;
  }
  // The survivors leave on SIGTERM; one that does not within 5 s is killed.
  for (auto& p : procs) p->signal(SIGTERM);
  for (auto& p : procs)
    if (!p->wait_for(5s)) p->kill_now();
  const auto elapsed = ms_since(t0);

  // The server's side: every job finished once, nothing left anywhere.
  thoonk::job_counts counts;
  std::vector<std::int64_t> results;
  {
    auto c = q.async_counts(asio::use_future);
    thoonk::request r;
    for (auto& id : ids) r.push("LLEN", "feed.jobfinished:" + name + std::string(1, '\0') + id);
    auto lens = admin.conn().async_exec(r, asio::use_future);
    REQUIRE(c.wait_for(30s) == std::future_status::ready);
    REQUIRE(lens.wait_for(30s) == std::future_status::ready);
    counts = c.get();
    for (auto& v : lens.get()) results.push_back(v.integer);
  }
  std::promise<void> stopped;
  asio::post(ioc, [&] {
    events = {};
    admin.stop();
    stopped.set_value();
  });
  REQUIRE(stopped.get_future().wait_for(10s) == std::future_status::ready);
  client_thread.stop();

  // The workers' side.
  std::map<std::string, int> claims, ok_finishes, allowed;
  std::map<std::string, std::vector<std::int64_t>> claim_times;
  std::uint64_t operations = 0, unknown = 0, lapsed_alive = 0, claim_errors = 0;
  std::vector<std::pair<std::int64_t, std::string>> in_flight_at_kill;  // kill time, job
  for (const auto& life : lives) {
    const auto recs = read_log(life.log);
    std::map<std::string, std::int64_t> open;  // "id token" claimed, not yet ended
    for (const auto& r : recs) {
      ++operations;
      const std::string tag = r.id + " " + std::to_string(r.token);
      switch (r.kind) {
        case 'C':
          ++claims[r.id];
          claim_times[r.id].push_back(r.t);
          open[tag] = r.t;
          break;
        case 'F':
          ++ok_finishes[r.id];
          open.erase(tag);
          break;
        case 'L':
          ++lapsed_alive;
          ++allowed[r.id];
          open.erase(tag);
          break;
        case 'U':
          ++unknown;
          ++allowed[r.id];
          open.erase(tag);
          break;
        case 'N': open.erase(tag); break;
        case 'E': ++claim_errors; break;
        default: break;
      }
    }
    if (!life.killed) continue;
    for (const auto& [tag, t] : open) {
      const std::string id = tag.substr(0, tag.find(' '));
      ++allowed[id];
      in_flight_at_kill.emplace_back(life.kill_ms, id);
    }
  }
  std::uint64_t duplicates = 0, excess = 0, double_finishes = 0;
  for (const auto& [id, n] : claims) {
    duplicates += static_cast<std::uint64_t>(n - 1);
    if (n - 1 > allowed[id]) ++excess;
  }
  for (const auto& [id, n] : ok_finishes) double_finishes += n > 1;
  // Kill to reclaim: when maintenance counted the lapsed lease of each job
  // the killed worker held (and put it back at the end of the line), and
  // when a worker claimed it again (after the jobs ahead of it). A job with
  // neither had finished on the server before the kill (its log line did
  // not make it).
  std::vector<std::int64_t> reclaim, reclaimed_run;
  std::uint64_t finished_unlogged = 0;
  for (const auto& [kill_ms, id] : in_flight_at_kill) {
    const auto runs_before = reclaimed_run.size();
    for (const auto& [sid, t] : stalls) {
      if (sid == id && t > kill_ms) {
        reclaim.push_back(t - kill_ms);
        break;
      }
    }
    for (auto t : claim_times[id]) {
      if (t > kill_ms) {
        reclaimed_run.push_back(t - kill_ms);
        break;
      }
    }
    finished_unlogged += reclaimed_run.size() == runs_before;
  }
  const auto [lost, twice] = audit_results(results);

  INFO("profile " << prof.name << ": " << prof.jobs << " jobs, " << kills << " kills, " << elapsed
                  << " ms, " << lives.size() << " worker processes, " << operations
                  << " logged operations, " << in_flight_at_kill.size()
                  << " jobs in flight at kills, " << reclaim.size() << " requeued, "
                  << reclaimed_run.size() << " claimed again, " << lapsed_alive
                  << " leases lapsed in live workers, " << claim_errors << " claim errors");
  CHECK(kills == prof.worker_kills);
  CHECK(counts.finishes == prof.jobs);
  CHECK(counts.items == 0);
  CHECK(counts.waiting == 0);
  CHECK(counts.claimed == 0);
  CHECK(counts.stalled == 0);
  CHECK(lost == 0);
  CHECK(twice == 0);
  CHECK(double_finishes == 0);
  // At most one extra claim per kill that caught the job in flight (or per
  // lease that lapsed in a live worker, refused at its finish).
  CHECK(excess == 0);
  CHECK(duplicates <= in_flight_at_kill.size() + lapsed_alive + unknown);
  // The kills caught jobs in flight, and those were claimed again.
  CHECK(!in_flight_at_kill.empty());
  CHECK(!reclaim.empty());

  std::ostringstream rec;
  rec << "kill → requeued p50 " << percentile(reclaim, 0.5) << " ms, max "
      << percentile(reclaim, 1.0) << " ms (claim_timeout " << claim_timeout.count()
      << " ms, maintenance every " << maintenance_ms << " ms); → claimed again p50 "
      << percentile(reclaimed_run, 0.5) << " ms";
  report({"workers SIGKILLed: " + std::to_string(kills) + " kills (" +
              std::to_string(in_flight_at_kill.size()) + " jobs in flight, " +
              std::to_string(finished_unlogged) + " of them finished before the kill), " +
              std::to_string(prof.jobs) + " jobs",
          operations, lost, duplicates, unknown, rec.str()});
}
