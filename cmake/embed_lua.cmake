# Embeds the library's Lua scripts (src/lua/**) into C++ at build time.
#
#   cmake -DLUA_DIR=<src/lua> -DOUT_DIR=<dir> -DMODE=header|source -P embed_lua.cmake
#
# writes <dir>/thoonk_lua_scripts.hpp (MODE=header, run at configure time:
# it depends only on which files exist, and is rewritten only when that
# changes) or <dir>/thoonk_lua_scripts.cpp (MODE=source, run by the build
# whenever a .lua file changes) (namespace thoonk::detail::scripts):
# one accessor per script file, named after its path (feeds/publish.lua ->
# scripts::feeds_publish()), returning a thoonk::script built on first use (the
# SHA1 is computed then, once: no static initialisation order), plus
# scripts::all_scripts() listing every one (test/integration/scripts_test.cpp).
#
# Every script file starts with `-- layout: <kind> ...`. The source sent to
# the server is
#
#   <layouts/<kind>.lua joined> <prelude.lua joined>
#   <layouts/<kind>_engine.lua joined, if it exists> <the file, verbatim>
#
# where "joined" drops comment lines and blank lines and joins the rest with
# spaces: both headers sit on the script's first line, before the file's own
# first line (a comment), so line N of the file is line N of the script and
# `user_script:N` in a server error names the file's line. The joining needs
# headers without comments after code and without long strings ([[ ]]); this
# step refuses them.
#
# Only the header definitions a script uses are embedded: a header is a
# sequence of top-level `local ...` definitions (each starts at the left
# margin), and a script gets those whose names its text uses, and what
# those use in turn, in header order. The server runs a script's top level
# on every call, so every unused function would cost a closure per call
# (about 1.3 µs per call for the whole prelude, measured on Redis 7.0).
# Definitions reached only through `cold.name` references are created on
# the first such reference in a call instead (needed_headers below).

cmake_minimum_required(VERSION 3.20)

if(NOT LUA_DIR OR NOT OUT_DIR OR NOT MODE MATCHES "^(header|source)$")
  message(FATAL_ERROR "embed_lua.cmake: pass -DLUA_DIR=... -DOUT_DIR=... -DMODE=header|source")
endif()

set(delim "thoonk_lua")

# Stops with `problem` when `text` contains `needle`.
function(refuse_if_contains text needle problem)
  string(FIND "${text}" "${needle}" at)
  if(NOT at EQUAL -1)
    message(FATAL_ERROR "${problem}")
  endif()
endfunction()

# Reads a header (prelude or layout) into its top-level definitions, in
# order: sets <prefix>_count, and <prefix>_<i>_code (joined onto one line)
# and <prefix>_<i>_names (the names it defines) for each.
function(split_definitions path prefix)
  file(READ "${path}" text)
  set(text "\n${text}")
  # Comment lines, then leading blanks of each line.
  string(REGEX REPLACE "\n[ \t]*--[^\n]*" "" text "${text}")
  refuse_if_contains("${text}" "--" "${path}: a comment after code (or `--` in a string); header \
lines are joined onto one line, put comments on lines of their own")
  refuse_if_contains("${text}" "[[" "${path}: long strings ([[ ]]) cannot be joined onto one line")
  refuse_if_contains("${text}" ";" "${path}: `;` in header code (the build splits headers into \
definitions with CMake lists)")
  refuse_if_contains("${text}" "@" "${path}: `@` in header code (the build marks definitions with it)")
  string(REPLACE "\nlocal " "\n@local " text "${text}")
  string(REGEX MATCHALL "@[^@]*" defs "${text}")
  set(i 0)
  foreach(def IN LISTS defs)
    string(SUBSTRING "${def}" 1 -1 def)
    if(def MATCHES "^local function ([A-Za-z_][A-Za-z0-9_]*)")
      set(names "${CMAKE_MATCH_1}")
    elseif(def MATCHES "^local ([A-Za-z_][A-Za-z0-9_, \t]*)=")
      string(REGEX REPLACE "[ \t]" "" names "${CMAKE_MATCH_1}")
      string(REPLACE "," ";" names "${names}")
    else()
      message(FATAL_ERROR "${path}: a top-level line that is no `local` definition: ${def}")
    endif()
    string(REGEX REPLACE "[ \t\r]*\n[ \t\r\n]*" " " def "${def}")
    string(STRIP "${def}" def)
    set(${prefix}_${i}_code "${def}" PARENT_SCOPE)
    set(${prefix}_${i}_names "${names}" PARENT_SCOPE)
    math(EXPR i "${i} + 1")
  endforeach()
  set(${prefix}_count ${i} PARENT_SCOPE)
endfunction()

# Adds to the list `keep` the definitions (indices into def_*) that are not
# in `keep` or `skip` and whose names the text in `used` references
# directly (`name` or `s..name`, not a field `x.name`), then what those reference in
# turn; appends their code to `used`.
macro(grow_direct used keep skip)
  set(_changed TRUE)
  math(EXPR _last "${def_count} - 1")
  while(_changed)
    set(_changed FALSE)
    foreach(_i RANGE ${_last})
      list(FIND ${keep} ${_i} _at)
      list(FIND ${skip} ${_i} _skipped)
      if(NOT _at EQUAL -1 OR NOT _skipped EQUAL -1)
        continue()
      endif()
      foreach(_name IN LISTS def_${_i}_names)
        # A field `x.name` is no use of the local `name`; a concatenation
        # `s..name` is.
        if(${used} MATCHES "([^A-Za-z0-9_.]|\\.\\.)${_name}[^A-Za-z0-9_]")
          list(APPEND ${keep} ${_i})
          string(APPEND ${used} " ${def_${_i}_code} ")
          set(_changed TRUE)
          break()
        endif()
      endforeach()
    endforeach()
  endwhile()
endmacro()

# The header text a script needs: of the definitions def_0 .. def_<n-1>
# (layout first, then prelude, then engine), those whose names `code` uses,
# and what they use in turn, joined in header order.
#
# Cold paths: code that calls a header function as `cold.name(...)` (a
# rare branch: a held put released, an aborted claim) does not make `name`
# part of the script's top level. Such definitions, and what they use that
# the rest of the script does not, are created only when the branch first
# runs in a call: inside the `__index` function of a table `cold`, which
# defines them and stores the names called through it. The server runs a
# script's top level on every call, and each function defined there costs
# a closure (about 1,600 instructions on Redis 7.0 with this layout's
# upvalues) whether the call uses it or not.
function(needed_headers code out)
  set(used " ${code} ")
  set(hot "")
  set(none "")
  grow_direct(used hot none)
  set(roots "")
  set(cold "")
  set(cold_used " ")
  set(scan "${used}")
  while(TRUE)
    string(REGEX MATCHALL "cold\\.[A-Za-z_][A-Za-z0-9_]*" refs "${scan}")
    set(before "${roots}")
    foreach(ref IN LISTS refs)
      string(SUBSTRING "${ref}" 5 -1 name)
      list(APPEND roots "${name}")
    endforeach()
    list(REMOVE_DUPLICATES roots)
    if("${roots}" STREQUAL "${before}")
      break()
    endif()
    foreach(name IN LISTS roots)
      string(APPEND cold_used " ${name} ")
    endforeach()
    grow_direct(cold_used cold hot)
    set(scan "${cold_used}")
  endwhile()
  foreach(name IN LISTS roots)
    set(defined FALSE)
    foreach(i IN LISTS hot cold)
      list(FIND def_${i}_names "${name}" at)
      if(NOT at EQUAL -1)
        set(defined TRUE)
      endif()
    endforeach()
    if(NOT defined)
      message(FATAL_ERROR "`cold.${name}` names no definition of the script's headers")
    endif()
  endforeach()
  list(SORT hot COMPARE NATURAL)
  list(SORT cold COMPARE NATURAL)
  set(text "")
  if(roots)
    set(text "local cold ")
  endif()
  # The function library form (library_form below): functions made once,
  # values bound per call.
  set(lib_names "KEYS, ARGV")
  if(roots)
    string(APPEND lib_names ", cold")
  endif()
  set(lib_functions "")
  set(lib_values "")
  foreach(i IN LISTS hot)
    string(APPEND text "${def_${i}_code} ")
    if(def_${i}_code MATCHES "^local function ")
      string(APPEND lib_functions "${def_${i}_code} ")
    else()
      string(REPLACE ";" ", " names "${def_${i}_names}")
      string(APPEND lib_names ", ${names}")
      string(SUBSTRING "${def_${i}_code}" 6 -1 assignment)
      string(APPEND lib_values "${assignment} ")
    endif()
  endforeach()
  set(cold_block "")
  if(roots)
    string(APPEND cold_block "cold = setmetatable({}, {__index = function(t, k) ")
    foreach(i IN LISTS cold)
      string(APPEND cold_block "${def_${i}_code} ")
    endforeach()
    foreach(name IN LISTS roots)
      string(APPEND cold_block "t.${name} = ${name} ")
    endforeach()
    string(APPEND cold_block "return rawget(t, k) end}) ")
  endif()
  string(APPEND text "${cold_block}")
  string(STRIP "${text}" text)
  # In the library, the cold functions too are made once, at load, in a
  # block of their own, and `cold` is a table made then that holds each
  # root (behind a wrapper that binds the values, when there are any). The
  # values (key names, constants) are assigned by the first cold call of a
  # call, as the script form's `__index` does: the call part only resets
  # `cold_bound`. So a call that takes a cold branch (a put handing jobs
  # off, on every put while a worker waits) makes no closure and no table
  # for it. (No metatable: a library's load may not read globals such as
  # `setmetatable`.)
  set(lib_cold "")
  set(lib_cold_reset "")
  if(roots)
    set(cold_names "")
    set(cold_functions "")
    set(cold_values "")
    foreach(i IN LISTS cold)
      if(def_${i}_code MATCHES "^local function ")
        string(APPEND cold_functions "${def_${i}_code} ")
      else()
        list(APPEND cold_names ${def_${i}_names})
        string(SUBSTRING "${def_${i}_code}" 6 -1 assignment)
        string(APPEND cold_values "${assignment} ")
      endif()
    endforeach()
    set(lib_cold "do ")
    set(guard "")
    if(cold_names)
      string(REPLACE ";" ", " cold_names "${cold_names}")
      string(APPEND lib_cold "local ${cold_names} ")
      string(APPEND lib_names ", cold_bound")
      string(APPEND cold_functions "local function bind_cold() cold_bound = true ${cold_values}end ")
      set(guard "if not cold_bound then bind_cold() end ")
      set(lib_cold_reset "cold_bound = false ")
    endif()
    string(APPEND lib_cold "${cold_functions}cold = {")
    foreach(name IN LISTS roots)
      set(is_function FALSE)
      foreach(i IN LISTS hot cold)
        list(FIND def_${i}_names "${name}" at)
        if(NOT at EQUAL -1 AND def_${i}_code MATCHES "^local function ")
          set(is_function TRUE)
        endif()
      endforeach()
      if(NOT is_function)
        message(FATAL_ERROR "`cold.${name}`: only a `local function` can be reached through `cold`")
      endif()
      if(guard)
        string(APPEND lib_cold "${name} = function(...) ${guard}return ${name}(...) end, ")
      else()
        string(APPEND lib_cold "${name} = ${name}, ")
      endif()
    endforeach()
    string(APPEND lib_cold "} end ")
  endif()
  set(${out} "${text}" PARENT_SCOPE)
  set(${out}_lib_top "local ${lib_names} ${lib_functions}${lib_cold}" PARENT_SCOPE)
  set(${out}_lib_call "KEYS, ARGV = keys, args ${lib_values}${lib_cold_reset}" PARENT_SCOPE)
endfunction()

# The script as a Redis function library (FUNCTION LOAD, FCALL; docs/design.md
# §3): the header's functions are made once, when the library loads, and
# its values (key names, tables, constants) are assigned on every call, so
# nothing a call leaves behind is seen by the next. Every name is declared
# first, so each function captures the one variable its call assigns.
#
#   #!lua name=@FN@
#   local KEYS, ARGV, <values> <functions> redis.register_function('@FN@',
#   function(keys, args) KEYS, ARGV = keys, args <values assigned> <cold> <line 2 ...
#   ... the file's lines from its second on ...
#   end)
#
# all of which but the first line and the file's own lines sits on line 2,
# so line N of the library is line N of the file (a server error names
# `user_function:N`) for every N > 1; the file's first line is its
# `-- layout:` comment. @FN@ is replaced by the name the C++ side chooses
# (src/detail/script_functions.cpp).
function(library_form top call body out)
  string(FIND "${body}" "\n" nl)
  math(EXPR nl "${nl} + 1")
  string(SUBSTRING "${body}" ${nl} -1 rest)
  set(open "redis.register_function('@FN@', function(keys, args) ")
  # The `;` ends the last statement of the call part: a file whose line 2
  # opened with `(` would otherwise continue it as a function call.
  set(${out} "#!lua name=@FN@\n${top}${open}${call}; ${rest}\nend)" PARENT_SCOPE)
endfunction()

split_definitions("${LUA_DIR}/prelude.lua" prelude)

file(GLOB_RECURSE files RELATIVE "${LUA_DIR}" "${LUA_DIR}/*.lua")
list(SORT files)

set(hpp "// Generated by cmake/embed_lua.cmake from src/lua/**: do not edit.
#pragma once

#include <thoonk/script.hpp>

#include <span>
#include <string_view>

namespace thoonk::detail::scripts {

/// One embedded script: its file under src/lua, its layout, the file's text
/// (what line numbers refer to), the script the server runs with EVALSHA,
/// and the same script as a function library, its name written @FN@
/// (src/detail/script_functions.hpp).
struct embedded_script {
  std::string_view file;
  std::string_view layout;
  std::string_view file_text;
  const script& (*get)();
  std::string_view library;
};

/// Every embedded script, in file order.
std::span<const embedded_script> all_scripts();

")
set(cpp "// Generated by cmake/embed_lua.cmake from src/lua/**: do not edit.
#include \"thoonk_lua_scripts.hpp\"

#include <string>

namespace thoonk::detail::scripts {

namespace {
")
set(table "")
set(accessors "")

foreach(rel IN LISTS files)
  if(rel STREQUAL "prelude.lua" OR rel MATCHES "^layouts/")
    continue()
  endif()
  file(READ "${LUA_DIR}/${rel}" body)
  if(NOT body MATCHES "^-- layout: ([a-z_]+)")
    message(FATAL_ERROR "src/lua/${rel}: the first line must be `-- layout: <kind> ...`")
  endif()
  set(layout "${CMAKE_MATCH_1}")
  if(NOT EXISTS "${LUA_DIR}/layouts/${layout}.lua")
    message(FATAL_ERROR "src/lua/${rel}: no layout src/lua/layouts/${layout}.lua")
  endif()
  # This script's definitions: its layout's, then the prelude's, then the
  # layout's engine (layouts/<kind>_engine.lua: functions that use the
  # prelude's), if it has one.
  split_definitions("${LUA_DIR}/layouts/${layout}.lua" layout_def)
  set(engine_def_count 0)
  if(EXISTS "${LUA_DIR}/layouts/${layout}_engine.lua")
    split_definitions("${LUA_DIR}/layouts/${layout}_engine.lua" engine_def)
  endif()
  set(def_count 0)
  foreach(part layout_def prelude engine_def)
    if(${part}_count EQUAL 0)
      continue()
    endif()
    math(EXPR last "${${part}_count} - 1")
    foreach(j RANGE ${last})
      set(def_${def_count}_code "${${part}_${j}_code}")
      set(def_${def_count}_names "${${part}_${j}_names}")
      math(EXPR def_count "${def_count} + 1")
    endforeach()
  endforeach()
  # Every script first checks that the user may run each command it can
  # run (prelude.lua check_commands): Redis keeps the writes a script made
  # before a command the user may not run. The list is every literal
  # `redis.call('X'` / `redis.pcall('X'` of the script and of the header
  # code it embeds but PUBLISH.
  needed_headers("${body} check_commands" header)
  string(REGEX MATCHALL "redis\\.p?call\\('[A-Za-z]+'" calls "${header} ${body}")
  set(commands "")
  foreach(c IN LISTS calls)
    string(REGEX REPLACE "^.*\\('([A-Za-z]+)'$" "\\1" c "${c}")
    string(TOLOWER "${c}" c)
    # PUBLISH is checked with its channels before the first write
    # (check_publish, check_classic_publish); without a channel Redis
    # refuses it for any user whose channels are restricted.
    if(NOT c MATCHES "^s?publish$")
      list(APPEND commands "'${c}'")
    endif()
  endforeach()
  list(REMOVE_DUPLICATES commands)
  list(SORT commands)
  string(REPLACE ";" ", " commands "${commands}")
  set(check "do local refused = check_commands(${commands}) if refused then return refused end end")
  refuse_if_contains("${body}" ")${delim}\""
                     "src/lua/${rel} contains the raw string delimiter )${delim}\"")
  string(REGEX REPLACE "\\.lua$" "" name "${rel}")
  string(MAKE_C_IDENTIFIER "${name}" ident)
  string(APPEND cpp "constexpr char file_${ident}[] = R\"${delim}(${body})${delim}\";\n")
  string(APPEND cpp "constexpr char source_${ident}[] = R\"${delim}(${header} ${check} ${body})${delim}\";\n")
  library_form("${header_lib_top}" "${header_lib_call}; ${check}" "${body}" library)
  string(APPEND cpp "constexpr char library_${ident}[] = R\"${delim}(${library})${delim}\";\n")
  string(APPEND hpp "/// src/lua/${rel}\nconst script& ${ident}();\n")
  string(APPEND accessors "const script& ${ident}() {
  static const script s{std::string(source_${ident}, sizeof source_${ident} - 1)};
  return s;
}
")
  string(APPEND table "    {\"${rel}\", \"${layout}\", {file_${ident}, sizeof file_${ident} - 1}, &${ident}, {library_${ident}, sizeof library_${ident} - 1}},\n")
endforeach()

string(APPEND hpp "
}  // namespace thoonk::detail::scripts
")
string(APPEND cpp "}  // namespace

${accessors}
std::span<const embedded_script> all_scripts() {
  static constexpr embedded_script list[] = {
${table}  };
  return list;
}

}  // namespace thoonk::detail::scripts
")

file(MAKE_DIRECTORY "${OUT_DIR}")
if(MODE STREQUAL "header")
  # Rewritten only when the list of scripts changes: editing a script
  # recompiles the generated .cpp, not the sources that include the header.
  set(path "${OUT_DIR}/thoonk_lua_scripts.hpp")
  set(old "")
  if(EXISTS "${path}")
    file(READ "${path}" old)
  endif()
  if(NOT old STREQUAL "${hpp}")
    file(WRITE "${path}" "${hpp}")
  endif()
else()
  file(WRITE "${OUT_DIR}/thoonk_lua_scripts.cpp" "${cpp}")
endif()
