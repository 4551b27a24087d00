#include <thoonk/version.hpp>

namespace thoonk {

// Compiled into the library, so it reports the library's own version even
// when a program was built against other headers.
const char* version() noexcept { return THOONK_VERSION_STRING; }

}  // namespace thoonk
