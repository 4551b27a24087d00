// The library's scripts as Redis functions (FUNCTION LOAD, FCALL; Redis 7):
// each embedded script's library form (scripts/lua_embed)
// named for its text, and the decisions of the FCALL path, without I/O
// (test/unit/script_functions_test.cpp). The runner that sends the
// commands is eval_on in script_exec.cpp; docs/design.md §3 says why.
#pragma once

#include "detail/op_status.hpp"

#include <thoonk/resp3/value.hpp>
#include <thoonk/script.hpp>

#include <boost/system/error_code.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace thoonk::detail {

/// A library script as one function library: `name` is the library's and
/// its one function's name, `thoonk_` and the SHA1 of the library's text
/// before naming, so two builds with different scripts never share a name
/// and one build's library loads once per server whichever client loads it.
struct function_library {
  std::string name;
  std::string text;  ///< what FUNCTION LOAD sends
};

/// The library form of a template from scripts/lua_embed (its name
/// written @FN@), named; `sharded`: notifications with SPUBLISH, as
/// sharded_variant() makes the EVALSHA form.
function_library make_function_library(std::string_view template_text, bool sharded);

/// The library form of `s` when `s` is one of the embedded scripts or the
/// sharded_variant() of one; nullptr for any other script (an
/// application's own, run by client::eval). Each is made once and kept.
/// Thread-safe.
const function_library* function_library_of(const script& s);

/// What the runner does after an FCALL reply.
enum class fcall_step {
  done,              ///< the reply is the script's (a Lua error included)
  load,              ///< no such function on this server: FUNCTION LOAD and FCALL again
  use_eval,          ///< nothing ran; run this call with EVALSHA (OOM, READONLY, ...)
  use_eval_for_good  ///< nothing ran and functions cannot work here: EVALSHA from now on
};

/// After FCALL alone:
///  * `ERR Function not found` → load;
///  * FCALL unknown (before Redis 7.0) or refused by the ACL → use_eval_for_good;
///  * refused before it ran for a reason EVALSHA meets only at the script's
///    first write (`OOM`, `READONLY`, `MISCONF`, `NOREPLICAS`): a
///    script that only reads still runs → use_eval;
///  * anything else → done.
fcall_step after_fcall(const resp3::value& fcall);

/// After FUNCTION LOAD and FCALL sent together:
///  * the FCALL found its function (loaded now, or by another client
///    first, which makes the load fail with "already exists"): as after_fcall;
///  * it did not, and the load failed: refused by the ACL, or any failure
///    of the library itself → use_eval_for_good; refused for the server's
///    state (OOM, READONLY, ...) → use_eval;
///  * it did not though the load succeeded (the key's slot moved to
///    another node in between) → load.
fcall_step after_function_load(const resp3::value& load, const resp3::value& fcall);

/// One FUNCTION LOAD at a time per node and library, among a client's
/// concurrent calls (the router keeps one; `Waiter` is what a call waits
/// on, a timer there, a number in the unit tests).
///
/// Calls that all find the library missing on a node (a fresh server, after
/// FUNCTION FLUSH) would each send the library's text and all but one load
/// would fail ("already exists"). Instead the first one leads: it loads;
/// the others join its flight and, when it ends (however it ended), call
/// FCALL again without loading. A call that still finds no function then
/// (the load failed, the slot moved to another node) may lead a flight of
/// its own. Not thread-safe: the client's executor.
template <class Waiter>
class load_flights {
 public:
  /// True: no load of `flight` (node and library) is under way and the
  /// caller leads one (finish() it whatever happens); false: join() it.
  bool lead(const std::string& flight) { return flights_.try_emplace(flight).second; }
  /// Waits for the flight under way (lead() returned false).
  void join(const std::string& flight, Waiter w) { flights_[flight].push_back(std::move(w)); }
  /// The leader is done: every waiter of the flight, to be woken.
  std::vector<Waiter> finish(const std::string& flight) {
    auto it = flights_.find(flight);
    if (it == flights_.end()) return {};
    auto out = std::move(it->second);
    flights_.erase(it);
    return out;
  }
  /// `w` runs again. True when its flight had ended (it was woken); false
  /// when it was still waiting (its wait was cancelled): it leaves.
  bool resumed(const std::string& flight, const Waiter& w) {
    auto it = flights_.find(flight);
    if (it == flights_.end()) return true;
    auto& ws = it->second;
    auto at = std::find(ws.begin(), ws.end(), w);
    if (at == ws.end()) return true;
    ws.erase(at);
    return false;
  }
  bool in_flight(const std::string& flight) const { return flights_.contains(flight); }
  std::size_t waiting(const std::string& flight) const {
    auto it = flights_.find(flight);
    return it == flights_.end() ? 0 : it->second.size();
  }

 private:
  std::map<std::string, std::vector<Waiter>, std::less<>> flights_;
};

/// The names of every library this build can load: each embedded script's
/// library form, and the sharded form of each that notifies (the names
/// make_function_library() gives). Made once; thread-safe.
const std::set<std::string, std::less<>>& this_build_libraries();

/// Whether `name` is a name this library gives its function libraries in
/// any build: `thoonk_` and 40 lowercase hex digits (a SHA1).
bool is_library_name(std::string_view name) noexcept;

/// From a FUNCTION LIST reply (RESP3: an array of maps; RESP2: an array of
/// flat key/value arrays), the `library_name` of each library that is this
/// library's (is_library_name) and not in `keep`, in the reply's order;
/// other libraries (an application's own) are never named. A reply of
/// another shape sets `ec` to error::unexpected_type and returns nothing.
std::vector<std::string> stale_libraries(const resp3::value& function_list,
                                         const std::set<std::string, std::less<>>& keep,
                                         boost::system::error_code& ec);

/// The status of a reply to FUNCTION LIST or FUNCTION DELETE, as
/// reply_status() gives it, except that an ACL refusal is
/// error::no_permission (reply_status calls any FUNCTION refusal
/// no_script_permission, whose message is about running the scripts).
op_status function_reply_status(const resp3::value& v);

/// Whether a FUNCTION LIST reply says the server has no functions at all
/// (before Redis 7.0: an unknown command).
bool functions_unknown(const resp3::value& list_reply) noexcept;

/// How many of the FUNCTION DELETE replies deleted a library. `Library not
/// found` (another client deleted it since the list) is neither counted
/// nor an error; the first other error is `status`
/// (function_reply_status), the rest still counted.
std::size_t count_deleted(std::span<const resp3::value> delete_replies, op_status& status);

}  // namespace thoonk::detail
