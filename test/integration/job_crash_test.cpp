// Crash safety: 10,000 jobs, 16 worker coroutines on two client
// objects, one client's connections killed (CLIENT KILL) again and again
// mid-run. At the end every job was finished exactly once, none lost:
// claims whose replies died with the connection are recovered by
// maintenance when they lapse.
#include "support/helpers.hpp"

#include <map>
#include <sstream>

using namespace thoonk::test;
using thoonk::test::run_coro;
using thoonk::test::sleep_for;
using thoonk::test::unique_name;

namespace {

// Ids of the server connections whose name is `name` (CLIENT LIST).
std::vector<std::string> connection_ids(const std::string& list, const std::string& name) {
  std::vector<std::string> out;
  std::istringstream in(list);
  std::string line;
  while (std::getline(in, line)) {
    if (line.find(" name=" + name + " ") == std::string::npos) continue;
    auto p = line.find("id=");
    if (p != 0) continue;
    out.push_back(line.substr(3, line.find(' ') - 3));
  }
  return out;
}

// Kills every connection named `name` (CLIENT LIST, then CLIENT KILL ID of
// each) and returns how many. Under cluster_topology() on every node, each
// with its own list: a node numbers its clients on its own, so an id is
// killed only on the node that listed it.
asio::awaitable<int> kill_named(thoonk::connection& admin, const std::string& name) {
  int kills = 0;
  if (!cluster_topology()) {
    auto list = co_await cmd(admin, "CLIENT", "LIST");
    for (auto& id : connection_ids(list.str, name)) {
      co_await cmd(admin, "CLIENT", "KILL", "ID", id);
      ++kills;
    }
    co_return kills;
  }
  thoonk::request list_req;
  list_req.push("CLIENT", "LIST");
  for (auto port : cluster_ports(false)) {
    auto list = co_await exec_on_node(admin, port, list_req);
    for (auto& id : connection_ids(list.at(0).str, name)) {
      thoonk::request kill;
      kill.push("CLIENT", "KILL", "ID", id);
      co_await exec_on_node(admin, port, kill);
      ++kills;
    }
  }
  co_return kills;
}

struct shared_state {
  bool stop = false;
  std::map<std::string, int> ok_finishes;  // finishes a worker saw succeed
  int claims = 0;
  int transport_errors = 0;
  int lost_claims = 0;
  int workers_done = 0;
};

asio::awaitable<void> worker(thoonk::job_queue q, shared_state* st) {
  while (!st->stop) {
    auto [ec, j] = co_await q.async_claim(200ms, nothrow);
    if (ec == thoonk::error::queue_empty) continue;
    if (ec) {
      ++st->transport_errors;
      co_await sleep_for(10ms);
      continue;
    }
    ++st->claims;
    // "Work" (a little, so claims and finishes overlap the kills), then finish; on an unknown
    // outcome ask again: the answer is success, job_not_found (it was finished) or lost_claim (it
    // lapsed).
    if (st->claims % 7 == 0) co_await sleep_for(1ms);
    for (int attempt = 0; attempt < 50 && !st->stop; ++attempt) {
      auto [fec] = co_await q.async_finish(j, std::string(j.id), nothrow);
      if (!fec) {
        ++st->ok_finishes[j.id];
        break;
      }
      if (fec == thoonk::error::lost_claim) {
        ++st->lost_claims;
        break;
      }
      if (fec == thoonk::error::job_not_found) break;
      ++st->transport_errors;
      co_await sleep_for(10ms);
    }
  }
  ++st->workers_done;
}

}  // namespace

// On a cluster the victim's connections are listed and killed node by node
// (kill_named). There this test found the router's slot gate stranding a
// slot's queued requests (slot_waiters in src/connection/cluster.hpp).
TEST_CASE("job: crash safety with a connection killed repeatedly",
          "[job][crash][counts][maintain][put_many]") {
  asio::io_context ioc;
  const auto victim_name = unique_name("jobs-crash-victim");
  thoonk::client admin{ioc.get_executor(), named_config(unique_name("jobs-crash-admin"))};
  thoonk::client a{ioc.get_executor(), named_config(victim_name)};
  thoonk::client b{ioc.get_executor(), named_config(unique_name("jobs-crash-b"))};
  const auto name = unique_name("jobs-crash");
  constexpr int total = 10000;
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await connect_all(admin, a, b);
        fields cfg{{"claim_timeout_ms", "300"}, {"max_stalls", "1000000"}};
        co_await create_feed(admin.conn(), name, "job", cfg);
        thoonk::job_queue_options opts;
        opts.poll_interval = 100ms;
        thoonk::job_queue qadmin(admin, name);
        thoonk::job_queue qa(a, name, opts);
        thoonk::job_queue qb(b, name, opts);

        std::vector<std::string> items(total, "payload");
        auto ids =
            co_await qadmin.async_put_many(items, thoonk::priority::normal, asio::use_awaitable);
        REQUIRE(ids.size() == static_cast<std::size_t>(total));

        shared_state st;
        for (int i = 0; i < 8; ++i) {
          asio::co_spawn(ioc, worker(qa, &st), asio::detached);
          asio::co_spawn(ioc, worker(qb, &st), asio::detached);
        }

        int kills = 0, maint_runs = 0;
        std::int64_t recovered = 0;
        std::int64_t finishes = 0;
        auto t0 = std::chrono::steady_clock::now();
        auto last_maint = t0;
        while (finishes < total && ms_since(t0) < 150000) {
          co_await sleep_for(30ms);
          // Kill every connection of client `a` (command and subscriber).
          if (ms_since(t0) < 60000) kills += co_await kill_named(admin.conn(), victim_name);
          if (std::chrono::steady_clock::now() - last_maint > 250ms) {
            thoonk::maintenance_options mo;
            mo.publish_stats = false;
            mo.check_unaccounted = (maint_runs % 4) == 0;
            auto [mec, rep] = co_await qadmin.async_maintain(mo, nothrow);
            CHECK(!mec);
            recovered += rep.requeued + rep.unaccounted_requeued;
            ++maint_runs;
            last_maint = std::chrono::steady_clock::now();
          }
          auto [cec, counts] = co_await qadmin.async_counts(nothrow);
          if (!cec) finishes = counts.finishes;
        }
        st.stop = true;
        for (int i = 0; i < 600 && st.workers_done < 16; ++i) co_await sleep_for(10ms);
        INFO("kills " << kills << ", claims " << st.claims << ", transport errors "
                      << st.transport_errors << ", lost claims " << st.lost_claims
                      << ", maintenance runs " << maint_runs << " (requeued " << recovered << "), "
                      << ms_since(t0) << " ms");
        CHECK(st.workers_done == 16);
        CHECK(kills >= 3);

        auto counts = co_await qadmin.async_counts(asio::use_awaitable);
        CHECK(counts.finishes == total);
        CHECK(counts.items == 0);
        CHECK(counts.waiting == 0);
        CHECK(counts.claimed == 0);
        CHECK(counts.stalled == 0);

        // Every job's durable result was written exactly once.
        thoonk::request r;
        for (auto& id : ids) r.push("LLEN", key("jobfinished", name) + std::string(1, '\0') + id);
        auto lens = co_await raw_exec(admin.conn(), r);
        int once = 0, twice = 0;
        for (auto& v : lens) {
          if (v.integer == 1) ++once;
          if (v.integer > 1) ++twice;
        }
        CHECK(once == total);
        CHECK(twice == 0);
        // And no worker saw two successful finishes of one job.
        int dup = 0;
        for (auto& [id, n] : st.ok_finishes) dup += n > 1;
        CHECK(dup == 0);
        thoonk::request del;
        for (auto& id : ids) del.push("DEL", key("jobfinished", name) + std::string(1, '\0') + id);
        co_await raw_exec(admin.conn(), del);
      },
      200s);
}
