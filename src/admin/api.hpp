// The JSON API of the admin server: one coroutine per route, reading with
// bounded work (SSCAN, ranges of one page, one job at a time) and changing
// things through the library's job_queue and client operations.
#pragma once

#include "admin/rules.hpp"

#include <thoonk/admin/server.hpp>
#include <thoonk/client.hpp>

#include <boost/asio/awaitable.hpp>

#include <optional>
#include <string>
#include <vector>

namespace thoonk::admin::detail {

struct api_request {
  route_id id = route_id::queues;
  std::vector<std::string> params;
  target t;
  std::string body;
};

struct api_response {
  unsigned status = 200;
  std::string body;  ///< JSON
};

/// Most entries of one page (`count=`); default 50.
inline constexpr std::size_t max_page = 500;
inline constexpr std::size_t default_page = 50;

class api {
 public:
  api(client& c, const options& opts) : c_(c), opts_(opts) {}
  /// Never throws for a request's sake: every failure is a JSON answer.
  boost::asio::awaitable<api_response> handle(api_request r);
  /// For /api/queues/{q}/events: nullopt when `name` is a job queue, else
  /// the error answer.
  boost::asio::awaitable<std::optional<api_response>> check_job_queue(std::string name);

 private:
  boost::asio::awaitable<api_response> dispatch(api_request& r);
  client& c_;
  const options& opts_;
};

/// `{"error":{"code":..,"message":..[,"server":..]}}`.
api_response error_response(unsigned status, std::string_view code, std::string_view message,
                            std::string_view server_message = {});

}  // namespace thoonk::admin::detail
