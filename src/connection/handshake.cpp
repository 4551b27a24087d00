#include "connection/handshake.hpp"

#include "connection/failover.hpp"

#include <thoonk/error.hpp>

#include <cctype>
#include <string_view>

namespace thoonk::detail {

using boost::system::error_code;

namespace {

// The error's code word: "WRONGPASS", "NOPERM", "ERR", ...
std::string_view code_word(std::string_view msg) { return msg.substr(0, msg.find(' ')); }

bool contains_nocase(std::string_view s, std::string_view lower_needle) {
  if (lower_needle.size() > s.size()) return false;
  for (std::size_t i = 0; i + lower_needle.size() <= s.size(); ++i) {
    std::size_t j = 0;
    while (j < lower_needle.size() &&
           std::tolower(static_cast<unsigned char>(s[i + j])) == lower_needle[j])
      ++j;
    if (j == lower_needle.size()) return true;
  }
  return false;
}

// The server cannot serve this connection *yet*: it is loading its data set,
// blocked by a long script, a replica without its master, a cluster
// reconfiguring, or out of client slots. Retrying with the normal backoff is
// right, and requests waiting for a connection keep waiting.
bool is_transient(std::string_view msg) {
  auto code = code_word(msg);
  return code == "LOADING" || code == "BUSY" || code == "MASTERDOWN" || code == "TRYAGAIN" ||
         code == "CLUSTERDOWN" || contains_nocase(msg, "max number of clients reached");
}

// Credentials the server does not accept, or none where it needs some.
// Redis 6+: WRONGPASS / NOAUTH; older servers: "ERR invalid password",
// "ERR Client sent AUTH, but no password is set", and 6.0's
// "ERR AUTH <password> called without any password configured".
bool is_auth_error(std::string_view msg) {
  auto code = code_word(msg);
  return code == "WRONGPASS" || code == "NOAUTH" || contains_nocase(msg, "invalid password") ||
         contains_nocase(msg, "invalid username-password") ||
         contains_nocase(msg, "without any password configured") ||
         contains_nocase(msg, "no password is set");
}

}  // namespace

setup_reply_meaning classify_setup_reply(setup_step step, const resp3::value& reply,
                                         bool hello_named) {
  if (!reply.is_error()) return {setup_verdict::ok, {}};
  std::string_view msg = reply.str;
  auto code = code_word(msg);
  const bool noperm = code == "NOPERM";
  // Checked first for every step: a refused AUTH makes the commands pipelined
  // after it fail with NOAUTH, and a full server refuses whatever comes first.
  if (is_transient(msg)) return {setup_verdict::transient, error::handshake_failed};
  if (is_auth_error(msg)) return {setup_verdict::refused, error::auth_failed};
  switch (step) {
    case setup_step::hello:
      // A server before 6.0 does not know HELLO; NOPROTO: no RESP3. NOPERM:
      // a Redis 6 ACL user without +hello (Redis 7 never checks HELLO's ACL).
      // RESP2 commands do the same job, AUTH included, so none is fatal.
      if (code == "NOPROTO" || noperm || contains_nocase(msg, "unknown command"))
        return {setup_verdict::use_resp2, {}};
      // HELLO validates the name before anything else ("Client names cannot
      // contain spaces..."): the name is cosmetic, the connection is not.
      if (hello_named && contains_nocase(msg, "client name"))
        return {setup_verdict::drop_name, error::handshake_failed};
      return {setup_verdict::refused, error::handshake_failed};
    case setup_step::auth:
      return {setup_verdict::refused, noperm ? error::no_permission : error::auth_failed};
    case setup_step::setname:
      // An ACL user without +client (NOPERM), or a name with spaces: the name
      // only labels the connection in CLIENT LIST, so go on without it.
      return {setup_verdict::name_refused, noperm ? error::no_permission : error::handshake_failed};
    case setup_step::role:
      // NOPERM: a user without +role cannot tell a primary from a replica.
      return {setup_verdict::refused, noperm ? error::no_permission : error::handshake_failed};
    case setup_step::select:
      // "DB index is out of range", "SELECT is not allowed in cluster mode",
      // or NOPERM: the same answer on every retry until someone changes the
      // config or the ACL.
      return {setup_verdict::refused, noperm ? error::no_permission : error::handshake_failed};
  }
  return {setup_verdict::refused, error::handshake_failed};
}

handshake::handshake(const config& cfg, bool check_role)
    : cfg_(cfg), phase_(cfg.protocol >= 3 ? phase::send_hello : phase::send_setup) {
  resp2_setup_ = cfg.protocol < 3;
  check_role_ = check_role;
}

bool handshake::next_batch(request& out) {
  out.clear();
  steps_.clear();
  next_reply_ = 0;
  switch (phase_) {
    case phase::send_hello: build_hello(out, !cfg_.client_name.empty()); return true;
    case phase::send_unnamed_hello: build_hello(out, false); return true;
    case phase::send_setup: build_setup(out); return true;
    case phase::awaiting:
      // The caller asked for a new batch before feeding every reply of the
      // previous one: a bug in the I/O layer, not a server problem.
      error_ = error::handshake_failed;
      refused_ = false;
      phase_ = phase::done;
      return false;
    case phase::done: return false;
  }
  return false;
}

void handshake::build_hello(request& out, bool named) {
  // HELLO 3 [AUTH user pass] [SETNAME name] in one command.
  std::vector<std::string_view> args{"3"};
  if (!cfg_.password.empty()) {
    args.push_back("AUTH");
    args.push_back(cfg_.username.empty() ? std::string_view("default") : cfg_.username);
    args.push_back(cfg_.password);
  }
  if (named) {
    args.push_back("SETNAME");
    args.push_back(cfg_.client_name);
  }
  out.push_range("HELLO", {}, args);
  steps_.push_back(setup_step::hello);
  hello_named_ = named;
  final_ = false;
  phase_ = phase::awaiting;
  after_batch_ = phase::send_setup;
}

void handshake::build_setup(request& out) {
  // What HELLO did not do (RESP2 only), then SELECT. The caller may append
  // its own commands, so this batch is sent even when empty here.
  if (resp2_setup_) {
    if (!cfg_.password.empty()) {
      if (cfg_.username.empty()) out.push("AUTH", cfg_.password);
      else out.push("AUTH", cfg_.username, cfg_.password);
      steps_.push_back(setup_step::auth);
    }
    if (!cfg_.client_name.empty() && !name_error_) {
      out.push("CLIENT", "SETNAME", cfg_.client_name);
      steps_.push_back(setup_step::setname);
    }
  }
  if (cfg_.database != 0) {
    out.push("SELECT", cfg_.database);
    steps_.push_back(setup_step::select);
  }
  if (check_role_) {
    out.push("ROLE");
    steps_.push_back(setup_step::role);
  }
  final_ = true;
  phase_ = steps_.empty() ? phase::done : phase::awaiting;
  after_batch_ = phase::done;
}

std::size_t handshake::replies_due() const noexcept {
  return phase_ == phase::awaiting ? steps_.size() - next_reply_ : 0;
}

void handshake::on_reply(const resp3::value& v) {
  if (phase_ != phase::awaiting || next_reply_ >= steps_.size()) return;
  const setup_step step = steps_[next_reply_++];
  auto m = classify_setup_reply(step, v, step == setup_step::hello && hello_named_);
  if (step == setup_step::role && m.verdict == setup_verdict::ok && !failover::is_primary(v)) {
    // A replica (or a sentinel): not refused for good, another address may
    // be the primary, and this one may become it.
    error_ = error::not_primary;
    refused_ = false;
    message_ = "ROLE: " + failover::role_name(v);
    phase_ = phase::done;
    return;
  }
  switch (m.verdict) {
    case setup_verdict::ok:
      if (step == setup_step::hello) protocol_ = 3;
      break;
    case setup_verdict::use_resp2:
      protocol_ = 2;
      resp2_setup_ = true;
      break;
    case setup_verdict::drop_name:
      name_error_ = m.ec;
      if (message_.empty()) message_ = v.str;
      after_batch_ = phase::send_unnamed_hello;
      break;
    case setup_verdict::name_refused:
      name_error_ = m.ec;
      if (message_.empty()) message_ = v.str;
      break;
    case setup_verdict::transient:
    case setup_verdict::refused:
      // The first failure decides: after a refused AUTH the pipelined
      // commands fail with NOAUTH, which says less.
      error_ = m.ec;
      refused_ = m.verdict == setup_verdict::refused;
      message_ = v.str;
      phase_ = phase::done;
      return;
  }
  if (next_reply_ == steps_.size()) phase_ = after_batch_;
}

}  // namespace thoonk::detail
