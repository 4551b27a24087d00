// The dashboard's files (src/admin/page/), embedded into the binary at
// build time by cmake/embed_files.cmake (the generated admin_page.cpp
// defines page_files()).
#pragma once

#include <span>
#include <string_view>

namespace thoonk::admin::detail {

struct page_file {
  std::string_view path;          ///< "/index.html", "/app.js", ...
  std::string_view content_type;  ///< "text/html; charset=utf-8", ...
  std::string_view body;
};

/// Every embedded file.
std::span<const page_file> page_files() noexcept;

}  // namespace thoonk::admin::detail
