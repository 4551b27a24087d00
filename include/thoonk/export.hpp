// THOONK_API: marks what the shared library exports. The library is built
// with hidden visibility (docs/packaging.md, "Shared library"): only the
// classes and functions of the public headers carrying this macro, and what
// they need, are visible outside libthoonk.so. In a static library the
// attribute changes nothing.
#pragma once

/// \file
/// \brief The export macro of the shared library.

#if defined(__GNUC__) || defined(__clang__)
/// Exported from libthoonk.so: a class (its members, vtable and type
/// information) or a function of the public API.
#define THOONK_API __attribute__((visibility("default")))
#else
#define THOONK_API
#endif
