// Random (version 4) UUIDs for instance ids and generated item/job ids.
#pragma once

#include <string>

namespace thoonk::detail {

/// 36-character lower-case RFC 4122 version 4 UUID. Thread-safe.
std::string make_uuid();

}  // namespace thoonk::detail
