# thoonk::admin (included from the top-level CMakeLists.txt): the admin
# HTTP server (src/admin/*.cpp) and its dashboard page (src/admin/page/*),
# embedded into a generated source at build time.
file(GLOB THOONK_ADMIN_SOURCES CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/admin/*.cpp)
file(GLOB THOONK_ADMIN_PAGE CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/src/admin/page/*)
list(SORT THOONK_ADMIN_PAGE)
set(THOONK_ADMIN_PAGE_CPP ${THOONK_GENERATED_DIR}/admin_page.cpp)
add_custom_command(
  OUTPUT ${THOONK_ADMIN_PAGE_CPP}
  COMMAND ${CMAKE_COMMAND} -DOUT=${THOONK_ADMIN_PAGE_CPP} "-DFILES=${THOONK_ADMIN_PAGE}"
          -P ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
  DEPENDS ${THOONK_ADMIN_PAGE} ${PROJECT_SOURCE_DIR}/cmake/embed_files.cmake
  COMMENT "Embedding the admin dashboard (src/admin/page)"
  VERBATIM)
add_library(thoonk_admin ${THOONK_ADMIN_SOURCES} ${THOONK_ADMIN_PAGE_CPP})
add_library(thoonk::admin ALIAS thoonk_admin)
target_link_libraries(thoonk_admin PUBLIC thoonk::thoonk)
target_include_directories(thoonk_admin PRIVATE ${PROJECT_SOURCE_DIR}/src)
# Not BOOST_ASIO_NO_DEPRECATED, as for the core library (CMakeLists.txt says
# why: it changes what Asio's inline error_code overloads return).
thoonk_warnings(thoonk_admin)
set_target_properties(thoonk_admin PROPERTIES EXPORT_NAME admin)
install(TARGETS thoonk_admin EXPORT thoonkTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})
