// client::delete_stale_functions: the function libraries of other builds
// (docs/design.md §3, "Old libraries"). The decisions (which names are this
// library's, which are stale, the FUNCTION LIST reply's shape) live in
// scripts/script_functions.cpp without I/O; this is the command sequence.
#include <thoonk/client.hpp>
#include <thoonk/error.hpp>

#include "connection/router.hpp"
#include "detail/spawn.hpp"
#include "scripts/script_exec.hpp"
#include "scripts/script_functions.hpp"

namespace thoonk {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {

// One server's command channel: the client's connection on one server, a
// primary's in cluster mode.
asio::awaitable<std::tuple<error_code, response>> exec_at(
    detail::router& r, const std::optional<detail::cluster_node>& node, const request& req) {
  if (node) co_return co_await r.exec_on(*node, req);
  co_return co_await detail::exec_co(r.any(), req);
}

// Deletes one server's stale libraries; adds what it deleted to `deleted`.
asio::awaitable<detail::op_status> delete_on(detail::router& r,
                                             std::optional<detail::cluster_node> node,
                                             std::size_t& deleted) {
  request list;
  // LIBRARYNAME is a glob pattern (matched without case).
  list.push("FUNCTION", "LIST", "LIBRARYNAME", "thoonk_*");
  auto [ec, resp] = co_await exec_at(r, node, list);
  if (ec) co_return ec;
  const auto& reply = resp[0];
  if (detail::functions_unknown(reply)) co_return error_code{};  // nothing to delete
  if (auto st = detail::function_reply_status(reply)) co_return st;
  error_code shape;
  auto stale = detail::stale_libraries(reply, detail::this_build_libraries(), shape);
  if (shape) co_return shape;
  if (stale.empty()) co_return error_code{};

  request del;
  for (const auto& name : stale) del.push("FUNCTION", "DELETE", name);
  auto [dec, dresp] = co_await exec_at(r, node, del);
  if (dec) co_return dec;
  detail::op_status status;
  deleted += detail::count_deleted(dresp, status);
  co_return status;
}

asio::awaitable<detail::op_result<std::size_t>> delete_stale_op(detail::client_core* c) {
  auto& r = detail::router_of(*c);
  std::size_t deleted = 0;
  if (!r.clustered()) {
    auto st = co_await delete_on(r, std::nullopt, deleted);
    co_return std::tuple{std::move(st), deleted};
  }
  auto [ec, primaries] = co_await r.primaries();
  if (ec) co_return std::tuple{detail::op_status(ec), deleted};
  for (const auto& p : primaries) {
    auto st = co_await delete_on(r, p, deleted);
    if (st) co_return std::tuple{std::move(st), deleted};
  }
  co_return std::tuple{detail::op_status{}, deleted};
}

}  // namespace

void client::start_delete_stale_functions(handler<std::size_t> h) {
  detail::spawn_op(client_core_, delete_stale_op(client_core_.get()), std::move(h));
}

}  // namespace thoonk
