// Compiles and links against the installed library; needs no server.
#include <thoonk/thoonk.hpp>

#include <boost/asio/io_context.hpp>

#include <iostream>

int main() {
  boost::system::error_code ec;
  auto cfg = thoonk::config::from_url("redis://127.0.0.1:1/2", ec);
  if (ec || cfg.database != 2) return 1;
  boost::asio::io_context ioc;
  thoonk::client c(ioc.get_executor(), cfg);  // constructs, never connects
  thoonk::request r;
  r.push("PING");
  std::cout << "consumer ok: " << r.payload().size() << " bytes, instance " << c.instance_id()
            << "\n";
  return r.expected_replies() == 1 ? 0 : 1;
}
