// A program built against an installed thoonk-asio, as a user would build
// it: with find_package(thoonk) (CMakeLists.txt here) or with
// `pkg-config --cflags --libs thoonk`. Without THOONK_REDIS_URL it needs no
// server: it checks the version and builds a client and a request. With
// THOONK_REDIS_URL it also puts a job, claims it and finishes it.
#include <thoonk/thoonk.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <iostream>
#include <string>

namespace asio = boost::asio;

namespace {

asio::awaitable<void> put_and_claim(thoonk::client& c) {
  co_await c.async_connect();
  const std::string name = "consumer.jobs." + c.instance_id().substr(0, 8);
  auto jobs = co_await thoonk::job_queue::async_create_or_open(c, name);
  auto put = co_await jobs.async_put("hello from the consumer");
  auto job = co_await jobs.async_claim(std::chrono::seconds(5));
  if (job.id != put.id || job.item != "hello from the consumer")
    throw std::runtime_error("claimed " + job.id + " \"" + job.item + "\", not what was put");
  co_await jobs.async_finish(job, "done");
  co_await c.async_delete_feed(name);
  std::cout << "consumer: put, claimed and finished job " << job.id << "\n";
}

}  // namespace

int main() {
  // The headers and the library it runs with are one version.
  if (std::strcmp(thoonk::version(), THOONK_VERSION_STRING) != 0) {
    std::cerr << "consumer: library " << thoonk::version() << ", headers " << THOONK_VERSION_STRING
              << "\n";
    return 1;
  }
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url("redis://127.0.0.1:1/2", ec);
  if (ec || cfg.database != 2) return 1;
  asio::io_context ioc;
  {
    thoonk::client c(ioc.get_executor(), cfg);  // constructs, never connects
    thoonk::request r;
    r.push("PING");
    std::cout << "consumer ok: thoonk " << thoonk::version() << ", " << r.payload().size()
              << " bytes, instance " << c.instance_id() << "\n";
    if (r.expected_replies() != 1) return 1;
  }
  const char* url = std::getenv("THOONK_REDIS_URL");
  if (url == nullptr || *url == '\0') return 0;

  thoonk::client c(ioc.get_executor(), thoonk::config::from_env());
  int status = 1;
  asio::co_spawn(ioc, put_and_claim(c), [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "consumer: " << ex.what() << "\n";
      }
    } else {
      status = 0;
    }
    c.stop();
  });
  ioc.run();
  return status;
}
