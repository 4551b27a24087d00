// ACL users for the tests of permissions (acl_test.cpp, acl_roles_test.cpp).
#pragma once

#include "support/helpers.hpp"

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace thoonk::test {

/// ACL SETUSER `name` `rules...` on `admin`, which must succeed (REQUIRE;
/// the server's error is in the message).
inline asio::awaitable<void> acl_setuser(thoonk::connection& admin, const std::string& name,
                                         std::vector<std::string> rules) {
  std::vector<std::string> args{"SETUSER", name};
  for (auto& r : rules) args.push_back(std::move(r));
  thoonk::request req;
  req.push_range("ACL", std::span<const std::string_view>{}, args);
  auto resp = co_await admin.async_exec(req, asio::use_awaitable);
  REQUIRE(resp.size() == 1);
  INFO(resp[0].str);
  REQUIRE(!resp[0].is_error());
}

}  // namespace thoonk::test
