// The library's own way to a public handle's implementation: the public
// classes keep it private and befriend this one accessor, so the installed
// headers expose no implementation to applications.
#pragma once

#include <thoonk/connection.hpp>
#include <thoonk/subscriber.hpp>

#include <memory>

namespace thoonk::detail {

struct impl_access {
  static const std::shared_ptr<connection_impl>& of(const connection& c) noexcept {
    return c.impl_;
  }
  static const std::shared_ptr<subscriber_impl>& of(const subscriber& s) noexcept {
    return s.impl_;
  }
};

}  // namespace thoonk::detail
