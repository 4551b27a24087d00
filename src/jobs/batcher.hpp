// batcher<Req, Res>: calls issued in the same tick (or while a call is in
// flight) go to the server as one script call (puts, finishes, heartbeats),
// without blocking the shared connection. Used on the client's executor
// only.
#pragma once

#include "detail/executor_util.hpp"
#include "detail/op_status.hpp"
#include "detail/use_nothrow.hpp"

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
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

namespace thoonk::detail::jobs {

namespace asio = boost::asio;
using boost::system::error_code;

/// Clamps a batch size option to 1..1000 (the scripts unpack at most a few
/// thousand arguments per call).
inline std::size_t clamp_batch(std::size_t n) { return std::clamp<std::size_t>(n, 1, 1000); }

// ---------------------------------------------------------------------------
// batcher
// ---------------------------------------------------------------------------
template <class Req, class Res>
class batcher : public std::enable_shared_from_this<batcher<Req, Res>> {
 public:
  /// Runs one batch; on success returns one result per request, in order.
  using run_fn = std::function<asio::awaitable<op_result<std::vector<Res>>>(std::vector<Req>)>;
  /// Takes the result of a request whose caller cancelled while its batch
  /// was in flight (a result that holds something, such as a claimed job,
  /// must not be dropped).
  using orphan_fn = std::function<void(Res)>;

  batcher(asio::any_io_executor ex, std::size_t max_batch, std::size_t max_in_flight, run_fn run,
          orphan_fn orphan = {})
      : ex_(std::move(ex)),
        max_batch_(clamp_batch(max_batch)),
        max_in_flight_(std::clamp<std::size_t>(max_in_flight, 1, 8)),
        run_(std::move(run)),
        orphan_(std::move(orphan)) {}

  using handler_type = asio::any_completion_handler<void(error_code, Res)>;

  /// Queues one request; `h` gets its result (posted, never inline) and
  /// `diag` (may be null) the server's text when the batch's call failed.
  /// Cancelling h's slot completes it with operation_aborted at once; a
  /// request not yet sent is then dropped, one in flight may still happen.
  /// Any thread may call it (the batcher's state is touched on ex_ only).
  void submit(Req r, handler_type h, diagnostics* diag = nullptr) {
    if (!running_in(ex_)) {
      asio::post(ex_, [self = this->shared_from_this(), r = std::move(r), h = std::move(h),
                       diag]() mutable { self->submit(std::move(r), std::move(h), diag); });
      return;
    }
    if (closed_) {
      diagnostics_access::set(diag, {});
      post_handler(std::move(h), ex_, close_ec_, Res{});
      return;
    }
    auto e = std::make_shared<entry>(std::move(r), std::move(h), diag);
    auto slot = asio::get_associated_cancellation_slot(e->h.get());
    if (slot.is_connected()) {
      slot.assign([weak = std::weak_ptr<entry>(e), ex = ex_](asio::cancellation_type) {
        auto e = weak.lock();
        if (!e || !e->h) return;
        diagnostics_access::set(e->diag, {});
        post_handler(e->h.take(), ex, error_code(asio::error::operation_aborted), Res{});
      });
    }
    queue_.push_back(std::move(e));
    schedule();
  }

  void close(error_code ec) {
    if (closed_) return;
    closed_ = true;
    close_ec_ = ec;
    release_held();  // their calls succeeded: they complete with their results
    for (auto& e : queue_) {
      if (!e->h) continue;
      diagnostics_access::set(e->diag, {});
      post_handler(e->h.take(), ex_, ec, Res{});
    }
    queue_.clear();
  }

 private:
  struct entry {
    entry(Req r, handler_type handler, diagnostics* d)
        : req(std::move(r)), h(std::move(handler)), diag(d) {}
    Req req;
    handler_box<void(error_code, Res)> h;  // empty once completed or cancelled
    diagnostics* diag;                     // the caller's, or null
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
    if (!held_.empty()) {
      // Posted before run_ starts, so the results it posts queue behind
      // the connection's write of this call (see deliver()).
      asio::post(ex_, [self = this->shared_from_this()] { self->release_held(); });
    }
    auto [st, res] = co_await run_(std::move(reqs));
    --in_flight_;
    if (!st && res.size() != batch.size()) st = error::unexpected_type;
    deliver(std::move(batch), std::move(res), st);
    schedule();
  }

  // Completes a batch's callers. When the call was the only one out and
  // carried many, only the first half resume now; the rest wait until the
  // call those first callers make has gone out, so the two halves reach
  // the server apart and it works on one while the client resumes the
  // other (otherwise both go in one write and come back in one read, and
  // server and client take turns idling).
  void deliver(std::vector<std::shared_ptr<entry>> batch, std::vector<Res> res,
               const op_status& st) {
    const error_code ec = st.ec;
    std::size_t now_n = batch.size();
    if (!ec && !closed_ && in_flight_ == 0 && max_in_flight_ >= 2 && batch.size() >= split_min)
      now_n = batch.size() / 2;
    for (std::size_t i = 0; i < batch.size(); ++i) {
      if (i >= now_n) {
        held_.push_back({std::move(batch[i]), std::move(res[i])});
        continue;
      }
      complete(*batch[i], st, ec ? Res{} : std::move(res[i]));
    }
    if (now_n < batch.size()) {
      // If the first half makes no call, the rest go after a few turns.
      asio::co_spawn(ex_, release_later(this->shared_from_this()), asio::detached);
    }
  }

  void complete(entry& e, const op_status& st, Res r) {
    if (!e.h) {
      if (!st.ec && orphan_) orphan_(std::move(r));
      return;
    }
    diagnostics_access::set(e.diag, st.server_message);
    post_handler(e.h.take(), ex_, st.ec, std::move(r));
  }

  void release_held() {
    auto held = std::move(held_);
    held_.clear();
    for (auto& h : held) complete(*h.e, op_status{}, std::move(h.r));
  }

  asio::awaitable<void> release_later([[maybe_unused]] std::shared_ptr<batcher> self) {
    for (int i = 0; i < 4 && !held_.empty(); ++i) co_await asio::post(ex_, asio::use_awaitable);
    release_held();
  }

  asio::any_io_executor ex_;
  std::size_t max_batch_;
  std::size_t max_in_flight_;
  run_fn run_;
  orphan_fn orphan_;
  struct held_result {
    std::shared_ptr<entry> e;
    Res r;
  };
  // A batch this large or larger is completed in two halves (deliver()).
  static constexpr std::size_t split_min = 16;

  std::deque<std::shared_ptr<entry>> queue_;
  std::vector<held_result> held_;  // results completed once the next call is out
  error_code close_ec_;
  std::size_t in_flight_ = 0;
  bool scheduled_ = false;
  bool closed_ = false;
};

}  // namespace thoonk::detail::jobs
