// This library's side of the peer comparison (benchmarks/peers/): the same
// scenarios, command line and JSON as the Node.js drivers for BullMQ and
// bee-queue, so benchmarks/peers/bench.js can run each system alike.
//
//   peer_scenarios ROLE --url redis://127.0.0.1:PORT [options]
//
//   enqueue   --mode bulk|single|inflight --jobs N
//             bulk: put_many in chunks of 1,000; single: put awaited one by
//             one; inflight: 64 coroutines, each awaiting its put
//   produce   --jobs N [--rate R]
//             without --rate: put_many in chunks of 1,000 as fast as it
//             goes; with it: single puts at R per second, open loop (not
//             awaited), each payload stamped with the steady clock, and
//             the result has "put_ack": stamp -> reply percentiles
//   work      --jobs N --concurrency C [--latency] [--runner]
//             C coroutines claim and finish (raw claim/finish) until N jobs
//             are finished; --latency: record put -> handler start from
//             the payload's stamp; --runner: job_queue::run instead (only
//             when the library has the runner); --prefetch N: the raw
//             worker with job_queue_options::prefetch = N, the runner with
//             run_options::prefetch = N; --no-hand-off: the runner with
//             run_options::hand_off = false (neither is used by the
//             report, which runs every system at its defaults)
//   subscribe --subscribers K --messages M
//             K subscriber clients on one feed; publish -> callback latency
//   publish   --messages M --rate R
//             publishes at R per second, open loop, stamped
//   has-runner
//             exits 0 when this build can run --runner, 1 otherwise
//
// Waiting roles (work, subscribe) print {"ready":true} once they listen,
// then one JSON result line. Timestamps are steady_clock nanoseconds
// (CLOCK_MONOTONIC on Linux, the clock of Node's process.hrtime.bigint()),
// so a producer and a worker in different processes compare them. CPU
// figures are this process's getrusage from the start of the work. Every
// role gives up after --timeout seconds (default 120) and says so
// ("complete": false). The queue and feed names: --queue (default
// "peers"), "<queue>.feed".
#include "support/bench_names.hpp"
#include "support/bench_support.hpp"
#include "support/cli_options.hpp"
#include "support/job_bench_support.hpp"

#include <thoonk/client.hpp>
#include <thoonk/diagnostics.hpp>
#include <thoonk/error.hpp>
#include <thoonk/feed.hpp>
#include <thoonk/feed_events.hpp>
#include <thoonk/job_queue.hpp>
#if __has_include(<thoonk/job_runner.hpp>)
#include <thoonk/job_runner.hpp>
#define THOONK_PEERS_HAVE_RUNNER 1
#endif

#include <boost/asio.hpp>
#include <boost/json.hpp>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace json = boost::json;

namespace {

// ---------------------------------------------------------------------------
// Shared with benchmarks/peers/lib/common.js: the same bytes on every side.
constexpr std::string_view payload_head =
    R"({"op":"resize","user":"u-12345","w":1024,"h":768,"t":")";
constexpr std::string_view payload_tail = R"("})";

std::int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(steady::now().time_since_epoch())
      .count();
}

/// The payload with `stamp` as 19 zero-padded digits.
std::string payload(std::int64_t stamp) {
  char digits[32];
  std::snprintf(digits, sizeof digits, "%019lld", static_cast<long long>(stamp));
  std::string s;
  s.reserve(payload_head.size() + 19 + payload_tail.size());
  s.append(payload_head).append(digits).append(payload_tail);
  return s;
}

/// The stamp of a payload (the 19 digits before the closing `"}`).
std::int64_t stamp_of(std::string_view p) {
  std::int64_t v = 0;
  if (p.size() >= 21) std::from_chars(p.data() + p.size() - 21, p.data() + p.size() - 2, v);
  return v;
}

struct options {
  std::string role;
  std::string url;
  std::string queue = "peers";
  std::string mode = "bulk";
  long jobs = 0;
  long messages = 0;
  int concurrency = 1;
  int subscribers = 1;
  double rate = 0;
  bool latency = false;
  bool runner = false;
  std::optional<std::size_t> prefetch;
  bool hand_off = true;
  std::chrono::seconds timeout{120};
};

options parse(int argc, char** argv) {
  if (argc < 2) throw std::invalid_argument("usage: peer_scenarios ROLE --url URL [options]");
  options o;
  o.role = argv[1];
  bench::for_each_option(argc, argv, 2, [&](const std::string& a, auto value) {
    if (a == "--url") o.url = value();
    else if (a == "--queue") o.queue = value();
    else if (a == "--mode") o.mode = value();
    else if (a == "--jobs") o.jobs = std::stol(value());
    else if (a == "--messages") o.messages = std::stol(value());
    else if (a == "--concurrency") o.concurrency = std::stoi(value());
    else if (a == "--subscribers") o.subscribers = std::stoi(value());
    else if (a == "--rate") o.rate = std::stod(value());
    else if (a == "--timeout") o.timeout = std::chrono::seconds(std::stol(value()));
    else if (a == "--latency") o.latency = true;
    else if (a == "--runner") o.runner = true;
    else if (a == "--prefetch") o.prefetch = std::stoul(value());
    else if (a == "--no-hand-off") o.hand_off = false;
    else throw std::invalid_argument("unknown option " + a);
  });
  if (o.url.empty()) throw std::invalid_argument("--url is required");
  return o;
}

void emit(const json::object& o) {
  std::cout << json::serialize(o) << std::endl;  // flushed: the harness reads line by line
}

/// p50/p90/p99/max in milliseconds of `ns` samples after dropping the first
/// 10% (warm-up: connections, script loading, the first wake-ups).
json::object latency_summary(std::vector<double> ns) {
  const auto skip = ns.size() / 10;
  std::vector<double> ms(ns.begin() + static_cast<std::ptrdiff_t>(skip), ns.end());
  for (auto& v : ms) v /= 1e6;
  json::object o;
  o["samples"] = ms.size();
  o["discarded"] = skip;
  o["p50_ms"] = bench::percentile(ms, 0.50);
  o["p90_ms"] = bench::percentile(ms, 0.90);
  o["p99_ms"] = bench::percentile(ms, 0.99);
  o["max_ms"] = ms.empty() ? 0.0 : ms.back();
  return o;
}

asio::awaitable<void> sleep_until(steady::time_point t) {
  asio::steady_timer timer(co_await asio::this_coro::executor);
  timer.expires_at(t);
  co_await timer.async_wait(nothrow);
}

// Operations sent open loop: how many replies said done and how many failed.
struct reply_counts {
  long acked = 0, failed = 0;
};

// Calls `send(on_reply)` `n` times at `rate` per second from `start`, on a
// fixed schedule that does not wait for the replies (open loop); on_reply,
// the completion handler of the operation sent, counts it in `*cnt`.
template <class Send>
asio::awaitable<void> send_open_loop(steady::time_point start, double rate, long n,
                                     std::shared_ptr<reply_counts> cnt, Send send) {
  const auto period = std::chrono::nanoseconds(static_cast<std::int64_t>(1e9 / rate));
  for (long i = 0; i < n; ++i) {
    co_await sleep_until(start + period * i);
    send([cnt](error_code ec, auto&&...) {
      if (ec) ++cnt->failed;
      else ++cnt->acked;
    });
  }
}

// Waits (at most 10 s) until the replies to all `n` operations have come.
asio::awaitable<void> await_replies(const reply_counts& cnt, long n) {
  const auto until = steady::now() + 10s;
  while (cnt.acked + cnt.failed < n && steady::now() < until)
    co_await sleep_until(steady::now() + 1ms);
}

// The runner (<thoonk/job_runner.hpp>, job_queue::run) is newer than the
// claim/finish API: its rows are measured when this build of the library
// has it.
#ifdef THOONK_PEERS_HAVE_RUNNER
constexpr bool runner_available = true;
#else
constexpr bool runner_available = false;
#endif

asio::awaitable<thoonk::job_queue> open_queue(thoonk::client& c, const options& o) {
  thoonk::job_queue_options qo;
  qo.prefetch = o.prefetch.value_or(0);
  co_return co_await thoonk::job_queue::async_create_or_open(
      c, o.queue, thoonk::job_queue::settings{}, qo, asio::use_awaitable);
}

// ---------------------------------------------------------------------------
asio::awaitable<void> enqueue(thoonk::client& c, const options& o) {
  auto q = co_await open_queue(c, o);
  const auto item = payload(0);
  const double cpu0 = bench::own_cpu();
  const auto t0 = steady::now();
  if (o.mode == "bulk") {
    for (long done = 0; done < o.jobs;) {
      const long k = std::min<long>(1000, o.jobs - done);
      std::vector<std::string> items(static_cast<std::size_t>(k), item);
      co_await q.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
      done += k;
    }
  } else if (o.mode == "single") {
    for (long i = 0; i < o.jobs; ++i) co_await q.async_put(item, asio::use_awaitable);
  } else if (o.mode == "inflight") {
    long left = o.jobs;
    int live = 64;
    auto producer = [](thoonk::job_queue jq, std::string it, long* to_put, int* running,
                       asio::steady_timer* all_done) -> asio::awaitable<void> {
      while (*to_put > 0) {
        --*to_put;
        co_await jq.async_put(it, asio::use_awaitable);
      }
      if (--*running == 0) all_done->cancel();
    };
    // Each producer that ends cancels `done`; the last one wakes us.
    asio::steady_timer done(c.get_executor());
    done.expires_after(o.timeout);
    for (int i = 0; i < 64; ++i)
      asio::co_spawn(c.get_executor(), producer(q, item, &left, &live, &done), asio::detached);
    while (live > 0) {
      co_await done.async_wait(nothrow);
      if (steady::now() - t0 > o.timeout) throw std::runtime_error("enqueue: time limit");
      done.expires_after(o.timeout);
    }
  } else {
    throw std::invalid_argument("--mode must be bulk, single or inflight");
  }
  const double secs = bench::seconds_since(t0);
  json::object r;
  r["jobs"] = o.jobs;
  r["seconds"] = secs;
  r["per_s"] = static_cast<double>(o.jobs) / secs;
  r["cpu_s"] = bench::own_cpu() - cpu0;
  r["complete"] = true;
  emit(r);
}

// ---------------------------------------------------------------------------
asio::awaitable<void> produce(thoonk::client& c, const options& o) {
  auto q = co_await open_queue(c, o);
  const double cpu0 = bench::own_cpu();
  const auto t_start = now_ns();
  auto cnt = std::make_shared<reply_counts>();
  // With --rate: each put's time from its stamp to its reply (the put's own
  // round trip, for docs/benchmarks.md); shared, as replies may outlive a timeout.
  std::shared_ptr<std::vector<double>> ack_ns;
  if (o.rate <= 0) {
    const auto item = payload(0);
    for (long done = 0; done < o.jobs;) {
      const long k = std::min<long>(1000, o.jobs - done);
      std::vector<std::string> items(static_cast<std::size_t>(k), item);
      co_await q.async_put_many(std::move(items), thoonk::priority::normal, asio::use_awaitable);
      done += k;
    }
    cnt->acked = o.jobs;
  } else {
    // Open loop: the schedule does not wait for the put's reply.
    ack_ns = std::make_shared<std::vector<double>>();
    ack_ns->reserve(static_cast<std::size_t>(o.jobs));
    auto put_one = [&](auto on_reply) {
      const auto stamp = now_ns();
      q.async_put(payload(stamp), [stamp, acks = ack_ns, on_reply = std::move(on_reply)](
                                      error_code ec, auto&&... rest) mutable {
        acks->push_back(static_cast<double>(now_ns() - stamp));
        on_reply(ec, std::forward<decltype(rest)>(rest)...);
      });
    };
    const auto start = steady::now();
    co_await send_open_loop(start, o.rate, o.jobs, cnt, put_one);
    co_await await_replies(*cnt, o.jobs);
  }
  const auto t_end = now_ns();
  json::object r;
  r["jobs"] = o.jobs;
  r["acked"] = cnt->acked;
  r["errors"] = cnt->failed;
  r["t_start_ns"] = t_start;
  r["t_end_ns"] = t_end;
  r["rate_achieved"] = static_cast<double>(o.jobs) / (static_cast<double>(t_end - t_start) / 1e9);
  r["cpu_s"] = bench::own_cpu() - cpu0;
  r["complete"] = cnt->acked == o.jobs;
  if (ack_ns) r["put_ack"] = latency_summary(*ack_ns);
  emit(r);
}

// ---------------------------------------------------------------------------
struct work_state {
  explicit work_state(const options& o) : target(o.jobs) {
    if (o.latency) lat_ns.emplace().reserve(static_cast<std::size_t>(o.jobs));
  }

  long target;
  long finished = 0;
  long errors = 0;
  int live = 0;
  bool stop = false;
  std::int64_t t_last = 0;
  std::optional<std::vector<double>> lat_ns;  ///< put -> handler latencies, with --latency
  /// Cancelled when the last job is finished: the waiting coroutine wakes
  /// then, without polling (which would add to the CPU figure).
  asio::steady_timer* done = nullptr;
};

// finish_and_claim (finish a job and claim the next in one call) is newer
// than claim and finish: an older build of the library (scripts/
// bench-compare.sh --old) finishes and claims in two calls.
template <class Q>
concept finishes_and_claims = requires(Q& q, thoonk::claimed_job& j) {
  q.async_finish_and_claim(j, nothrow);
};

// Counts one finished job; the last one stops every worker.
void count_finished(work_state& st) {
  if (++st.finished >= st.target && !st.stop) {
    st.t_last = now_ns();
    st.stop = true;
    st.done->cancel();
  }
}

// A worker loop of the raw API: claim (waiting up to 200 ms when the queue
// is dry), run the no-op handler, then finish it and claim the next in one
// call; a claim again only when that call found nothing waiting.
template <class Q>
asio::awaitable<void> raw_worker(Q q, std::shared_ptr<work_state> st) {
  boost::system::error_code ec = thoonk::error::queue_empty;
  thoonk::claimed_job j;
  while (!st->stop) {
    if (ec) {
      std::tie(ec, j) = co_await q.async_claim(200ms, nothrow);
      if (ec) continue;  // queue_empty after the wait: look again
    }
    if (st->lat_ns) st->lat_ns->push_back(static_cast<double>(now_ns() - stamp_of(j.item)));
    // The no-op handler ran; acknowledge (and take the next job).
    if constexpr (finishes_and_claims<Q>) {
      auto [fec, next] = co_await q.async_finish_and_claim(j, nothrow);
      if (fec && fec != thoonk::error::queue_empty) {
        ++st->errors;
        ec = fec;
        continue;
      }
      count_finished(*st);
      ec = fec;
      j = std::move(next);
    } else {
      auto [fec] = co_await q.async_finish(j, nothrow);
      ec = thoonk::error::queue_empty;  // claim next
      if (fec) {
        ++st->errors;
        continue;
      }
      count_finished(*st);
    }
  }
  --st->live;
}

#ifdef THOONK_PEERS_HAVE_RUNNER
// The runner with a no-op handler. The N-th handler's return stops the
// runner; run() completes once every finish it issued was acknowledged and
// the worker deregistered, so t_last is that completion (one round trip
// later than the last finish: the runner's figure is, if anything, low).
asio::awaitable<void> work_runner(thoonk::job_queue q, const options& o) {
  auto st = std::make_shared<work_state>(o);
  thoonk::run_options ro;
  ro.concurrency = static_cast<std::size_t>(o.concurrency);
  if (o.prefetch) ro.prefetch = *o.prefetch;
  ro.hand_off = o.hand_off;
  // The N-th handler's return (or the time limit) asks for the graceful
  // stop by cancelling the run operation.
  auto stop = std::make_shared<asio::cancellation_signal>();
  thoonk::job_coroutine h =
      [st, stop](thoonk::job_context ctx) -> asio::awaitable<std::optional<std::string>> {
    if (st->lat_ns) st->lat_ns->push_back(static_cast<double>(now_ns() - stamp_of(ctx.job().item)));
    if (++st->finished >= st->target && !st->stop) {
      st->stop = true;
      stop->emit(asio::cancellation_type::terminal);
    }
    co_return std::nullopt;
  };
  asio::steady_timer limit(co_await asio::this_coro::executor);
  limit.expires_after(o.timeout);
  limit.async_wait([stop, st](error_code ec) {
    if (!ec && !st->stop) {
      st->stop = true;
      stop->emit(asio::cancellation_type::terminal);
    }
  });
  emit(json::object{{"ready", true}});
  const double cpu0 = bench::own_cpu();
  const auto t_start = now_ns();
  thoonk::diagnostics diag;
  auto [ec, report] = co_await q.async_run(
      h, ro,
      thoonk::capture_diagnostics(diag, asio::bind_cancellation_slot(stop->slot(), nothrow)));
  const auto t_last = now_ns();
  const double cpu = bench::own_cpu() - cpu0;
  limit.cancel();
  json::object res;
  res["jobs"] = report.finished;
  res["errors"] = report.failed + report.dead_lettered + report.lost + (ec ? 1 : 0);
  res["concurrency"] = o.concurrency;
  res["mode"] = "runner";
  res["t_start_ns"] = t_start;
  res["t_last_ns"] = t_last;
  res["cpu_s"] = cpu;
  res["complete"] = !ec && report.finished >= o.jobs;
  if (ec) res["error"] = ec.message() + " " + std::string(diag.server_message());
  if (st->lat_ns) res["latency"] = latency_summary(std::move(*st->lat_ns));
  emit(res);
}
#endif

asio::awaitable<void> work(thoonk::client& c, const options& o) {
  auto q = co_await open_queue(c, o);
  if (o.runner) {
#ifdef THOONK_PEERS_HAVE_RUNNER
    co_await work_runner(q, o);
    co_return;
#else
    throw std::invalid_argument(
        "--runner: this build of the library has no job runner; use the raw worker");
#endif
  }
  auto st = std::make_shared<work_state>(o);
  emit(json::object{{"ready", true}});
  const double cpu0 = bench::own_cpu();
  const auto t_start = now_ns();
  asio::steady_timer done(c.get_executor());
  done.expires_after(o.timeout);
  st->done = &done;
  st->live = o.concurrency;
  for (int i = 0; i < o.concurrency; ++i)
    asio::co_spawn(c.get_executor(), raw_worker(q, st), asio::detached);
  co_await done.async_wait(nothrow);
  const double cpu = bench::own_cpu() - cpu0;
  st->stop = true;
  // Let the coroutines' last claims time out before the queue handle goes.
  while (st->live > 0) co_await sleep_until(steady::now() + 10ms);
  json::object r;
  r["jobs"] = st->finished;
  r["errors"] = st->errors;
  r["concurrency"] = o.concurrency;
  r["mode"] = "raw";
  r["t_start_ns"] = t_start;
  r["t_last_ns"] = st->t_last;
  r["cpu_s"] = cpu;
  r["complete"] = st->finished >= o.jobs;
  if (st->lat_ns) r["latency"] = latency_summary(std::move(*st->lat_ns));
  emit(r);
}

// ---------------------------------------------------------------------------
asio::awaitable<void> subscribe(asio::io_context& ioc, thoonk::client& c, const thoonk::config& cfg,
                                const options& o) {
  thoonk::feed::settings fs;
  fs.max_length = 10000;  // bounded memory, as any real feed
  co_await thoonk::feed::async_create_or_open(c, o.queue + ".feed", fs, asio::use_awaitable);
  std::vector<std::unique_ptr<thoonk::client>> subs;
  std::vector<thoonk::feed_subscription> handles;
  auto samples = std::make_shared<std::vector<double>>();
  samples->reserve(static_cast<std::size_t>(o.messages) * static_cast<std::size_t>(o.subscribers));
  for (int i = 0; i < o.subscribers; ++i) {
    subs.push_back(std::make_unique<thoonk::client>(ioc.get_executor(), cfg));
    co_await subs.back()->async_connect(asio::use_awaitable);
    auto f =
        co_await thoonk::feed::async_open(*subs.back(), o.queue + ".feed", asio::use_awaitable);
    // A named callback: g++ 12 mishandles a lambda temporary with owning
    // captures inside a co_await expression.
    thoonk::feed_callback cb = [samples](const thoonk::feed_event& e) {
      if (e.kind != thoonk::feed_event::publish || e.replayed) return;
      samples->push_back(static_cast<double>(now_ns() - stamp_of(e.item)));
    };
    handles.push_back(co_await f.async_subscribe(cb, asio::use_awaitable));
  }
  emit(json::object{{"ready", true}});
  const auto want = static_cast<std::size_t>(o.messages) * static_cast<std::size_t>(o.subscribers);
  const auto until = steady::now() + o.timeout;
  while (samples->size() < want && steady::now() < until) co_await sleep_until(steady::now() + 1ms);
  json::object r;
  r["subscribers"] = o.subscribers;
  r["received"] = samples->size();
  r["complete"] = samples->size() >= want;
  r["latency"] = latency_summary(std::move(*samples));
  handles.clear();
  for (auto& s : subs) s->stop();
  emit(r);
}

asio::awaitable<void> publish(thoonk::client& c, const options& o) {
  auto f = co_await thoonk::feed::async_open(c, o.queue + ".feed", asio::use_awaitable);
  auto cnt = std::make_shared<reply_counts>();
  const double cpu0 = bench::own_cpu();
  const auto start = steady::now();
  auto publish_one = [&](auto on_reply) { f.publish(payload(now_ns()), std::move(on_reply)); };
  co_await send_open_loop(start, o.rate, o.messages, cnt, publish_one);
  const double secs = bench::seconds_since(start);
  co_await await_replies(*cnt, o.messages);
  json::object r;
  r["sent"] = o.messages;
  r["acked"] = cnt->acked;
  r["errors"] = cnt->failed;
  r["rate_achieved"] = static_cast<double>(o.messages) / secs;
  r["cpu_s"] = bench::own_cpu() - cpu0;
  r["complete"] = cnt->acked == o.messages;
  emit(r);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    if (argc == 2 && std::string_view(argv[1]) == "has-runner") return runner_available ? 0 : 1;
    const auto o = parse(argc, argv);
    error_code ec;
    const auto cfg = thoonk::config::from_url(o.url, ec);
    if (ec) throw std::invalid_argument("--url: " + ec.message());
    bool ok = bench::run(
        [&](asio::io_context& ioc) -> asio::awaitable<void> {
          thoonk::client c(ioc.get_executor(), cfg);
          co_await c.async_connect(asio::use_awaitable);
          if (o.role == "enqueue") co_await enqueue(c, o);
          else if (o.role == "produce") co_await produce(c, o);
          else if (o.role == "work") co_await work(c, o);
          else if (o.role == "subscribe") co_await subscribe(ioc, c, cfg, o);
          else if (o.role == "publish") co_await publish(c, o);
          else throw std::invalid_argument("unknown role " + o.role);
          c.stop();
        },
        o.timeout + 30s);
    if (!ok) {
      emit(json::object{{"complete", false}, {"error", "time limit"}});
      return 2;
    }
  } catch (const std::exception& e) {
    std::cerr << "peer_scenarios: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
