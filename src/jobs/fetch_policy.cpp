#include "jobs/fetch_policy.hpp"

#include <thoonk/error.hpp>

#include <boost/asio/error.hpp>

#include <algorithm>

namespace thoonk::detail::jobs {

fetch_policy::fetch_policy(options o) : opts_(o) {
  opts_.poll = std::max(opts_.poll, std::chrono::milliseconds(1));
  opts_.max_batch = std::clamp<std::size_t>(opts_.max_batch, 1, 1000);
  opts_.max_in_flight = std::clamp<std::size_t>(opts_.max_in_flight, 1, 8);
  opts_.prefetch = std::min(opts_.prefetch, opts_.max_batch);
  opts_.hold = std::max(opts_.hold, std::chrono::milliseconds(1));
}

void fetch_policy::start(time_point now) {
  started_ = true;
  next_poll_ = now + opts_.poll;
}

fetch_policy::waiter_id fetch_policy::add_waiter() {
  const waiter_id id = next_waiter_++;
  waiters_.push_back(waiter_rec{id});
  trigger_ = true;
  return id;
}

fetch_policy::waiter_rec* fetch_policy::find(waiter_id w) {
  auto it = std::lower_bound(waiters_.begin(), waiters_.end(), w,
                             [](const waiter_rec& r, waiter_id id) { return r.id < id; });
  return it != waiters_.end() && it->id == w ? &*it : nullptr;
}

void fetch_policy::complete(waiter_rec& w, action a, actions& out) {
  w.live = false;
  a.waiter = w.id;
  out.push_back(a);
}

void fetch_policy::cancel_waiter(waiter_id w, actions& out) {
  auto* r = find(w);
  if (!r || !r->live) return;
  complete(*r, action{action::kind::fail, 0, 0, 0, 0, boost::asio::error::operation_aborted}, out);
}

void fetch_policy::deadline(waiter_id w, actions& out) {
  auto* r = find(w);
  if (!r || !r->live) return;
  if (r->attempt_done && !r->in_batch)
    complete(*r, action{action::kind::fail, 0, 0, 0, 0, error::queue_empty}, out);
  else r->expired = true;  // fails when the attempt in flight (or the next) completes
}

bool fetch_policy::take_buffered(actions& out) {
  if (closed_ || buffer_.empty()) return false;
  buffer_.pop_front();
  refill(out);
  return true;
}

void fetch_policy::notify() {
  if (!closed_) trigger_ = true;
}

fetch_policy::fetch_rec& fetch_policy::new_fetch(std::size_t asked) {
  std::vector<waiter_id> batch;
  if (!spare_batches_.empty()) {
    batch = std::move(spare_batches_.back());
    spare_batches_.pop_back();
  }
  ++in_flight_;
  fetches_.push_back(fetch_rec{next_fetch_++, asked, std::move(batch)});
  return fetches_.back();
}

void fetch_policy::refill(actions& out) {
  if (opts_.prefetch == 0 || closed_ || !last_full_ || in_flight_ >= opts_.max_in_flight) return;
  const std::size_t have = buffer_.size() + prefetching_;
  if (have >= opts_.prefetch) return;
  const std::size_t n = opts_.prefetch - have;
  prefetching_ += n;
  auto& f = new_fetch(n);
  out.push_back(action{action::kind::claim, f.id, 0, 0, n, {}});
}

void fetch_policy::pump(actions& out) {
  if (!started_ || closed_) return;
  std::erase_if(waiters_, [](const waiter_rec& w) { return !w.live && !w.in_batch; });
  while (trigger_ && in_flight_ < opts_.max_in_flight) {
    auto& f = new_fetch(0);
    for (auto& w : waiters_) {
      if (f.batch.size() == opts_.max_batch) break;
      if (w.live && !w.in_batch) {
        w.in_batch = true;
        f.batch.push_back(w.id);
      }
    }
    if (f.batch.empty()) {  // nobody to fetch for: undo
      spare_batches_.push_back(std::move(f.batch));
      fetches_.pop_back();
      --in_flight_;
      break;
    }
    f.asked = f.batch.size();
    // More waiters than one batch takes: keep the trigger for them.
    trigger_ = f.batch.size() == opts_.max_batch;
    out.push_back(action{action::kind::claim, f.id, 0, 0, f.asked, {}});
  }
  if (trigger_ && in_flight_ == 0) trigger_ = false;  // nobody to fetch for
}

void fetch_policy::on_wakeup(time_point now, bool timer_fired, actions& out) {
  if (!buffer_.empty()) {
    std::size_t n = 0;
    while (n < buffer_.size() && buffer_[n] <= now) ++n;
    if (n > 0) {
      buffer_.erase(buffer_.begin(), buffer_.begin() + static_cast<std::ptrdiff_t>(n));
      out.push_back(action{action::kind::return_buffered, 0, 0, 0, n, {}});
    }
  }
  if (timer_fired && !closed_ && now >= next_poll_) {
    trigger_ = true;  // poll tick
    next_poll_ = now + opts_.poll;
  }
  if (timer_fired && !closed_ && now >= due_) {
    trigger_ = true;  // a scheduled job is due: claim it now
    due_ = time_point::max();
  }
}

void fetch_policy::on_reply(fetch_id id, time_point now, error_code ec, std::size_t jobs,
                            actions& out) {
  auto it = std::find_if(fetches_.begin(), fetches_.end(),
                         [id](const fetch_rec& f) { return f.id == id; });
  if (it == fetches_.end()) return;
  fetch_rec f = std::move(*it);
  fetches_.erase(it);
  --in_flight_;
  prefetching_ -= f.asked - f.batch.size();
  last_full_ = !ec && jobs >= f.asked;
  next_poll_ = now + opts_.poll;

  std::size_t used = 0;
  if (!ec && !closed_) {
    // The call's own waiters first, then anyone else waiting without a call.
    for (auto id2 : f.batch) {
      if (used == jobs) break;
      auto* w = find(id2);
      if (w && w->live) complete(*w, action{action::kind::deliver, id, 0, used++, 0, {}}, out);
    }
    // With prefetch, waiters of other calls too: jobs go out in the order
    // they were claimed (the other call's jobs are then held).
    for (auto& w : waiters_) {
      if (used == jobs) break;
      if (w.live && (opts_.prefetch > 0 || !w.in_batch))
        complete(w, action{action::kind::deliver, id, 0, used++, 0, {}}, out);
    }
  }
  if (!ec && used < jobs) {
    if (opts_.prefetch > 0 && !closed_) {
      const auto expires = now + opts_.hold;
      for (std::size_t i = used; i < jobs; ++i) {
        buffer_.push_back(expires);
        out.push_back(action{action::kind::hold, id, 0, i, 0, {}});
      }
    } else {
      out.push_back(action{action::kind::return_reply, id, 0, used, jobs - used, {}});
    }
  }
  for (auto id2 : f.batch) {
    auto* w = find(id2);
    if (!w) continue;  // closed meanwhile
    w->in_batch = false;
    if (!w->live) continue;
    if (ec) {
      complete(*w, action{action::kind::fail, 0, 0, 0, 0, ec}, out);
      continue;
    }
    w->attempt_done = true;
    if (w->expired) complete(*w, action{action::kind::fail, 0, 0, 0, 0, error::queue_empty}, out);
  }
  const std::size_t batch_size = f.batch.size();
  f.batch.clear();
  spare_batches_.push_back(std::move(f.batch));
  if (ec == error::client_stopped) {
    close(ec, out);
    return;
  }
  if (!ec && jobs >= batch_size) trigger_ = true;  // likely more
  if (used > 0) refill(out);                       // served waiters: they are likely to come back
}

void fetch_policy::on_handed(time_point now, std::size_t jobs, actions& out) {
  std::size_t used = 0;
  if (!closed_) {
    for (const bool with_call : {false, true})
      for (auto& w : waiters_) {
        if (used == jobs) break;
        if (w.live && w.in_batch == with_call)
          complete(w, action{action::kind::deliver, 0, 0, used++, 0, {}}, out);
      }
  }
  if (used == jobs) return;
  if (opts_.prefetch > 0 && !closed_) {
    const auto expires = now + opts_.hold;
    for (std::size_t i = used; i < jobs; ++i) {
      buffer_.push_back(expires);
      out.push_back(action{action::kind::hold, 0, 0, i, 0, {}});
    }
  } else {
    out.push_back(action{action::kind::return_reply, 0, 0, used, jobs - used, {}});
  }
}

void fetch_policy::close(error_code ec, actions& out) {
  if (closed_) return;
  closed_ = true;
  for (auto& w : waiters_)
    if (w.live) complete(w, action{action::kind::fail, 0, 0, 0, 0, ec}, out);
  waiters_.clear();
  if (!buffer_.empty()) {
    out.push_back(action{action::kind::return_buffered, 0, 0, 0, buffer_.size(), {}});
    buffer_.clear();
  }
}

fetch_policy::time_point fetch_policy::next_wakeup() const {
  bool anyone =
      std::any_of(waiters_.begin(), waiters_.end(), [](const waiter_rec& w) { return w.live; });
  auto until = anyone && in_flight_ == 0 ? std::min(next_poll_, due_) : time_point::max();
  if (!buffer_.empty()) until = std::min(until, buffer_.front());
  return until;
}

std::size_t fetch_policy::waiting() const noexcept {
  return static_cast<std::size_t>(
      std::count_if(waiters_.begin(), waiters_.end(), [](const waiter_rec& w) { return w.live; }));
}

}  // namespace thoonk::detail::jobs
