// The command lines of the peer comparison's programs (peer_scenarios and
// benchmarks/peers/hop_floor.cpp): a role, then `--name value` options and
// bare flags, walked in order. Header-only and free of dependencies, so
// hop_floor, compiled alone by one compiler call, shares it.
#pragma once

#include <stdexcept>
#include <string>

namespace thoonk::bench {

/// Calls `on_option(name, value)` for each argument from argv[first] on.
/// `value()` consumes and returns the argument after `name`, and throws
/// std::invalid_argument ("--x needs a value") when there is none; a flag
/// does not call it. `on_option` throws for a name it does not know.
template <class OnOption>
void for_each_option(int argc, char** argv, int first, OnOption on_option) {
  for (int i = first; i < argc; ++i) {
    const std::string name = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(name + " needs a value");
      return argv[++i];
    };
    on_option(name, value);
  }
}

}  // namespace thoonk::bench
