// The runner's handlers (runner.hpp): each job runs the user's handler on a
// strand of the handler executor; its outcome becomes a finish in the next
// round, a fail, or a give-back; jobs claimed ahead wait for a slot here.
// Also job_context, the handler's view of its job.
#include "jobs/runner/runner.hpp"

#include "jobs/job_queue_impl.hpp"

#include <boost/asio/bind_cancellation_slot.hpp>
#include <boost/asio/bind_executor.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/post.hpp>

#include <algorithm>

namespace thoonk {
namespace detail {

namespace asio = boost::asio;

void job_slot::cancel(bool unsure) {
  if (unsure) release_if_held = true;
  if (cancelled.exchange(true)) return;
  asio::post(strand, [self = shared_from_this()]() {
    self->signal.emit(asio::cancellation_type::terminal);
  });
}

void runner::start_handler(claimed_job j) {
  auto hex = opts_.handler_executor ? *opts_.handler_executor : ex_;
  auto slot = std::make_shared<job_slot>(std::move(j), asio::make_strand(hex), weak_from_this());
  auto& held = slots_[slot->job.id];
  // A job claimed again while an earlier claim of it is still in a handler
  // here: that claim ended (it was released or lapsed), so its handler
  // stops.
  if (held) {
    held->cancel(false);
    ++report_.cancelled;
  }
  held = slot;
  ++report_.started;
  std::weak_ptr<runner> weak = weak_from_this();
  auto done = [weak, slot](std::exception_ptr e, std::optional<std::string> result) {
    if (auto self = weak.lock()) self->handler_ended(slot, e, std::move(result));
  };
  if (co_handler_) {
    asio::co_spawn(slot->strand, co_handler_(job_context(slot)),
                   asio::bind_cancellation_slot(slot->signal.slot(),
                                                asio::bind_executor(ex_, std::move(done))));
  } else {
    asio::post(slot->strand, [fn = fn_handler_, slot, done = std::move(done), cex = ex_]() mutable {
      std::exception_ptr e;
      std::optional<std::string> r;
      try {
        r = fn(job_context(slot));
      } catch (...) {
        e = std::current_exception();
      }
      asio::post(
          cex, [done = std::move(done), e, r = std::move(r)]() mutable { done(e, std::move(r)); });
    });
  }
}

void runner::handler_ended(const std::shared_ptr<job_slot>& slot, std::exception_ptr e,
                           std::optional<std::string> result) {
  if (auto it = slots_.find(slot->job.id); it != slots_.end() && it->second == slot)
    slots_.erase(it);
  claim_ref claim{slot->job.id, slot->job.token};
  const auto ran = book_type::clock::now() - slot->started;
  if (slot->cancelled) {
    // Its outcome is dropped; give the job back if the claim may still be
    // ours (released later at the stop otherwise).
    book_.handler_ended(std::nullopt, ran);
    if (slot->release_if_held && !leaving_) release(std::move(claim));
  } else if (!e) {
    book_.handler_ended(book_type::finish{std::move(claim), std::move(result)}, ran);
  } else {
    book_.handler_ended(std::nullopt, ran);
    fail(std::move(claim), e);
  }
  start_ready();
  poke();
}

void runner::start_ready() {
  while (!ready_.empty() && book_.take_ready()) {
    auto j = std::move(ready_.front().job);
    ready_.pop_front();
    start_handler(std::move(j));
  }
}

void runner::start_or_keep(std::vector<claimed_job> js, std::size_t starting, time_point now) {
  for (std::size_t i = 0; i < js.size(); ++i) {
    if (i < starting) start_handler(std::move(js[i]));
    else ready_.push_back({std::move(js[i]), now});
  }
}

std::optional<claimed_job> runner::drop_ready(const std::string& id,
                                              std::optional<std::int64_t> token) {
  auto it = std::find_if(ready_.begin(), ready_.end(), [&](const ready_job& r) {
    return r.job.id == id && (!token || r.job.token == *token);
  });
  if (it == ready_.end()) return std::nullopt;
  auto j = std::move(it->job);
  ready_.erase(it);
  book_.ready_dropped(1);
  return j;
}

void runner::give_back_ready(time_point before, bool waited_too_long) {
  if (ready_.empty() || leaving_) return;
  std::vector<claimed_job> js;
  while (!ready_.empty() && ready_.front().since <= before) {
    js.push_back(std::move(ready_.front().job));
    ready_.pop_front();
  }
  if (js.empty()) return;
  if (waited_too_long) book_.ready_waited_too_long(js.size());
  else book_.ready_dropped(js.size());
  auto op = [](std::shared_ptr<runner> self, std::vector<claimed_job> c) -> asio::awaitable<void> {
    const auto n = co_await job_queue_impl::release(self->impl_, std::move(c));
    self->report_.released += n;
  };
  spawn(op(shared_from_this(), std::move(js)));
}

void runner::fail(claim_ref claim, std::exception_ptr e) {
  std::string what = "handler failed";
  fail_options fo;
  try {
    std::rethrow_exception(e);
  } catch (const permanent_job_error& pe) {
    what = pe.what();
    fo.permanent = true;
  } catch (const std::exception& x) {
    what = x.what();
  } catch (...) {
    what = "handler threw a non-standard exception";
  }
  // The error is kept on the job: bounded like an item.
  const auto cap = impl_->cl.get_config().max_item_size;
  if (what.size() > cap) what.resize(cap);
  failing_[claim.id] = claim.token;
  spawn(fail_op(shared_from_this(), std::move(claim), std::move(what), fo));
}

asio::awaitable<void> runner::fail_op(std::shared_ptr<runner> self, claim_ref claim,
                                      std::string what, fail_options fo) {
  const claim_ref c = claim;
  auto [st, r] = co_await job_queue_impl::fail_job(self->impl_, std::move(claim), std::move(what),
                                                   fo, self->worker_);
  if (auto it = self->failing_.find(c.id); it != self->failing_.end() && it->second == c.token)
    self->failing_.erase(it);
  if (!st) {
    (r.outcome == fail_result::outcome_t::dead_lettered ? self->report_.dead_lettered
                                                        : self->report_.failed)++;
  } else if (st == error::lost_claim || st == error::job_not_found ||
             st == error::job_not_claimed) {
    ++self->report_.lost;
  }
  // Other errors: the claim lapses with the lease and maintenance requeues
  // it (a stall counted), as for any worker that went silent.
}

void runner::release(claim_ref claim) {
  auto op = [](std::shared_ptr<runner> self, claim_ref c) -> asio::awaitable<void> {
    std::vector<claimed_job> js(1);
    js[0].id = std::move(c.id);
    js[0].token = c.token;
    co_await job_queue_impl::release(self->impl_, std::move(js));
  };
  spawn(op(shared_from_this(), std::move(claim)));
}

void runner::lose(const std::string& id, std::int64_t token) {
  if (drop_ready(id, token)) return;
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second->job.token != token || it->second->cancelled) return;
  it->second->cancel(false);
  ++report_.cancelled;
}

void runner::aborted(const std::string& id) {
  // Claimed ahead: it does not start; given back in case the abort found
  // it queued, not claimed (then the release is refused).
  if (auto j = drop_ready(id, std::nullopt)) {
    release(claim_ref(std::move(j->id), j->token));
    return;
  }
  auto it = slots_.find(id);
  if (it == slots_.end() || it->second->cancelled) return;
  it->second->cancel(true);
  ++report_.cancelled;
}

void runner::cancel_all(bool unsure) {
  for (auto& [id, slot] : slots_) {
    if (slot->cancelled) continue;
    slot->cancel(unsure);
    ++report_.cancelled;
  }
}

std::vector<std::string> runner::held_claims() const {
  std::vector<std::string> out;
  out.reserve(2 * (slots_.size() + ready_.size() + book_.pending_finishes()));
  for (const auto& [id, slot] : slots_) {
    if (slot->cancelled) continue;
    out.push_back(id);
    out.push_back(std::to_string(slot->job.token));
  }
  for (const auto& r : ready_) {
    out.push_back(r.job.id);
    out.push_back(std::to_string(r.job.token));
  }
  book_.for_each_pending([&](const claim_ref& c) {
    out.push_back(c.id);
    out.push_back(std::to_string(c.token));
  });
  return out;
}

void runner::progress(claim_ref claim, std::string text) {
  // On the client's executor, whatever thread the handler runs on.
  asio::post(ex_,
             [r = shared_from_this(), claim = std::move(claim), text = std::move(text)]() mutable {
               r->handle_.async_progress(claim, std::move(text), [r](boost::system::error_code ec) {
                 if (ec) ++r->report_.progress_refused;
               });
             });
}

}  // namespace detail

// ---- job_context ----------------------------------------------------------------

job_context::job_context(std::shared_ptr<detail::job_slot> slot) noexcept
    : slot_(std::move(slot)) {}

const claimed_job& job_context::job() const noexcept { return slot_->job; }

bool job_context::cancelled() const noexcept { return slot_->cancelled.load(); }

void job_context::progress(std::string text) const {
  auto r = slot_->owner.lock();
  if (!r) return;
  r->progress(claim_ref(slot_->job.id, slot_->job.token), std::move(text));
}

}  // namespace thoonk
