// Every call on a job in a state where it does not apply fails with its
// error and changes no key (checked on the raw keys).
#include "support/helpers.hpp"

#include <functional>

using namespace thoonk::test;
using thoonk::test::run_coro;
using thoonk::test::unique_name;

namespace {

enum class state { waiting, requeued, claimed, stalled, finished, unknown };

const char* to_string(state s) {
  switch (s) {
    case state::waiting: return "waiting";
    case state::requeued: return "waiting after a cancel";
    case state::claimed: return "claimed (wrong token)";
    case state::stalled: return "stalled";
    case state::finished: return "finished";
    case state::unknown: return "unknown";
  }
  return "?";
}

struct setup {
  std::string id;
  std::int64_t token = 1;  // the token a caller in that state would present
};

// Puts two jobs (so the queue is never trivially empty) and brings the
// second into `s`.
asio::awaitable<setup> bring(thoonk::job_queue q, state s) {
  co_await q.async_put("bystander", asio::use_awaitable);
  auto id = co_await put_item(q, "subject", thoonk::priority::high);
  setup out{id, 1};
  if (s == state::unknown) {
    out.id = "no-such-job";
    co_return out;
  }
  if (s == state::waiting) co_return out;
  auto j = co_await q.async_claim(2s, asio::use_awaitable);
  REQUIRE(j.id == id);
  out.token = j.token;
  switch (s) {
    case state::requeued: co_await q.async_cancel(j, asio::use_awaitable); break;
    case state::claimed: out.token = j.token + 1; break;
    case state::stalled: co_await q.async_stall(j, asio::use_awaitable); break;
    case state::finished: co_await q.async_finish(j, std::string("r"), asio::use_awaitable); break;
    default: break;
  }
  co_return out;
}

// Each call takes the job's claim (its id and token; the id-only calls use
// the id) and gives its error code.
using call_fn = std::function<asio::awaitable<error_code>(thoonk::job_queue, thoonk::claim_ref)>;

struct call {
  const char* name;
  call_fn fn;
  // Expected error per state; empty: the call is valid there (not tested here).
  std::vector<std::pair<state, thoonk::error>> wrong;
};

// The error code of an operation's result tuple.
template <class Awaitable>
asio::awaitable<error_code> code_of(Awaitable a) {
  co_return std::get<0>(co_await std::move(a));
}

std::vector<call> calls() {
  using E = thoonk::error;
  using q_t = thoonk::job_queue;
  using c_t = thoonk::claim_ref;
  const std::vector<std::pair<state, E>> claim_ops{
      {state::waiting, E::job_not_claimed}, {state::requeued, E::job_not_claimed},
      {state::claimed, E::lost_claim},      {state::stalled, E::job_not_claimed},
      {state::finished, E::job_not_found},  {state::unknown, E::job_not_found}};
  const std::vector<std::pair<state, E>> only_gone{{state::finished, E::job_not_found},
                                                   {state::unknown, E::job_not_found}};
  return {
      {"finish", [](q_t q, c_t c) { return code_of(q.async_finish(c, nothrow)); }, claim_ops},
      {"finish with result",
       [](q_t q, c_t c) { return code_of(q.async_finish(c, std::string("result"), nothrow)); },
       claim_ops},
      {"cancel", [](q_t q, c_t c) { return code_of(q.async_cancel(c, nothrow)); }, claim_ops},
      {"stall", [](q_t q, c_t c) { return code_of(q.async_stall(c, nothrow)); }, claim_ops},
      {"heartbeat", [](q_t q, c_t c) { return code_of(q.async_heartbeat(c, nothrow)); }, claim_ops},
      {"retry",
       [](q_t q, c_t c) { return code_of(q.async_retry(c.id, nothrow)); },
       {{state::waiting, E::job_not_stalled},
        {state::requeued, E::job_not_stalled},
        {state::claimed, E::job_not_stalled},
        {state::finished, E::job_not_found},
        {state::unknown, E::job_not_found}}},
      {"retract", [](q_t q, c_t c) { return code_of(q.async_retract(c.id, nothrow)); }, only_gone},
      {"failures", [](q_t q, c_t c) { return code_of(q.async_failures(c.id, nothrow)); },
       only_gone},
  };
}

}  // namespace

TEST_CASE("job: every wrong-state call fails with its error and changes no key", "[job]") {
  asio::io_context ioc;
  thoonk::client c{ioc.get_executor(), named_config()};
  run_coro(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await c.async_connect(asio::use_awaitable);
        int checked = 0;
        for (auto& k : calls()) {
          for (auto& [s, expected] : k.wrong) {
            auto name = unique_name("jobs-state");
            co_await create_feed(c.conn(), name, "job");
            thoonk::job_queue q(c, name);
            auto st = co_await bring(q, s);
            auto before = co_await snapshot(c.conn(), name);
            const thoonk::claim_ref claim{st.id, st.token};
            auto ec = co_await k.fn(q, claim);
            auto after = co_await snapshot(c.conn(), name);
            INFO(k.name << " on a " << to_string(s) << " job");
            CHECK(ec == expected);
            CHECK(after == before);
            ++checked;
          }
        }
        CHECK(checked == 6 * 5 + 5 + 2 + 2);
      },
      60s);
}

TEST_CASE("job: a second finish of the same claim is refused",
          "[job][claim][counts][finish][put]") {
  asio::io_context ioc;
  thoonk::client c{ioc.get_executor(), named_config()};
  run_coro(ioc, [&]() -> asio::awaitable<void> {
    co_await c.async_connect(asio::use_awaitable);
    auto name = unique_name("jobs-state");
    co_await create_feed(c.conn(), name, "job");
    thoonk::job_queue q(c, name);
    co_await q.async_put("x", asio::use_awaitable);
    auto j = co_await q.async_claim(1s, asio::use_awaitable);
    // Both in the same tick: one finish script call; one wins.
    error_code e1, e2;
    int done = 0;
    auto fin = [](thoonk::job_queue q, std::string id, std::int64_t tok, error_code* out,
                  int* done) -> asio::awaitable<void> {
      const thoonk::claim_ref claim{id, tok};
      auto [ec] = co_await q.async_finish(claim, nothrow);
      *out = ec;
      ++*done;
    };
    asio::co_spawn(ioc, fin(q, j.id, j.token, &e1, &done), asio::detached);
    asio::co_spawn(ioc, fin(q, j.id, j.token, &e2, &done), asio::detached);
    auto both = co_await wait_until([&] { return done == 2; });
    REQUIRE(both);
    CHECK(((!e1 && e2 == thoonk::error::job_not_found) ||
           (!e2 && e1 == thoonk::error::job_not_found)));
    auto counts = co_await q.async_counts(asio::use_awaitable);
    CHECK(counts.finishes == 1);
  });
}
