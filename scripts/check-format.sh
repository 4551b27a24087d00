#!/usr/bin/env bash
# Fails, naming each file, when a C++ source of the repository differs from
# what clang-format makes of it with the root .clang-format. Run by ctest
# (test "format") so the style stays applied to every source;
# `scripts/check-format.sh --fix` rewrites the files instead.
#
# The files are git's tracked and untracked (not ignored) *.cpp, *.hpp and
# *.h, so a new file is checked before its first commit (without git: the
# source folders). clang-format 14 is
# the version Debian 12 installs (scripts/common.sh); another major version
# formats some constructs differently, so it is refused with a message
# rather than reported as a style difference.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
command -v clang-format >/dev/null 2>&1 ||
  { echo "clang-format not found: run scripts/run-tests.sh (it installs it) or apt-get install clang-format" >&2; exit 1; }
version="$(clang-format --version | sed -n 's/.*version \([0-9]*\)\..*/\1/p')"
if [ "$version" != 14 ]; then
  echo "clang-format $version found; the style is checked with version 14 (Debian 12's)" >&2
  exit 1
fi
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  mapfile -t files < <(git ls-files --cached --others --exclude-standard -- '*.cpp' '*.hpp' '*.h' |
    while read -r f; do [ -f "$f" ] && printf '%s\n' "$f"; done)
else
  # A copy without git (an unpacked archive): the source folders.
  mapfile -t files < <(find include src test benchmarks examples -type f \
    \( -name '*.cpp' -o -name '*.hpp' -o -name '*.h' \) | sort)
fi
if [ "${1:-}" = --fix ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ "${#bad[@]}" -gt 0 ]; then
  printf 'not formatted with .clang-format (scripts/check-format.sh --fix):\n' >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format: ${#files[@]} files match .clang-format"
