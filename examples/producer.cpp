// A producer: puts jobs on a job queue and exits.
//
//   THOONK_REDIS_URL=redis://127.0.0.1:6379 ./producer [queue] [count]
//
// Creates the job queue `queue` (default "examples.jobs") when it does not
// exist, puts `count` jobs (default 5) "job-1" ... "job-N" in one batch and
// prints their ids and how many jobs wait now. A worker (examples/worker.cpp)
// takes them. Exit status: 0 on success, 1 on an error (printed).
#include <thoonk/thoonk.hpp>

#include <boost/asio/co_spawn.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>

#include <cstdlib>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

namespace asio = boost::asio;

namespace {

asio::awaitable<void> produce(thoonk::client& client, std::string name, int count) {
  co_await client.async_connect();
  auto jobs = co_await thoonk::job_queue::async_create_or_open(client, name);
  std::vector<std::string> items;
  for (int i = 1; i <= count; ++i) items.push_back("job-" + std::to_string(i));
  // One script call for the whole batch; each job gets a generated id.
  auto ids = co_await jobs.async_put_many(items, thoonk::priority::normal);
  for (std::size_t i = 0; i < ids.size(); ++i)
    std::cout << "producer: put " << items[i] << " as " << ids[i] << "\n";
  auto counts = co_await jobs.async_counts();
  std::cout << "producer: " << counts.waiting << " jobs waiting in " << name << "\n";
}

}  // namespace

int main(int argc, char** argv) {
  const std::string name = argc > 1 ? argv[1] : "examples.jobs";
  const int count = argc > 2 ? std::atoi(argv[2]) : 5;
  if (count < 1) {
    std::cerr << "producer: count must be a positive number\n";
    return 2;
  }
  asio::io_context ioc;
  thoonk::client client(ioc.get_executor(), thoonk::config::from_env());
  int status = 1;
  asio::co_spawn(ioc, produce(client, name, count), [&](std::exception_ptr e) {
    if (e) {
      try {
        std::rethrow_exception(e);
      } catch (const std::exception& ex) {
        std::cerr << "producer: " << ex.what() << "\n";
      }
    } else {
      status = 0;
    }
    client.stop();  // ends the connections, so run() returns
  });
  ioc.run();
  return status;
}
