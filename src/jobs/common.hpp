// Shared by queue and job_queue: reply helpers, script error mapping, and
// the two coalescing machines that make them fast without blocking the
// shared connection:
//
//  * fetcher<T>: the waiting getters/claimers of one queue object. One
//    script call fetches up to N items for N waiting coroutines; when the
//    queue runs dry they sleep until notify() (a wake-up message) or the
//    poll interval.
//  * batcher<Req, Res>: calls issued in the same tick (or while a call is
//    in flight) go to the server as one script call (puts, finishes).
//
// Everything here runs on the client's executor (single-threaded access).
#pragma once

#include "detail/executor_util.hpp"
#include "detail/keys.hpp"
#include "detail/script_exec.hpp"

#include <thoonk/client.hpp>
#include <thoonk/error.hpp>
#include <thoonk/resp3/value.hpp>
#include <thoonk/script.hpp>

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <boost/asio/any_completion_handler.hpp>
#include <boost/asio/associated_cancellation_slot.hpp>

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
inline constexpr auto use_nothrow = asio::as_tuple(asio::use_awaitable);

/// Milliseconds since the Unix epoch (system clock), decimal.
std::string now_ms_string();
std::int64_t now_ms();

/// Maps an error value returned by a queue/job script ("THOONK <code>") to
/// its error code; other error replies: an ACL refusal (NOPERM, or
/// NOCHANNELPERM from check_publish) → the permission codes, mapped by
/// detail::permission_error (src/feeds/common.hpp) as for feeds; a Lua
/// runtime error (`ERR user_script...`, `ERR Error running script`) →
/// script_error, anything else (OOM, READONLY, ...) → server_error.
/// Success when `v` is not an error.
error_code script_reply_error(const resp3::value& v);

/// Runs a library script; error replies are mapped, so a successful value
/// is never an error. Keys and args are owned by the coroutine frame.
asio::awaitable<std::tuple<error_code, resp3::value>> run(client& c, const script& s,
                                                          std::vector<std::string> keys,
                                                          std::vector<std::string> args);

/// Integer of a number reply (or a decimal string); `fallback` otherwise.
std::int64_t as_int(const resp3::value& v, std::int64_t fallback = 0);
/// String elements of an array reply (null elements become "").
std::vector<std::string> as_strings(resp3::value&& v);

/// Clamps a batch size option to 1..1000 (the scripts unpack at most a few
/// thousand arguments per call).
inline std::size_t clamp_batch(std::size_t n) { return std::clamp<std::size_t>(n, 1, 1000); }

/// Completes an operation's handler with an error before any I/O.
template <class... Ts>
asio::awaitable<std::tuple<error_code, Ts...>> fail_now(error_code ec) {
  co_return std::tuple<error_code, Ts...>{ec, Ts{}...};
}

// ---------------------------------------------------------------------------
// pending: one waiting coroutine's slot. The timer is the wake-up signal
// (cancel() completes the wait) and, for waiters with a deadline, the
// deadline too.
// ---------------------------------------------------------------------------
template <class T>
struct pending {
  explicit pending(const asio::any_io_executor& ex) : timer(ex, clock_type::time_point::max()) {}
  asio::steady_timer timer;
  bool done = false;       // a result (or error) was delivered
  bool abandoned = false;  // the waiter gave up (timeout, cancellation, close)
  error_code ec;
  T value{};

  bool live() const noexcept { return !done && !abandoned; }
  void complete(error_code e, T v) {
    if (!live()) return;
    done = true;
    ec = e;
    value = std::move(v);
    timer.cancel();
  }
};

// ---------------------------------------------------------------------------
// fetcher
// ---------------------------------------------------------------------------
template <class T>
class fetcher : public std::enable_shared_from_this<fetcher<T>> {
 public:
  /// Fetches up to n items (one script call).
  using fetch_fn =
      std::function<asio::awaitable<std::tuple<error_code, std::vector<T>>>(std::size_t n)>;
  /// Returns items fetched for waiters that are gone (runs detached).
  using give_back_fn = std::function<asio::awaitable<void>(std::vector<T>)>;
  /// Runs once before the first fetch (subscribes to the wake-up channel, so
  /// no wake-up published after an empty fetch can be missed).
  using prepare_fn = std::function<asio::awaitable<void>()>;

  /// Items fetched ahead of demand (see prefetch_).
  struct prefetch_options {
    std::size_t limit = 0;  ///< 0: fetch only for waiting coroutines
    std::chrono::milliseconds hold{1000};
  };

  fetcher(asio::any_io_executor ex, std::chrono::milliseconds poll, std::size_t max_batch,
          std::size_t max_in_flight, fetch_fn fetch, give_back_fn give_back, prepare_fn prepare,
          prefetch_options prefetch = {})
      : ex_(std::move(ex)),
        poll_(std::max(poll, std::chrono::milliseconds(1))),
        max_batch_(clamp_batch(max_batch)),
        max_in_flight_(std::clamp<std::size_t>(max_in_flight, 1, 8)),
        prefetch_(std::min(prefetch.limit, max_batch_)),
        hold_(std::max(prefetch.hold, std::chrono::milliseconds(1))),
        fetch_(std::move(fetch)),
        give_back_(std::move(give_back)),
        prepare_(std::move(prepare)),
        wake_(ex_) {}

  using handler_type = asio::any_completion_handler<void(error_code, T)>;

  /// Waits for one item; `h` gets it (posted, never inline). Completes with
  /// error::queue_empty no earlier than `timeout` and only after a fetch
  /// attempt that included this waiter completed; operation_aborted when
  /// h's cancellation slot fires or the fetcher closes. Any thread may call
  /// it: the fetcher's state is only touched on its executor.
  void wait(std::chrono::milliseconds timeout, handler_type h) {
    if (!running_in(ex_)) {
      asio::post(ex_, [self = this->shared_from_this(), timeout, h = std::move(h)]() mutable {
        self->wait(timeout, std::move(h));
      });
      return;
    }
    if (closed_) {
      post_handler(std::move(h), ex_, close_ec_, T{});
      return;
    }
    if (auto v = try_take()) {
      post_handler(std::move(h), ex_, error_code{}, std::move(*v));
      return;
    }
    auto w = std::make_shared<waiter>(ex_, std::move(h));
    auto slot = asio::get_associated_cancellation_slot(w->h.get());
    if (slot.is_connected()) {
      slot.assign([weak = std::weak_ptr<waiter>(w)](asio::cancellation_type) {
        if (auto w = weak.lock()) w->complete(asio::error::operation_aborted, T{});
      });
    }
    if (timeout != std::chrono::milliseconds::max()) {
      w->timer.emplace(ex_, std::max(timeout, std::chrono::milliseconds(0)));
      w->timer->async_wait([weak = std::weak_ptr<waiter>(w)](error_code ec) {
        auto w = weak.lock();
        if (ec || !w || !w->live()) return;
        // Deadline. Give up only once an attempt including us has completed
        // (fetch_one ends it then, seeing `expired`).
        if (w->attempt_done && !w->in_batch) w->complete(error::queue_empty, T{});
        else w->expired = true;
      });
    }
    waiters_.push_back(std::move(w));
    trigger();
  }

  /// An item fetched ahead (prefetch), if one is held; tops the buffer up.
  std::optional<T> try_take() {
    if (closed_ || buffer_.empty()) return std::nullopt;
    std::optional<T> v(std::move(buffer_.front().value));
    buffer_.pop_front();
    refill();
    return v;
  }

  /// Something may have arrived: fetch again if anyone waits.
  void notify() {
    if (closed_) return;
    trigger_ = true;
    if (idle_) wake_.cancel();
  }

  /// Completes every waiter with `ec` and ends the loop.
  void close(error_code ec) {
    if (closed_) return;
    closed_ = true;
    close_ec_ = ec;
    for (auto& w : waiters_) w->complete(ec, T{});
    waiters_.clear();
    give_back_buffer(buffer_.size());
    wake_.cancel();
  }

  bool closed() const noexcept { return closed_; }

 private:
  struct waiter {
    waiter(const asio::any_io_executor& e, handler_type handler) : ex(e), h(std::move(handler)) {}
    asio::any_io_executor ex;
    handler_box<void(error_code, T)> h;     // empty once completed
    std::optional<asio::steady_timer> timer;  // the deadline, if any
    bool in_batch = false;      // a fetch for it is in flight
    bool attempt_done = false;  // a fetch including this waiter completed
    bool expired = false;       // deadline passed while an attempt was due

    bool live() const noexcept { return static_cast<bool>(h); }
    void complete(error_code e, T v) {
      if (!h) return;
      if (timer) timer->cancel();
      post_handler(h.take(), ex, e, std::move(v));
    }
  };
  using batch_type = std::vector<std::shared_ptr<waiter>>;
  struct buffered {
    T value;
    clock_type::time_point expires;
  };

  // Prefetch: after a fetch that served waiters came back full, or a waiter
  // took a buffered item, top the buffer up to prefetch_ items with one
  // fetch that no waiter is attached to. Its items go to waiters first, the
  // rest wait in buffer_ (at most hold_, then given back), so a worker loop
  // finds its next item here instead of waiting a round trip, and the
  // server works on the next fetch while this process runs its workers.
  void refill() {
    if (prefetch_ == 0 || closed_ || !last_full_ || in_flight_ >= max_in_flight_) return;
    const std::size_t have = buffer_.size() + prefetching_;
    if (have >= prefetch_) return;
    const std::size_t n = prefetch_ - have;
    prefetching_ += n;
    ++in_flight_;
    asio::co_spawn(ex_, fetch_one(this->shared_from_this(), batch_type{}, n), asio::detached);
  }

  // Gives the first n buffered items back (oldest first).
  void give_back_buffer(std::size_t n) {
    if (n == 0) return;
    std::vector<T> back;
    back.reserve(n);
    for (std::size_t i = 0; i < n; ++i) {
      back.push_back(std::move(buffer_.front().value));
      buffer_.pop_front();
    }
    if (give_back_) asio::co_spawn(ex_, give_back_(std::move(back)), asio::detached);
  }

  void expire_buffer() {
    const auto now = clock_type::now();
    std::size_t n = 0;
    while (n < buffer_.size() && buffer_[n].expires <= now) ++n;
    give_back_buffer(n);
  }

  void trigger() {
    trigger_ = true;
    if (!running_) {
      running_ = true;
      asio::co_spawn(ex_, loop(this->shared_from_this()), asio::detached);
    } else if (idle_) {
      wake_.cancel();
    }
  }

  // The loop starts fetches (at most max_in_flight_ at a time) for waiters
  // that have none in flight, whenever something may have arrived: a new
  // waiter, a wake-up, the poll tick, a fetch that came back full.
  asio::awaitable<void> loop([[maybe_unused]] std::shared_ptr<fetcher> self) {
    if (prepare_) {
      try {
        co_await prepare_();
      } catch (...) {
        // Without the subscription we still poll.
      }
    }
    next_poll_ = clock_type::now() + poll_;
    while (!closed_) {
      std::erase_if(waiters_, [](const auto& w) { return !w->live() && !w->in_batch; });
      batch_type batch;
      if (trigger_ && in_flight_ < max_in_flight_) {
        for (auto& w : waiters_) {
          if (batch.size() == max_batch_) break;
          if (w->live() && !w->in_batch) batch.push_back(w);
        }
      }
      if (!batch.empty()) {
        for (auto& w : batch) w->in_batch = true;
        // More waiters than one batch takes: keep the trigger for them.
        trigger_ = batch.size() == max_batch_;
        ++in_flight_;
        const std::size_t n = batch.size();
        asio::co_spawn(ex_, fetch_one(this->shared_from_this(), std::move(batch), n),
                       asio::detached);
        continue;
      }
      if (trigger_ && in_flight_ == 0) trigger_ = false;  // nobody to fetch for
      bool anyone =
          std::any_of(waiters_.begin(), waiters_.end(), [](const auto& w) { return w->live(); });
      auto until = anyone && in_flight_ == 0 ? next_poll_ : clock_type::time_point::max();
      if (!buffer_.empty()) until = std::min(until, buffer_.front().expires);
      wake_.expires_at(until);
      idle_ = true;
      auto [ec] = co_await wake_.async_wait(use_nothrow);
      idle_ = false;
      if (!buffer_.empty()) expire_buffer();
      if (!ec && !closed_ && clock_type::now() >= next_poll_) {
        trigger_ = true;  // poll tick
        next_poll_ = clock_type::now() + poll_;
      }
    }
    running_ = false;
  }

  // Fetches n items: one for each waiter of `batch`, the rest (n greater
  // than the batch) a prefetch.
  asio::awaitable<void> fetch_one(std::shared_ptr<fetcher> self, batch_type batch, std::size_t n) {
    auto [ec, results] = co_await fetch_(n);
    --in_flight_;
    prefetching_ -= n - batch.size();
    last_full_ = !ec && results.size() >= n;
    next_poll_ = clock_type::now() + poll_;
    std::size_t used = 0;
    if (!ec && !closed_) {
      // Our batch first, then anyone else waiting without a fetch.
      for (auto& w : batch) {
        if (used == results.size()) break;
        if (w->live()) w->complete({}, std::move(results[used++]));
      }
      // With prefetch, waiters of other fetches too: items go out in the
      // order they were claimed (the other fetch's items are buffered).
      for (auto& w : waiters_) {
        if (used == results.size()) break;
        if (w->live() && (prefetch_ > 0 || !w->in_batch))
          w->complete({}, std::move(results[used++]));
      }
    }
    if (!ec && used < results.size()) {
      if (prefetch_ > 0 && !closed_) {
        const auto expires = clock_type::now() + hold_;
        for (std::size_t i = used; i < results.size(); ++i)
          buffer_.push_back(buffered{std::move(results[i]), expires});
      } else if (give_back_) {
        std::vector<T> rest(std::make_move_iterator(results.begin() + used),
                            std::make_move_iterator(results.end()));
        asio::co_spawn(ex_, give_back_(std::move(rest)), asio::detached);
      }
    }
    for (auto& w : batch) {
      w->in_batch = false;
      if (!w->live()) continue;
      if (ec) {
        w->complete(ec, T{});
        continue;
      }
      w->attempt_done = true;
      if (w->expired) w->complete(error::queue_empty, T{});
    }
    if (ec == error::client_stopped) {
      close(ec);
      co_return;
    }
    if (!ec && results.size() >= batch.size()) trigger_ = true;  // likely more
    if (used > 0) refill();  // served waiters: they are likely to come back
    if (ec && !closed_) {
      // Do not spin on a failing server; later waiters retry after this.
      asio::steady_timer pause(ex_, std::chrono::milliseconds(20));
      co_await pause.async_wait(use_nothrow);
    }
    if (idle_) wake_.cancel();
    (void)self;
  }

  asio::any_io_executor ex_;
  std::chrono::milliseconds poll_;
  std::size_t max_batch_;
  std::size_t max_in_flight_;
  std::size_t prefetch_;
  std::chrono::milliseconds hold_;
  fetch_fn fetch_;
  give_back_fn give_back_;
  prepare_fn prepare_;
  asio::steady_timer wake_;
  std::deque<std::shared_ptr<waiter>> waiters_;
  std::deque<buffered> buffer_;
  std::size_t prefetching_ = 0;  // items asked for by prefetches in flight
  bool last_full_ = false;       // the last fetch got all it asked for
  clock_type::time_point next_poll_{};
  error_code close_ec_;
  std::size_t in_flight_ = 0;
  bool running_ = false;
  bool idle_ = false;
  bool trigger_ = false;
  bool closed_ = false;
};

// ---------------------------------------------------------------------------
// batcher
// ---------------------------------------------------------------------------
template <class Req, class Res>
class batcher : public std::enable_shared_from_this<batcher<Req, Res>> {
 public:
  /// Runs one batch; on success returns one result per request, in order.
  using run_fn =
      std::function<asio::awaitable<std::tuple<error_code, std::vector<Res>>>(std::vector<Req>)>;

  batcher(asio::any_io_executor ex, std::size_t max_batch, std::size_t max_in_flight, run_fn run)
      : ex_(std::move(ex)),
        max_batch_(clamp_batch(max_batch)),
        max_in_flight_(std::clamp<std::size_t>(max_in_flight, 1, 8)),
        run_(std::move(run)) {}

  using handler_type = asio::any_completion_handler<void(error_code, Res)>;

  /// Queues one request; `h` gets its result (posted, never inline).
  /// Cancelling h's slot completes it with operation_aborted at once; a
  /// request not yet sent is then dropped, one in flight may still happen.
  /// Any thread may call it (the batcher's state is touched on ex_ only).
  void submit(Req r, handler_type h) {
    if (!running_in(ex_)) {
      asio::post(ex_, [self = this->shared_from_this(), r = std::move(r), h = std::move(h)]() mutable {
        self->submit(std::move(r), std::move(h));
      });
      return;
    }
    if (closed_) {
      post_handler(std::move(h), ex_, close_ec_, Res{});
      return;
    }
    auto e = std::make_shared<entry>(std::move(r), std::move(h));
    auto slot = asio::get_associated_cancellation_slot(e->h.get());
    if (slot.is_connected()) {
      slot.assign([weak = std::weak_ptr<entry>(e), ex = ex_](asio::cancellation_type) {
        auto e = weak.lock();
        if (!e || !e->h) return;
        post_handler(e->h.take(), ex, error_code(asio::error::operation_aborted), Res{});
      });
    }
    queue_.push_back(std::move(e));
    schedule();
  }

  /// submit() for coroutines.
  asio::awaitable<std::tuple<error_code, Res>> submit(Req r) {
    return asio::async_initiate<decltype(use_nothrow), void(error_code, Res)>(
        [self = this->shared_from_this()](auto h, Req r) {
          self->submit(std::move(r), handler_type(std::move(h)));
        },
        use_nothrow, std::move(r));
  }

  void close(error_code ec) {
    if (closed_) return;
    closed_ = true;
    close_ec_ = ec;
    for (auto& e : queue_)
      if (e->h) post_handler(e->h.take(), ex_, ec, Res{});
    queue_.clear();
  }

 private:
  struct entry {
    entry(Req r, handler_type handler) : req(std::move(r)), h(std::move(handler)) {}
    Req req;
    handler_box<void(error_code, Res)> h;  // empty once completed or cancelled
  };

  // One flush gathers everything queued in the current tick; while
  // max_in_flight_ calls are out, requests wait and form the next batch.
  void schedule() {
    if (scheduled_ || in_flight_ >= max_in_flight_ || queue_.empty()) return;
    scheduled_ = true;
    asio::co_spawn(ex_, flush(this->shared_from_this()), asio::detached);
  }

  asio::awaitable<void> flush([[maybe_unused]] std::shared_ptr<batcher> self) {
    // Let every coroutine that is ready in this tick add its request.
    co_await asio::post(ex_, asio::use_awaitable);
    scheduled_ = false;
    std::vector<std::shared_ptr<entry>> batch;
    std::vector<Req> reqs;
    while (!queue_.empty() && batch.size() < max_batch_) {
      auto e = std::move(queue_.front());
      queue_.pop_front();
      if (!e->h) continue;  // cancelled before it was sent
      reqs.push_back(std::move(e->req));
      batch.push_back(std::move(e));
    }
    if (batch.empty()) co_return;
    ++in_flight_;
    schedule();  // a full batch left more behind
    auto [ec, res] = co_await run_(std::move(reqs));
    --in_flight_;
    if (!ec && res.size() != batch.size()) ec = error::unexpected_type;
    for (std::size_t i = 0; i < batch.size(); ++i)
      if (batch[i]->h) post_handler(batch[i]->h.take(), ex_, ec, ec ? Res{} : std::move(res[i]));
    schedule();
  }

  asio::any_io_executor ex_;
  std::size_t max_batch_;
  std::size_t max_in_flight_;
  run_fn run_;
  std::deque<std::shared_ptr<entry>> queue_;
  error_code close_ec_;
  std::size_t in_flight_ = 0;
  bool scheduled_ = false;
  bool closed_ = false;
};

}  // namespace thoonk::detail::jobs
