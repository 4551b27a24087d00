#!/usr/bin/env bash
# Fails, listing each place, when a test awaits inside a Catch2 assertion:
#
#   CHECK(co_await f());            // g++ 12 may run f() twice
#   auto got = co_await f();        // what the tests do instead
#   CHECK(got);
#
# Catch2 2.13's CHECK/REQUIRE (and their _FALSE, _THAT, _THROWS... forms)
# expand their argument in more than one place; with a co_await in it,
# g++ 12 has been seen to evaluate the awaited operation twice (a second
# claim, a second process stop). The check reads the sources as text:
# string and character literals and // comments are blanked first, then
# each assertion's parentheses are followed across lines. A co_await in a
# lambda body written inside an assertion (braces) is the lambda's own and
# is not reported.
#
#   scripts/check-test-awaits.sh [DIR...]    (default: test/)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
dirs=("$@")
[ "${#dirs[@]}" -eq 0 ] && dirs=(test)

mapfile -t files < <(find "${dirs[@]}" -type f \( -name '*.cpp' -o -name '*.hpp' \) | sort)
[ "${#files[@]}" -gt 0 ] || { echo "check-test-awaits: no sources under ${dirs[*]}" >&2; exit 2; }

awk '
FNR == 1 { depth = 0; braces = 0 }
{
  line = $0
  gsub(/\\\\/, "", line)                       # escaped backslashes
  gsub(/"([^"\\]|\\.)*"/, "\"\"", line)        # string literals
  gsub(/'\''([^'\''\\]|\\.)+'\''/, "0", line)  # character literals
  sub(/\/\/.*/, "", line)                      # line comments
  rest = line
  while (rest != "") {
    if (depth == 0) {
      if (!match(rest, /(^|[^A-Za-z0-9_])(CHECK|REQUIRE)[A-Z_]*[ \t]*\(/)) break
      start = FILENAME ":" FNR
      rest = substr(rest, RSTART + RLENGTH)
      depth = 1
      braces = 0
      continue
    }
    c = substr(rest, 1, 1)
    if (c == "(") depth++
    else if (c == ")") depth--
    else if (c == "{") braces++
    else if (c == "}") braces--
    else if (braces == 0 && substr(rest, 1, 8) == "co_await") {
      print start ": co_await inside an assertion: await into a local first"
      bad++
      depth = 0
    }
    rest = substr(rest, 2)
  }
}
END {
  if (bad) { printf "%d assertion(s) with co_await inside\n", bad; exit 1 }
}' "${files[@]}"
