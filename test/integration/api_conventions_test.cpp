// The public API's conventions as an application meets them: async_*
// operations with a default completion token, errors thrown with the
// server's own words, put_result on every put, conditions to switch on,
// run_options::stop as the runner's stop handle, and the former names,
// which still compile for one release.
#include "support/helpers.hpp"

#include <thoonk/condition.hpp>
#include <thoonk/diagnostics.hpp>

#include <stop_token>
#include <thread>

using namespace thoonk::test;
using E = thoonk::error;
using jq = thoonk::job_queue;

JOB_QUEUE_TEST_CASE("api", "co_await async_* with no token: values, and put_result on every put",
                    "[api][put][claim][finish]") {
  thoonk::put_result put = co_await q.async_put("x");
  CHECK(!put.id.empty());
  CHECK(put.outcome == thoonk::put_result::added);
  thoonk::put_options o;
  o.id = "own";
  auto own = co_await q.async_put("y", o);
  CHECK(own.id == "own");
  CHECK(own.outcome == thoonk::put_result::added);
  auto again = co_await q.async_put("y2", o);
  CHECK(again.outcome == thoonk::put_result::updated);
  auto high = co_await q.async_put("z", thoonk::priority::high);
  auto job = co_await q.async_claim(1s);
  CHECK(job.id == high.id);  // high priority: the next one out
  co_await q.async_finish(job, "done");
  auto result = co_await q.async_get_result(job.id, 1s);
  CHECK(result == "done");
}

JOB_QUEUE_TEST_CASE("api", "an error under the default token is thrown with the server's words",
                    "[api][finish][diagnostics]") {
  // A waiting job is not stalled: the retry script refuses it with its own
  // text, which travels in the exception.
  auto put = co_await q.async_put("x");
  std::optional<thoonk::error_with_diagnostics> caught;
  try {
    co_await q.async_retry(put.id);
  } catch (const thoonk::error_with_diagnostics& e) {
    caught = e;
  }
  REQUIRE(caught);
  CHECK(caught->code() == E::job_not_stalled);
  CHECK(caught->code() == thoonk::condition::wrong_state);
  CHECK(!caught->get_diagnostics().server_message().empty());
  CHECK(std::string(caught->what()).find(caught->get_diagnostics().server_message()) !=
        std::string::npos);

  // use_awaitable given explicitly does the same.
  bool thrown = false;
  try {
    co_await q.async_retry(put.id, asio::use_awaitable);
  } catch (const thoonk::error_with_diagnostics& e) {
    thrown = e.code() == E::job_not_stalled;
  }
  CHECK(thrown);

  // Other tokens keep the error code.
  auto [ec] = co_await q.async_retry(put.id, nothrow);
  CHECK(ec == E::job_not_stalled);
}

CLIENT_TEST_CASE("api", "an error found before any I/O is thrown with an empty server text",
                 "[api][diagnostics]") {
  bool thrown = false;
  try {
    co_await c.async_get_config(std::string(), "type");
  } catch (const thoonk::error_with_diagnostics& e) {
    thrown = true;
    CHECK(e.code() == E::invalid_name);
    CHECK(e.code() == thoonk::condition::invalid_input);
    CHECK(e.get_diagnostics().server_message().empty());
  }
  CHECK(thrown);
}

JOB_QUEUE_TEST_CASE("api", "run_options::stop stops the runner from another thread", "[api][run]") {
  co_await q.async_put("a");
  std::stop_source stop;
  thoonk::run_options o;
  o.stop = stop.get_token();
  o.worker_ttl = 2s;
  auto started = std::make_shared<bool>(false);
  std::thread stopper;
  auto handler = [&, started](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
    *started = true;
    // The stop comes from a thread of its own, while the job runs.
    stopper = std::thread([&stop] { stop.request_stop(); });
    co_return std::string("ok");
  };
  auto [ec, rep] = co_await q.async_run(handler, o, nothrow);
  stopper.join();
  CHECK(!ec);
  CHECK(*started);
  CHECK(rep.finished == 1);
  auto counts = co_await q.async_counts();
  CHECK(counts.claimed == 0);
}

JOB_QUEUE_TEST_CASE("api", "a stop requested before the run ends it at once", "[api][run]") {
  std::stop_source stop;
  stop.request_stop();
  thoonk::run_options o;
  o.stop = stop.get_token();
  auto handler = [](thoonk::job_context) -> asio::awaitable<std::optional<std::string>> {
    co_return std::nullopt;
  };
  auto [ec, rep] = co_await q.async_run(handler, o, nothrow);
  CHECK(!ec);
  CHECK(rep.started == 0);
}

// The former names, for one release: each still compiles and forwards.
// Deprecation warnings are the point of those names, so they are silenced
// here alone.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
namespace {
[[maybe_unused]] asio::awaitable<void> former_names(thoonk::client& c, jq& q, thoonk::feed& fd,
                                                    thoonk::sorted_feed& sf, thoonk::queue& pq) {
  auto u = asio::use_awaitable;
  co_await c.connect(u);
  co_await c.create_feed("n", thoonk::feed_type::feed, {}, u);
  co_await c.feed_exists("n", u);
  co_await c.list_feeds(u);
  co_await c.set_config("n", "max_length", "1", u);
  co_await c.get_config("n", "max_length", u);
  co_await c.delete_feed("n", u);
  auto q2 = co_await jq::open(c, "q", u);
  auto q3 = co_await jq::create_or_open(c, "q", u);
  std::string id = co_await q.put("x", u);
  thoonk::put_result r = co_await q.put("x", thoonk::put_options{}, u);
  auto job = co_await q.claim(1s, u);
  co_await q.heartbeat(job, u);
  co_await q.progress(job, "half", u);
  co_await q.finish(job, u);
  co_await q.finish(job, "r", u);
  co_await q.finish_and_claim(job, u);
  co_await q.fail(job, "e", u);
  co_await q.cancel(job, u);
  co_await q.stall(job, u);
  co_await q.retry(id, u);
  co_await q.retract(id, u);
  co_await q.abort(id, thoonk::abort_options{}, u);
  co_await q.get_job(id, u);
  co_await q.get_jobs(u);
  co_await q.counts(u);
  co_await q.pause(u);
  co_await q.resume(u);
  co_await q.get_result(id, 1s, u);
  co_await q.get_workers(u);
  co_await q.maintain(thoonk::maintenance_options{}, u);
  co_await q.read_settings(u);
  co_await fd.publish("x", u);
  co_await fd.retract("x", u);
  co_await fd.get_item("x", u);
  co_await fd.get_all(u);
  co_await fd.length(u);
  co_await sf.append("x", u);
  co_await sf.prepend("x", u);
  co_await pq.put("x", u);
  co_await pq.get(1s, u);
  thoonk::diagnostics d;
  co_await pq.put("x", thoonk::with_diagnostics(d, u));
  (void)q2;
  (void)q3;
  (void)r;
}
}  // namespace

JOB_QUEUE_TEST_CASE("api", "the former put still completes with the id alone", "[api][put]") {
  std::string id = co_await q.put("x", asio::use_awaitable);
  auto job = co_await q.async_claim(1s);
  CHECK(job.id == id);
}
#pragma GCC diagnostic pop
