// fetcher<T>: the waiting getters/claimers of one queue object (a queue's
// gets, a job_queue's claims). One script call fetches up to N items for N
// waiting coroutines; when the queue runs dry they sleep until notify() (a
// wake-up message) or the poll interval. Its decisions are fetch_policy's
// (no I/O, unit-tested); the template only moves handlers, timers and jobs.
// Used on the client's executor only.
#pragma once

#include "detail/executor_util.hpp"
#include "detail/op_status.hpp"
#include "detail/use_nothrow.hpp"
#include "jobs/fetch_policy.hpp"

#include <thoonk/diagnostics.hpp>
#include <thoonk/error.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/as_tuple.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace thoonk::detail::jobs {

namespace asio = boost::asio;
using boost::system::error_code;
using clock_type = std::chrono::steady_clock;

// ---------------------------------------------------------------------------
// fetcher: the I/O around fetch_policy (fetch_policy.hpp), which makes every
// decision (batching, prefetch, deadlines, wake-ups); this holds the
// handlers, timers and jobs and carries out the policy's actions.
// ---------------------------------------------------------------------------
template <class T>
class fetcher : public std::enable_shared_from_this<fetcher<T>> {
 public:
  /// Fetches up to n items (one script call).
  using fetch_fn = std::function<asio::awaitable<op_result<std::vector<T>>>(std::size_t n)>;
  /// Returns items fetched for waiters that are gone (runs detached).
  using give_back_fn = std::function<asio::awaitable<void>(std::vector<T>)>;
  /// Runs once before the first fetch (subscribes to the wake-up channel, so
  /// no wake-up published after an empty fetch can be missed).
  using prepare_fn = std::function<asio::awaitable<void>()>;

  /// Items fetched ahead of demand (fetch_policy::options::prefetch).
  struct prefetch_options {
    std::size_t limit = 0;  ///< 0: fetch only for waiting coroutines
    std::chrono::milliseconds hold{1000};
  };

  fetcher(asio::any_io_executor ex, std::chrono::milliseconds poll, std::size_t max_batch,
          std::size_t max_in_flight, fetch_fn fetch, give_back_fn give_back, prepare_fn prepare,
          prefetch_options prefetch = {})
      : ex_(std::move(ex)),
        policy_(
            fetch_policy::options{poll, max_batch, max_in_flight, prefetch.limit, prefetch.hold}),
        fetch_(std::move(fetch)),
        give_back_(std::move(give_back)),
        prepare_(std::move(prepare)),
        wake_(ex_) {}

  using handler_type = asio::any_completion_handler<void(error_code, T)>;

  /// Waits for one item; `h` gets it (posted, never inline). Completes with
  /// error::queue_empty no earlier than `timeout` and only after a fetch
  /// attempt that included this waiter completed; operation_aborted when
  /// h's cancellation slot fires or the fetcher closes. `diag` (may be
  /// null) gets the server's text of a failed fetch. Any thread may call
  /// it: the fetcher's state is only touched on its executor.
  void wait(std::chrono::milliseconds timeout, handler_type h, diagnostics* diag = nullptr) {
    if (!running_in(ex_)) {
      asio::post(ex_, [self = this->shared_from_this(), timeout, h = std::move(h), diag]() mutable {
        self->wait(timeout, std::move(h), diag);
      });
      return;
    }
    if (policy_.closed()) {
      diagnostics_access::set(diag, {});
      post_handler(std::move(h), ex_, close_ec_, T{});
      return;
    }
    if (auto v = try_take()) {
      diagnostics_access::set(diag, {});
      post_handler(std::move(h), ex_, error_code{}, std::move(*v));
      return;
    }
    const auto id = policy_.add_waiter();
    auto& w = *waiters_.emplace_back(std::make_unique<waiter>(id, std::move(h), diag));
    auto slot = asio::get_associated_cancellation_slot(w.h.get());
    if (slot.is_connected()) {
      slot.assign([weak = this->weak_from_this(), id](asio::cancellation_type) {
        if (auto self = weak.lock()) {
          self->act([&](fetch_policy::actions& a) { self->policy_.cancel_waiter(id, a); });
          self->left();
        }
      });
    }
    if (timeout != std::chrono::milliseconds::max()) {
      w.timer.emplace(ex_, std::max(timeout, std::chrono::milliseconds(0)));
      w.timer->async_wait([weak = this->weak_from_this(), id](error_code ec) {
        if (ec) return;
        if (auto self = weak.lock()) {
          self->act([&](fetch_policy::actions& a) { self->policy_.deadline(id, a); });
          self->left();
        }
      });
    }
    if (!running_) {
      running_ = true;
      asio::co_spawn(ex_, loop(this->shared_from_this()), asio::detached);
    } else if (idle_) {
      wake_.cancel();
    }
  }

  /// An item fetched ahead (prefetch), if one is held; tops the buffer up.
  std::optional<T> try_take() {
    fetch_policy::actions a;
    a.swap(scratch_);
    if (!policy_.take_buffered(a)) {
      scratch_.swap(a);
      return std::nullopt;
    }
    std::optional<T> v(std::move(buffer_.front()));
    buffer_.pop_front();
    execute(a, nullptr);
    return v;
  }

  /// When the earliest scheduled job becomes due (max(): none), as the
  /// fetch function learned from its reply: waiters are served then rather
  /// than at the next poll. Call it on the fetcher's executor, from the
  /// fetch function, before it returns.
  void due_at(std::chrono::steady_clock::time_point t) { policy_.due_at(t); }

  /// Something may have arrived: fetch again if anyone waits.
  void notify() {
    if (policy_.closed()) return;
    policy_.notify();
    if (idle_) wake_.cancel();
  }

  /// Items that came without a fetch (hand-off): to waiters, the rest held
  /// or given back (fetch_policy::on_handed). On the fetcher's executor.
  void handed(std::vector<T> items) {
    act([&](fetch_policy::actions& a) { policy_.on_handed(clock_type::now(), items.size(), a); },
        &items);
  }

  /// Waiters not yet completed.
  std::size_t waiting() const noexcept { return policy_.waiting(); }

  /// Called (on the executor) when the last waiter left by its deadline or
  /// its cancellation, not with an item: nobody waits any more. With
  /// `settled` (claim_taker: the hand-off offer withdrawn), waiters whose
  /// deadline passed while nobody else waits learn queue_empty only once
  /// the awaitable it returns completed, so nothing they left on the server
  /// outlives their claim() (a process may stop its client right after).
  void on_idle(std::function<void()> f, std::function<asio::awaitable<void>()> settled = {}) {
    idle_hook_ = std::move(f);
    settled_ = std::move(settled);
  }

  /// Completes every waiter with `ec` and ends the loop.
  void close(error_code ec) {
    if (policy_.closed()) return;
    close_ec_ = ec;
    act([&](fetch_policy::actions& a) { policy_.close(ec, a); });
    waiters_.clear();
    wake_.cancel();
  }

  bool closed() const noexcept { return policy_.closed(); }

 private:
  struct waiter {
    waiter(fetch_policy::waiter_id i, handler_type handler, diagnostics* d)
        : id(i), h(std::move(handler)), diag(d) {}
    fetch_policy::waiter_id id;
    handler_box<void(error_code, T)> h;       // empty once completed
    diagnostics* diag;                        // the caller's, or null
    std::optional<asio::steady_timer> timer;  // the deadline, if any
  };

  // Runs `f` on a scratch action list (reused: no allocation per event) and
  // carries the actions out.
  // `reply` and `message` are the fetch reply the actions are about (its
  // items, and the server's text when it failed).
  template <class F>
  void act(F&& f, std::vector<T>* reply = nullptr, const std::string* message = nullptr) {
    fetch_policy::actions a;
    a.swap(scratch_);
    f(a);
    execute(a, reply, message);
  }

  void execute(fetch_policy::actions& acts, std::vector<T>* reply,
               const std::string* message = nullptr) {
    using kind = fetch_policy::action::kind;
    for (auto& a : acts) {
      switch (a.what) {
        case kind::claim:
          asio::co_spawn(ex_, fetch_one(this->shared_from_this(), a.fetch, a.count),
                         asio::detached);
          break;
        case kind::deliver:
          if (auto* w = find(a.waiter)) {
            complete(*w, {}, std::move((*reply)[a.index]), nullptr);
          } else if (give_back_) {
            // Never expected (the policy only names live waiters); a job
            // that no one can take goes back rather than being lost.
            std::vector<T> back;
            back.push_back(std::move((*reply)[a.index]));
            asio::co_spawn(ex_, give_back_(std::move(back)), asio::detached);
          }
          break;
        case kind::fail:
          if (auto* w = find(a.waiter)) complete(*w, a.ec, T{}, message);
          break;
        case kind::hold: buffer_.push_back(std::move((*reply)[a.index])); break;
        case kind::return_reply:
          if (give_back_) {
            auto first = reply->begin() + static_cast<std::ptrdiff_t>(a.index);
            std::vector<T> rest(
                std::make_move_iterator(first),
                std::make_move_iterator(first + static_cast<std::ptrdiff_t>(a.count)));
            asio::co_spawn(ex_, give_back_(std::move(rest)), asio::detached);
          }
          break;
        case kind::return_buffered: {
          std::vector<T> back;
          back.reserve(a.count);
          for (std::size_t i = 0; i < a.count; ++i) {
            back.push_back(std::move(buffer_.front()));
            buffer_.pop_front();
          }
          if (give_back_) asio::co_spawn(ex_, give_back_(std::move(back)), asio::detached);
          break;
        }
      }
    }
    acts.clear();
    if (scratch_.capacity() < acts.capacity()) scratch_.swap(acts);
    if (!parked_.empty()) release_parked();
  }

  // The waiters that just learnt queue_empty (complete() parked them): at
  // once while others wait (the offer stands for those) or the fetcher
  // closed; otherwise after the idle hook's withdrawal (settled_).
  void release_parked() {
    auto parked = std::move(parked_);
    parked_.clear();
    if (policy_.closed() || policy_.waiting() > 0) {
      for (auto& h : parked) post_handler(std::move(h), ex_, error_code(error::queue_empty), T{});
      return;
    }
    if (idle_hook_) idle_hook_();
    asio::co_spawn(ex_, settle(this->shared_from_this(), std::move(parked)), asio::detached);
  }

  asio::awaitable<void> settle(std::shared_ptr<fetcher> self, std::vector<handler_type> parked) {
    try {
      co_await settled_();
    } catch (...) {
      // Complete them anyway: the offer lapses by itself.
    }
    for (auto& h : parked) post_handler(std::move(h), ex_, error_code(error::queue_empty), T{});
    (void)self;
  }

  // A waiter gave up or reached its deadline: tell the idle hook when
  // nobody waits any more.
  void left() {
    if (idle_hook_ && !policy_.closed() && policy_.waiting() == 0) idle_hook_();
  }

  // The live waiter `id`, or null.
  waiter* find(fetch_policy::waiter_id id) {
    auto it = std::lower_bound(waiters_.begin(), waiters_.end(), id,
                               [](const auto& w, fetch_policy::waiter_id i) { return w->id < i; });
    if (it == waiters_.end() || (*it)->id != id || !(*it)->h) return nullptr;
    return it->get();
  }

  // Completes a waiter (posted, never inline).
  void complete(waiter& w, error_code ec, T v, const std::string* message) {
    if (w.timer) w.timer->cancel();
    diagnostics_access::set(w.diag,
                            message && ec ? std::string_view(*message) : std::string_view{});
    if (settled_ && ec == error::queue_empty) {
      parked_.push_back(w.h.take());  // execute() releases them
      return;
    }
    post_handler(w.h.take(), ex_, ec, std::move(v));
  }

  // The loop wakes whenever something may have arrived (a new waiter, a
  // wake-up, the poll tick, a claim reply) and issues the calls the policy
  // asks for; between, it sleeps until the policy's next wake-up time.
  asio::awaitable<void> loop([[maybe_unused]] std::shared_ptr<fetcher> self) {
    if (prepare_) {
      try {
        co_await prepare_();
      } catch (...) {
        // Without the subscription we still poll.
      }
    }
    policy_.start(clock_type::now());
    while (!policy_.closed()) {
      std::erase_if(waiters_, [](const auto& w) { return !w->h; });
      act([&](fetch_policy::actions& a) { policy_.pump(a); });
      wake_.expires_at(policy_.next_wakeup());
      idle_ = true;
      auto [ec] = co_await wake_.async_wait(use_nothrow);
      idle_ = false;
      const bool fired = !ec;  // a structured binding: clang 14 cannot capture it
      act([&](fetch_policy::actions& a) { policy_.on_wakeup(clock_type::now(), fired, a); });
    }
    running_ = false;
  }

  // One claim call of the policy's.
  asio::awaitable<void> fetch_one(std::shared_ptr<fetcher> self, fetch_policy::fetch_id id,
                                  std::size_t n) {
    // Not structured bindings: clang 14 cannot capture one in a lambda.
    auto reply = co_await fetch_(n);
    auto& status = std::get<0>(reply);
    auto& results = std::get<1>(reply);
    const error_code ec = status.ec;
    const bool was_closed = policy_.closed();
    act(
        [&](fetch_policy::actions& a) {
          policy_.on_reply(id, clock_type::now(), ec, results.size(), a);
        },
        &results, &status.server_message);
    left();  // waiters past their deadline fail once their attempt completed
    if (!was_closed && policy_.closed()) {  // client_stopped
      close_ec_ = ec;
      waiters_.clear();
      wake_.cancel();
      co_return;
    }
    if (ec && !policy_.closed()) {
      // Do not spin on a failing server; later waiters retry after this.
      asio::steady_timer pause(ex_, std::chrono::milliseconds(20));
      co_await pause.async_wait(use_nothrow);
    }
    if (idle_) wake_.cancel();
    (void)self;
  }

  asio::any_io_executor ex_;
  fetch_policy policy_;
  fetch_fn fetch_;
  give_back_fn give_back_;
  prepare_fn prepare_;
  std::function<void()> idle_hook_;
  std::function<asio::awaitable<void>()> settled_;
  std::vector<handler_type> parked_;  // waiters told queue_empty, not yet completed
  asio::steady_timer wake_;
  std::deque<std::unique_ptr<waiter>> waiters_;  // ids ascending, as in the policy
  std::deque<T> buffer_;                         // held jobs, in step with the policy's
  fetch_policy::actions scratch_;
  error_code close_ec_;
  bool running_ = false;
  bool idle_ = false;
};

}  // namespace thoonk::detail::jobs
