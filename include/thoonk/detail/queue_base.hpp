// What thoonk::queue and thoonk::job_queue have in common: the handle (a
// client and shared state), put, put_many. Both keep their items in the
// contract's `feed.ids:[f]` list and `feed.items:[f]` hash, so a put is the
// same operation on either; only the script and the key layout differ.
#pragma once

#include <thoonk/client.hpp>
#include <thoonk/detail/async.hpp>
#include <thoonk/export.hpp>
#include <thoonk/job_types.hpp>

#include <boost/system/error_code.hpp>

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace thoonk {

/// Where a put lands. `normal`: the end of the line (LPUSH; get and claim
/// pop the other end, so the queue is FIFO). `high`: the front of the line
/// (RPUSH: it is the next one out).
enum class priority { normal, high };

template <>
inline constexpr bool is_operation_argument_v<priority> = true;

namespace detail {

class queue_core;

/// The tuning queue_options and job_queue_options share (client side only).
struct THOONK_API queue_options_base {
  /// Waiting getters and claimers (and get_result) re-check the server this
  /// often even without a wake-up notification (puts made with plain
  /// commands do not notify).
  std::chrono::milliseconds poll_interval{1000};
  /// Most items one put script stores (puts issued in the same tick share
  /// one script call; put_many is split into chunks of this size).
  /// Clamped to 1..1000.
  std::size_t max_put_batch = 1000;
  /// Put scripts in flight at once per priority (1..8). With 2 or more, a
  /// call that carried 16 or more puts while no other was out resumes its
  /// callers in two halves (docs/jobs.md "A large batch completes in two
  /// halves").
  std::size_t max_puts_in_flight = 2;
};

/// The shared part of queue and job_queue (not used on its own).
///
/// **Copies** of a queue or job queue share state (dispatchers, batchers,
/// the wake-up subscription). When the last copy is destroyed, operations
/// still waiting (get, claim, get_result) complete with operation_aborted.
///
/// **Threading and lifetime**: as thoonk::client: operations run on the
/// client's executor; destroy the object (all copies) on that executor. It
/// may outlive the client (thoonk::client, "Lifetime"): destroying the
/// client completes its pending operations with error::client_stopped.
/// Arguments are taken by value.
///
/// **Errors common to every operation**: error::invalid_name (before any
/// I/O), error::feed_not_found, error::wrong_feed_type (checked on the
/// server by every operation), transport errors (error::unknown_outcome: the
/// request was sent and may have taken effect; error::client_stopped).
/// Other server error replies give error::server_error (error::script_error
/// for a Lua error); with thoonk::capture_diagnostics the caller gets the
/// server's text for those and for ACL refusals.
class THOONK_API queue_base {
 public:
  /// The queue's name.
  const std::string& name() const noexcept;

  /// Puts one item under a generated id (a short base-36 string from
  /// `feed.idincr:[f]`). Puts issued in the same tick (or while an earlier
  /// put script is in flight) share one script call, in the order they
  /// were issued.
  ///
  /// Completion `void(error_code, put_result)`: the id, and
  /// put_result::added (a put without an id always adds; job_queue's put
  /// with put_options may update or hold). Errors: item_too_large (before
  /// any I/O), the common ones. Cancellation: before the script is sent
  /// the put is dropped; after, it completes with operation_aborted but may
  /// have happened. Thread safety: as every operation of the client.
  template <completion_token CompletionToken = default_token_t>
  auto async_put(std::string item, CompletionToken&& token = {}) {
    return async_put(std::move(item), priority::normal, std::forward<CompletionToken>(token));
  }
  /// async_put() at a priority: priority::high puts the item at the front
  /// of the line (the next one out).
  /// Completion, errors, cancellation and thread safety: as the overload above.
  template <completion_token CompletionToken = default_token_t>
  auto async_put(std::string item, priority p, CompletionToken&& token = {}) {
    return initiate<void(boost::system::error_code, put_result)>(
        std::forward<CompletionToken>(token), &queue_base::start_put, *this, std::move(item), p);
  }
  /// Deprecated: async_put, whose completion carries a put_result; this
  /// one completes with the id alone, `void(error_code, std::string)`.
  template <class CompletionToken>
  [[deprecated("use async_put")]] auto put(std::string item, CompletionToken&& token) {
    return put(std::move(item), priority::normal, std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_put (see put(item, token)).
  template <class CompletionToken>
  [[deprecated("use async_put")]] auto put(std::string item, priority p, CompletionToken&& token) {
    return initiate<void(boost::system::error_code, std::string)>(
        std::forward<CompletionToken>(token), &queue_base::start_put_id, *this, std::move(item), p);
  }

  /// Puts many items in as few script calls as possible (chunks of the
  /// options' max_put_batch, each atomic). Ids come back in the order of
  /// `items`; with priority::high the first item is the next one out.
  ///
  /// Completion `void(error_code, std::vector<std::string> ids)`; errors as
  /// async_put(). On an error after some chunks succeeded, ids holds those.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  auto async_put_many(std::vector<std::string> items, priority p, CompletionToken&& token = {}) {
    return initiate<void(boost::system::error_code, std::vector<std::string>)>(
        std::forward<CompletionToken>(token), &queue_base::start_put_many, *this, std::move(items),
        p);
  }
  /// Deprecated: async_put_many.
  template <class CompletionToken>
  [[deprecated("use async_put_many")]] auto put_many(std::vector<std::string> items, priority p,
                                                     CompletionToken&& token) {
    return async_put_many(std::move(items), std::move(p), std::forward<CompletionToken>(token));
  }

 protected:
  template <class... Ts>
  using handler = op_handler<void(boost::system::error_code, Ts...)>;

  queue_base() = default;
  /// Takes shared ownership of `core`; the last copy of the handle closes it.
  explicit queue_base(std::shared_ptr<queue_core> core);

  friend struct detail::client_access;
  std::shared_ptr<client_core> client_core_;
  std::shared_ptr<queue_core> core_;

 private:
  void start_put(std::string item, priority p, handler<put_result> h);
  void start_put_id(std::string item, priority p, handler<std::string> h);
  void start_put_many(std::vector<std::string> items, priority p,
                      handler<std::vector<std::string>> h);

  std::shared_ptr<void> closer_;  // closes core_ when the last copy goes
};

/// The ways to get a handle of queue type T (queue, job_queue) and to read
/// its settings, written once. T declares `settings` and the private
/// `start_open(handler<T>)`, `start_create_or_open(settings, handler<T>)`
/// and `start_read_settings(handler<settings>)`, and befriends this class.
/// (T::settings is named inside each function template, through S = T,
/// because T is still incomplete where it derives from this.)
template <class T, class Options>
class queue_handles {
 public:
  /// Reads the queue's settings in one step (and checks that it exists
  /// with T's type). Completion `void(error_code, T::settings)`: fields
  /// not set in the config are unset (the defaults apply). Errors: the
  /// common ones.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t, class S = T>
  auto async_read_settings(CompletionToken&& token = {}) {
    return initiate<void(boost::system::error_code, typename S::settings)>(
        std::forward<CompletionToken>(token), &S::start_read_settings,
        static_cast<const S&>(*this));
  }
  /// Deprecated: async_read_settings.
  template <class CompletionToken, class S = T>
  [[deprecated("use async_read_settings")]] auto read_settings(CompletionToken&& token) {
    return async_read_settings(std::forward<CompletionToken>(token));
  }

  /// Opens an existing queue of T's type: checks that it exists with that
  /// type and subscribes to its wake-up channel (so the first get or claim
  /// need not). Completion `void(error_code, T)`. Errors: invalid_name,
  /// feed_not_found, wrong_feed_type, transport errors; the subscriber's
  /// errors (subscribe_refused, ...). On an error the handle is unchecked.
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t>
  static auto async_open(client& c, std::string name, Options opts, CompletionToken&& token = {}) {
    return initiate<void(boost::system::error_code, T)>(std::forward<CompletionToken>(token),
                                                        &T::start_open,
                                                        T(c, std::move(name), std::move(opts)));
  }
  /// Deprecated: async_open.
  template <class CompletionToken>
  [[deprecated("use async_open")]] static auto open(client& c, std::string name, Options opts,
                                                    CompletionToken&& token) {
    return async_open(c, std::move(name), std::move(opts), std::forward<CompletionToken>(token));
  }
  /// As the overload above with default options; completion, errors, cancellation and thread safety
  /// as there.
  template <completion_token CompletionToken = default_token_t>
  static auto async_open(client& c, std::string name, CompletionToken&& token = {}) {
    return async_open(c, std::move(name), Options{}, std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_open.
  template <class CompletionToken>
  [[deprecated("use async_open")]] static auto open(client& c, std::string name,
                                                    CompletionToken&& token) {
    return async_open(c, std::move(name), std::forward<CompletionToken>(token));
  }

  /// Creates the queue with `s` when it does not exist (atomically: type
  /// and settings in one step, `newfeed` published), then opens it as
  /// async_open() does. An existing queue is opened as it is: its config is left
  /// alone (read_settings tells what it is). Completion
  /// `void(error_code, T)`. Errors: error::invalid_argument when a setting
  /// is out of range (before any I/O; settings::problem() says which), the
  /// errors of async_open().
  /// Cancellation: completes with operation_aborted; a request not yet written is never sent, one
  /// already written may still take effect. Thread safety: start it on the client's executor;
  /// handlers run on the token's associated executor.
  template <completion_token CompletionToken = default_token_t, class S = T>
  static auto async_create_or_open(client& c, std::string name, typename S::settings s,
                                   Options opts, CompletionToken&& token = {}) {
    return initiate<void(boost::system::error_code, T)>(
        std::forward<CompletionToken>(token), &T::start_create_or_open,
        T(c, std::move(name), std::move(opts)), std::move(s));
  }
  /// Deprecated: async_create_or_open.
  template <class CompletionToken, class S = T>
  [[deprecated("use async_create_or_open")]] static auto create_or_open(client& c, std::string name,
                                                                        typename S::settings s,
                                                                        Options opts,
                                                                        CompletionToken&& token) {
    return async_create_or_open(c, std::move(name), std::move(s), std::move(opts),
                                std::forward<CompletionToken>(token));
  }
  /// As the overload above with default options; completion, errors, cancellation and thread safety
  /// as there.
  template <completion_token CompletionToken = default_token_t, class S = T>
  static auto async_create_or_open(client& c, std::string name, typename S::settings s,
                                   CompletionToken&& token = {}) {
    return async_create_or_open(c, std::move(name), std::move(s), Options{},
                                std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_create_or_open.
  template <class CompletionToken, class S = T>
  [[deprecated("use async_create_or_open")]] static auto create_or_open(client& c, std::string name,
                                                                        typename S::settings s,
                                                                        CompletionToken&& token) {
    return async_create_or_open(c, std::move(name), std::move(s),
                                std::forward<CompletionToken>(token));
  }
  /// As the overload above with default options; completion, errors, cancellation and thread safety
  /// as there.
  template <completion_token CompletionToken = default_token_t, class S = T>
  static auto async_create_or_open(client& c, std::string name, CompletionToken&& token = {}) {
    return async_create_or_open(c, std::move(name), typename S::settings{}, Options{},
                                std::forward<CompletionToken>(token));
  }
  /// Deprecated: async_create_or_open.
  template <class CompletionToken, class S = T>
  [[deprecated("use async_create_or_open")]] static auto create_or_open(client& c, std::string name,
                                                                        CompletionToken&& token) {
    return async_create_or_open(c, std::move(name), std::forward<CompletionToken>(token));
  }
};

}  // namespace detail
}  // namespace thoonk
