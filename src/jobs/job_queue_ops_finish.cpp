// thoonk::job_queue's finishes: finish and finish_and_claim, each sent
// through the impl's batchers (jobs/batcher.hpp), which carry many finishes
// in one script call. fail is in job_engine.cpp.
#include "jobs/job_queue_ops.hpp"

namespace thoonk {

namespace detail {
namespace {

// What makes a finish fail before any I/O (start_finish,
// start_finish_and_claim).
error_code finish_problem(const job_queue_impl& impl, const claim_ref& claim,
                          const std::optional<std::string>& result) {
  if (auto ec = check_id(impl, claim.id)) return ec;
  if (result) return validate_item(impl.cl.get_config(), *result);
  return {};
}

}  // namespace
}  // namespace detail

void job_queue::start_finish(claim_ref claim, std::optional<std::string> result, handler<> h) {
  // No coroutine per finish: the request goes straight to the batcher, whose
  // (status) result completes h. Validation fails before any I/O.
  const auto& ex = client_core_->get_executor();
  auto& impl = detail::impl_of(core_);
  if (auto invalid = detail::finish_problem(impl, claim, result)) {
    detail::post_handler(std::move(h), ex, invalid);
    return;
  }
  detail::finish_request req{std::move(claim.id), claim.token, std::move(result)};
  auto done = detail::adapt_handler(
      std::move(h.handler), ex,
      [](auto h, error_code ec, error_code status) { std::move(h)(ec ? ec : status); });
  impl.finishes->submit(std::move(req), std::move(done), h.diag);
}

void job_queue::start_finish_and_claim(claim_ref claim, std::optional<std::string> result,
                                       handler<claimed_job> h) {
  // As start_finish, with the next job (or queue_empty) in the completion.
  const auto& ex = client_core_->get_executor();
  auto& impl = detail::impl_of(core_);
  if (auto invalid = detail::finish_problem(impl, claim, result)) {
    detail::post_handler(std::move(h), ex, invalid, claimed_job{});
    return;
  }
  detail::finish_request req{std::move(claim.id), claim.token, std::move(result)};
  auto done = detail::adapt_handler(std::move(h.handler), ex,
                                    [](auto h, error_code ec, detail::finish_claim_outcome o) {
                                      if (!ec) ec = o.status;
                                      // Finished, but the queue had nothing to claim for this call.
                                      if (!ec && !o.next) ec = error::queue_empty;
                                      std::move(h)(ec, o.next ? std::move(*o.next) : claimed_job{});
                                    });
  impl.finish_claims->submit(std::move(req), std::move(done), h.diag);
}

}  // namespace thoonk
