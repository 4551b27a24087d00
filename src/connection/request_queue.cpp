#include "connection/request_queue.hpp"

#include <thoonk/error.hpp>

#include <algorithm>

namespace thoonk::detail {

std::uint64_t request_queue::push(std::string_view payload, std::size_t expected_replies,
                                  exec_handler handler, bool wait_for_connection,
                                  std::shared_ptr<void> guard, bool retain) {
  entry e;
  e.seq = next_seq_++;
  e.retain = retain;
  if (retain) e.retained_bytes.assign(payload);
  e.offset = staging_.size();
  e.size = payload.size();
  e.expected = expected_replies;
  e.wait_for_connection = wait_for_connection;
  e.handler = std::move(handler);
  e.guard = std::move(guard);
  if (expected_replies > 0) e.replies.reserve(expected_replies);
  staging_.append(payload);
  entries_.push_back(std::move(e));
  return entries_.back().seq;
}

void request_queue::push_again(completion::retained_request r, exec_handler handler) {
  entry e;
  e.seq = r.seq;
  e.offset = staging_.size();
  e.size = r.payload.size();
  e.expected = r.expected;
  e.wait_for_connection = r.wait_for_connection;
  e.handler = std::move(handler);
  e.guard = std::move(r.guard);
  e.retain = true;
  e.retries = r.retries + 1;
  if (e.expected > 0) e.replies.reserve(e.expected);
  staging_.append(r.payload);
  e.retained_bytes = std::move(r.payload);
  entries_.push_back(std::move(e));
}

const std::string& request_queue::take_batch() {
  writing_.swap(staging_);
  staging_.clear();
  written_ = entries_.size();
  return writing_;
}

void request_queue::on_batch_written(std::vector<completion>& out) {
  while (written_ > 0 && entries_.front().expected == 0) {
    finish(entries_.front(), {}, out);
    entries_.pop_front();
    --written_;
  }
}

bool request_queue::on_reply(resp3::value&& v, std::vector<completion>& out, std::size_t memory) {
  // A written request that expects nothing (SUBSCRIBE) may sit in front of
  // the one this reply belongs to when the write's completion has not been
  // processed yet.
  on_batch_written(out);
  if (written_ == 0) return false;
  entry& e = entries_.front();
  ++e.received;
  if (!e.abandoned) {
    e.replies.push_back(std::move(v));
    e.reply_memory += memory;
    held_memory_ += memory;
  }
  if (e.received < e.expected) return true;
  finish(e, {}, out);
  entries_.pop_front();
  --written_;
  on_batch_written(out);
  return true;
}

void request_queue::cancel(std::uint64_t seq, boost::system::error_code ec,
                           std::vector<completion>& out) {
  // Linear: a request queued again keeps its first number, so the numbers
  // are not sorted (cancellation is rare, the queue short).
  auto it = std::find_if(entries_.begin(), entries_.end(),
                         [seq](const entry& e) { return e.seq == seq; });
  if (it == entries_.end() || it->seq != seq || it->abandoned) return;
  auto index = static_cast<std::size_t>(it - entries_.begin());
  if (index >= written_) {
    finish(*it, ec, out);
    erase_unwritten(index);
    return;
  }
  // Written: the server will answer; keep the slot so the replies that
  // follow stay aligned, and discard this one's replies when they come.
  finish(*it, ec, out);
  it->abandoned = true;
  it->replies.clear();
}

void request_queue::erase_unwritten(std::size_t index) {
  entry& e = entries_[index];
  staging_.erase(e.offset, e.size);
  for (std::size_t i = index + 1; i < entries_.size(); ++i) entries_[i].offset -= e.size;
  entries_.erase(entries_.begin() + static_cast<std::ptrdiff_t>(index));
}

void request_queue::on_disconnect(std::vector<completion>& out,
                                  boost::system::error_code front_ec) {
  for (std::size_t i = 0; i < written_; ++i) {
    if (entries_[i].abandoned) continue;
    finish(entries_[i],
           i == 0 && front_ec ? front_ec : boost::system::error_code(error::unknown_outcome), out);
  }
  entries_.erase(entries_.begin(), entries_.begin() + static_cast<std::ptrdiff_t>(written_));
  written_ = 0;
  fail_non_waiting(out);
}

void request_queue::fail_non_waiting(std::vector<completion>& out) {
  for (std::size_t i = entries_.size(); i-- > written_;) {
    if (!entries_[i].wait_for_connection) {
      finish(entries_[i], error::not_connected, out);
      erase_unwritten(i);
    }
  }
}

void request_queue::fail_all(boost::system::error_code unwritten_ec, std::vector<completion>& out) {
  for (std::size_t i = 0; i < entries_.size(); ++i) {
    if (entries_[i].abandoned) continue;
    finish(entries_[i],
           i < written_ ? boost::system::error_code(error::unknown_outcome) : unwritten_ec, out);
  }
  entries_.clear();
  written_ = 0;
  staging_.clear();
}

void request_queue::finish(entry& e, boost::system::error_code ec, std::vector<completion>& out) {
  held_memory_ -= e.reply_memory;
  e.reply_memory = 0;
  if (!e.handler) {
    e.guard.reset();
    return;
  }
  completion c{e.handler.take(), ec, ec ? response{} : std::move(e.replies), nullptr};
  if (e.retain && !ec) {
    c.retained = std::make_unique<completion::retained_request>(
        completion::retained_request{e.seq, std::move(e.retained_bytes), e.expected,
                                     e.wait_for_connection, std::move(e.guard), e.retries});
  }
  e.guard.reset();
  out.push_back(std::move(c));
}

}  // namespace thoonk::detail
