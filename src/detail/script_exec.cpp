#include "detail/script_exec.hpp"

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/use_awaitable.hpp>

namespace thoonk::detail {

namespace asio = boost::asio;
using boost::system::error_code;

namespace {
void push_evalsha(request& req, const script& s, std::span<const std::string_view> keys,
                  std::span<const std::string_view> args) {
  req.begin_command(3 + keys.size() + args.size(), "EVALSHA");
  req.append_arg("EVALSHA");
  req.append_arg(s.sha1());
  req.append_arg(keys.size());
  for (auto k : keys) req.append_arg(k);
  for (auto a : args) req.append_arg(a);
}
}  // namespace

asio::awaitable<std::tuple<error_code, response>> exec_co(connection& conn, const request& req,
                                                          exec_options opts) {
  co_return co_await conn.exec(req, opts, asio::as_tuple(asio::use_awaitable));
}

asio::awaitable<std::tuple<error_code, resp3::value>> eval_script(
    connection& conn, const script& s, std::span<const std::string_view> keys,
    std::span<const std::string_view> args, exec_options opts) {
  request req;
  push_evalsha(req, s, keys, args);
  auto [ec, resp] = co_await conn.exec(req, opts, asio::as_tuple(asio::use_awaitable));
  if (ec) co_return std::tuple{ec, resp3::value{}};
  if (!(resp[0].is_error() && resp[0].str.starts_with("NOSCRIPT")))
    co_return std::tuple{error_code{}, std::move(resp[0])};

  // The server lost its script cache: load and run again in one round trip.
  req.clear();
  req.push("SCRIPT", "LOAD", s.source());
  push_evalsha(req, s, keys, args);
  auto [ec2, resp2] = co_await conn.exec(req, opts, asio::as_tuple(asio::use_awaitable));
  if (ec2) co_return std::tuple{ec2, resp3::value{}};
  if (resp2[0].is_error()) co_return std::tuple{error_code{}, std::move(resp2[0])};
  co_return std::tuple{error_code{}, std::move(resp2[1])};
}

}  // namespace thoonk::detail
