// Fuzz target: the request queue (src/connection/request_queue.hpp), driven
// by a sequence of operations read from the input (push, write a batch,
// a reply, cancel, disconnect, stop...) and checked against a small model
// of its contract: the bytes of a batch are the queued requests' bytes in
// order, replies complete requests strictly in FIFO order with exactly
// their own replies, a cancelled written request stays to absorb its
// replies, each handler runs exactly once, with the error the contract
// names, and held_memory() is the memory of the replies kept for requests
// still waiting for more. A difference or a sanitizer report is a finding.
#include "connection/request_queue.hpp"

#include <thoonk/error.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <map>
#include <string>
#include <vector>

namespace {

using boost::system::error_code;
using thoonk::detail::completion;
using thoonk::detail::exec_handler;
using thoonk::detail::request_queue;
namespace r = thoonk::resp3;

struct done {
  std::uint64_t seq;
  error_code ec;
  std::vector<std::int64_t> replies;
  bool operator==(const done&) const = default;
};

struct model_entry {
  std::uint64_t seq;
  std::string payload;
  std::size_t expected;
  bool wait;
  std::size_t received = 0;
  bool abandoned = false;
  std::vector<std::int64_t> replies;
  std::size_t memory = 0;  // of the replies kept
};

[[noreturn]] void finding(const char* what, std::size_t step) {
  std::fprintf(stderr, "request queue differs from its contract at step %zu: %s\n", step, what);
  std::abort();
}

class harness {
 public:
  void push(std::uint8_t arg) {
    const std::uint64_t seq = next_seq_++;
    model_entry e{seq, "CMD " + std::to_string(seq) + "\r\n", arg % 3u, (arg & 4u) == 0};
    const std::uint64_t got =
        q_.push(e.payload, e.expected, handler(seq), e.wait, std::make_shared<int>(0));
    if (got != seq) finding("push returned another sequence number", step_);
    unwritten_.push_back(std::move(e));
  }

  void take_batch() {
    std::string expected;
    for (const auto& e : unwritten_) expected += e.payload;
    if (q_.take_batch() != expected)
      finding("batch bytes are not the queued requests' bytes", step_);
    for (auto& e : unwritten_) written_.push_back(std::move(e));
    unwritten_.clear();
  }

  void batch_written() {
    std::vector<completion> out;
    q_.on_batch_written(out);
    model_batch_written();
    run(out);
  }

  void reply() {
    const std::int64_t id = next_reply_++;
    r::value v;
    v.type = r::type::number;
    v.integer = id;
    // Each reply's memory estimate: some take none.
    const std::size_t memory = static_cast<std::size_t>(id % 3) * 100;
    std::vector<completion> out;
    const bool matched = q_.on_reply(std::move(v), out, memory);
    model_batch_written();
    bool expect_match = !written_.empty();
    if (expect_match) {
      auto& e = written_.front();
      ++e.received;
      if (!e.abandoned) {
        e.replies.push_back(id);
        e.memory += memory;
      }
      if (e.received >= e.expected) {
        if (!e.abandoned) expect(e.seq, {}, e.replies);
        written_.pop_front();
        model_batch_written();
      }
    }
    if (matched != expect_match) finding("on_reply matched differently", step_);
    run(out);
  }

  void cancel(std::uint8_t arg) {
    const std::uint64_t seq = 1 + arg % next_seq_;
    std::vector<completion> out;
    q_.cancel(seq, boost::asio::error::operation_aborted, out);
    for (auto it = unwritten_.begin(); it != unwritten_.end(); ++it) {
      if (it->seq != seq) continue;
      expect(seq, boost::asio::error::operation_aborted, {});
      unwritten_.erase(it);
      run(out);
      return;
    }
    for (auto& e : written_) {
      if (e.seq != seq || e.abandoned) continue;
      expect(seq, boost::asio::error::operation_aborted, {});
      e.abandoned = true;
      e.replies.clear();
      e.memory = 0;
    }
    run(out);
  }

  void disconnect(std::uint8_t arg) {
    const error_code front =
        (arg & 1) ? error_code(thoonk::error::reply_too_many_values) : error_code{};
    std::vector<completion> out;
    q_.on_disconnect(out, front);
    for (std::size_t i = 0; i < written_.size(); ++i) {
      if (written_[i].abandoned) continue;
      expect(written_[i].seq, i == 0 && front ? front : thoonk::error::unknown_outcome, {});
    }
    written_.clear();
    model_fail_non_waiting();
    run(out);
  }

  void fail_non_waiting() {
    std::vector<completion> out;
    q_.fail_non_waiting(out);
    model_fail_non_waiting();
    run(out);
  }

  void fail_all() {
    std::vector<completion> out;
    q_.fail_all(thoonk::error::client_stopped, out);
    for (const auto& e : written_)
      if (!e.abandoned) expect(e.seq, thoonk::error::unknown_outcome, {});
    for (const auto& e : unwritten_) expect(e.seq, thoonk::error::client_stopped, {});
    written_.clear();
    unwritten_.clear();
    run(out);
  }

  void check_counts() {
    if (q_.size() != written_.size() + unwritten_.size()) finding("size()", step_);
    if (q_.in_flight() != written_.size()) finding("in_flight()", step_);
    if (q_.has_unwritten() != !unwritten_.empty()) finding("has_unwritten()", step_);
    std::size_t held = 0;
    for (const auto& e : written_) held += e.memory;
    if (q_.held_memory() != held) finding("held_memory()", step_);
  }

  void finish() {
    fail_all();
    // Every request's handler ran exactly once.
    for (std::uint64_t seq = 1; seq < next_seq_; ++seq)
      if (calls_[seq] != 1) finding("a handler did not run exactly once", step_);
  }

  std::size_t step_ = 0;

 private:
  exec_handler handler(std::uint64_t seq) {
    return exec_handler([this, seq](error_code ec, thoonk::response resp) {
      ++calls_[seq];
      std::vector<std::int64_t> ids;
      for (const auto& v : resp) ids.push_back(v.integer);
      actual_.push_back({seq, ec, std::move(ids)});
    });
  }

  void expect(std::uint64_t seq, error_code ec, std::vector<std::int64_t> replies) {
    expected_.push_back({seq, ec, std::move(replies)});
  }

  // Runs the completions the queue produced and compares them, in order,
  // with the ones the model expects.
  void run(std::vector<completion>& out) {
    for (auto& c : out) c.handler.take()(c.ec, std::move(c.replies));
    out.clear();
    if (actual_ != expected_) finding("completions differ (who, error, replies or order)", step_);
    actual_.clear();
    expected_.clear();
  }

  void model_batch_written() {
    while (!written_.empty() && written_.front().expected == 0) {
      if (!written_.front().abandoned) expect(written_.front().seq, {}, {});
      written_.pop_front();
    }
  }

  void model_fail_non_waiting() {
    for (std::size_t i = unwritten_.size(); i-- > 0;) {
      if (unwritten_[i].wait) continue;
      expect(unwritten_[i].seq, thoonk::error::not_connected, {});
      unwritten_.erase(unwritten_.begin() + static_cast<std::ptrdiff_t>(i));
    }
  }

  request_queue q_;
  std::deque<model_entry> written_, unwritten_;
  std::vector<done> expected_, actual_;
  std::map<std::uint64_t, int> calls_;
  std::uint64_t next_seq_ = 1;
  std::int64_t next_reply_ = 1;
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  harness h;
  for (std::size_t i = 0; i < size && i < 4096; ++i) {
    h.step_ = i;
    const std::uint8_t op = data[i] & 7u, arg = static_cast<std::uint8_t>(data[i] >> 3);
    switch (op) {
      case 0:
      case 1: h.push(arg); break;
      case 2: h.take_batch(); break;
      case 3: h.batch_written(); break;
      case 4: h.reply(); break;
      case 5: h.cancel(arg); break;
      case 6: (arg & 2) ? h.fail_non_waiting() : h.disconnect(arg); break;
      default:
        if (arg == 31) h.fail_all();
        else h.reply();
        break;
    }
    h.check_counts();
  }
  h.finish();
  return 0;
}
