// The example application: connects to Redis (THOONK_REDIS_URL, default
// redis://127.0.0.1:6379), then walks through feeds and jobs.
//
//   THOONK_REDIS_URL=redis://127.0.0.1:6379 ./build/examples/example
//
// scripts/run-example.sh builds it and runs it against a throwaway server.
#include "feed_demo.hpp"
#include "job_demo.hpp"

#include <thoonk/thoonk.hpp>

#include <boost/asio.hpp>

#include <iostream>

namespace asio = boost::asio;

int main() {
  asio::io_context ioc;
  thoonk::config cfg;
  try {
    cfg = thoonk::config::from_env();
  } catch (const std::exception& e) {
    std::cerr << "example: " << e.what() << "\n";
    return 2;
  }
  thoonk::client client(ioc.get_executor(), cfg);
  int status = 1;

  asio::co_spawn(
      ioc,
      [&]() -> asio::awaitable<void> {
        co_await client.async_connect(asio::use_awaitable);
        std::cout << "connected to " << (cfg.unix_socket.empty() ? cfg.host : cfg.unix_socket)
                  << " (RESP" << client.conn().protocol() << ")\n";

        // Plain commands: one request, several commands, one round trip.
        thoonk::request req;
        req.push("PING");
        req.push("INCR", "example:runs");
        auto replies = co_await client.conn().async_exec(req, asio::use_awaitable);
        std::cout << "PING -> " << replies[0].str << ", this example ran " << replies[1].integer
                  << " time(s) on this server\n\n";

        co_await run_feed_demo(client);
        std::cout << "\n";
        co_await run_job_demo(client);

        auto s = client.conn().stats();
        std::cout << "\nconnection: " << s.requests << " requests, " << s.commands
                  << " commands in " << s.writes << " socket writes\n";
        status = 0;
        client.stop();
      },
      [&](std::exception_ptr e) {
        if (!e) return;
        try {
          std::rethrow_exception(e);
        } catch (const std::exception& ex) {
          std::cerr << "example failed: " << ex.what() << "\n";
        }
        client.stop();
      });

  ioc.run_for(std::chrono::seconds(60));
  if (status != 0 && !ioc.stopped()) std::cerr << "example: did not finish within 60 s\n";
  return status;
}
