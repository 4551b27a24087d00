// The connection setup protocol, without I/O: which commands the handshake
// sends, in which batches, and what each reply means for the attempt: go
// on, fall back to RESP2, go on without a client name, retry later with the
// normal backoff (transient), or give up on this attempt because the server
// refused the setup for a reason that will not go away by itself (refused).
//
// The I/O layer (connection_impl::handshake) only writes the batches this
// class builds and feeds it the replies; the decisions are tested byte for
// byte in test/unit/handshake_test.cpp.
#pragma once

#include <thoonk/config.hpp>
#include <thoonk/request.hpp>
#include <thoonk/resp3/value.hpp>

#include <boost/system/error_code.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace thoonk::detail {

/// A setup command whose reply the handshake checks.
enum class setup_step : std::uint8_t {
  hello,    ///< HELLO 3 [AUTH user pass] [SETNAME name]
  auth,     ///< AUTH [user] pass (RESP2)
  setname,  ///< CLIENT SETNAME name (RESP2)
  select,   ///< SELECT db
  role,     ///< ROLE (several addresses: only a primary will do)
};

/// What one setup reply means for the attempt.
enum class setup_verdict : std::uint8_t {
  ok,            ///< accepted: go on
  use_resp2,     ///< HELLO unknown, NOPROTO, or NOPERM: set up with RESP2 commands
  drop_name,     ///< HELLO refused the client name: HELLO again without SETNAME
  name_refused,  ///< CLIENT SETNAME refused: go on without a name, report it
  transient,     ///< the server cannot serve yet (LOADING, BUSY, max clients): retry normally
  refused,       ///< will not go away by itself (credentials, database, ACL): fail requests
};

struct setup_reply_meaning {
  setup_verdict verdict = setup_verdict::ok;
  /// transient/refused: the attempt's error (auth_failed, no_permission or
  /// handshake_failed); name_refused/drop_name: why the name was refused
  /// (no_permission for NOPERM, else handshake_failed); ok/use_resp2: empty.
  boost::system::error_code ec;
};

/// Classifies the reply to one setup command. `hello_named`: the HELLO
/// carried SETNAME (only then can a HELLO error be about the name).
setup_reply_meaning classify_setup_reply(setup_step step, const resp3::value& reply,
                                         bool hello_named = false);

/// The handshake of one connection attempt as a state machine.
///
/// Usage: `while (hs.next_batch(req)) { write req; while (hs.replies_due())
/// hs.on_reply(read one reply); }`, then error(). The last batch
/// (final_batch()) may be empty: the I/O layer appends its own setup
/// commands to it (the subscriber's SUBSCRIBEs, which expect no reply).
class handshake {
 public:
  /// `check_role`: end the setup with ROLE and refuse a server that is not
  /// a primary (error::not_primary, transient: the caller tries another
  /// address).
  explicit handshake(const config& cfg, bool check_role = false);

  /// Fills `out` (cleared first) with the next batch of commands. Returns
  /// false when the handshake is over; error() then tells how it ended.
  bool next_batch(request& out);
  /// The batch last returned by next_batch() is the last one.
  bool final_batch() const noexcept { return final_; }
  /// Replies of the current batch still to be fed to on_reply(). Becomes 0
  /// as soon as a reply decides the attempt failed: the rest need not be
  /// read, the connection is closed anyway.
  std::size_t replies_due() const noexcept;
  /// Feeds the next reply of the current batch, in order.
  void on_reply(const resp3::value& v);

  /// Empty: the connection is set up. Otherwise the attempt's error.
  boost::system::error_code error() const noexcept { return error_; }
  /// error() is a refusal that will not go away by itself (wrong password,
  /// database out of range, NOPERM): see setup_verdict::refused.
  bool refused() const noexcept { return refused_; }
  /// 3 after HELLO succeeded, else 2.
  int protocol() const noexcept { return protocol_; }
  /// The server refused the client name; the connection goes on without one.
  bool name_refused() const noexcept { return static_cast<bool>(name_error_); }
  /// Why the name was refused: no_permission (NOPERM) or handshake_failed.
  boost::system::error_code name_error() const noexcept { return name_error_; }
  /// The server's text for the failure (error()) or, if none, the name refusal.
  const std::string& server_message() const noexcept { return message_; }

 private:
  enum class phase : std::uint8_t { send_hello, send_unnamed_hello, send_setup, awaiting, done };

  void build_hello(request& out, bool named);
  void build_setup(request& out);

  config cfg_;  // a copy: the handshake may outlive the caller's config object
  phase phase_;
  phase after_batch_ = phase::done;  // what the current batch leads to when all is well
  std::vector<setup_step> steps_;    // the current batch's checked commands
  std::size_t next_reply_ = 0;
  bool hello_named_ = false;
  bool resp2_setup_ = false;  // the setup batch must AUTH and SETNAME itself
  bool check_role_ = false;
  bool final_ = false;
  bool refused_ = false;
  int protocol_ = 2;
  boost::system::error_code error_;
  boost::system::error_code name_error_;
  std::string message_;
};

}  // namespace thoonk::detail
