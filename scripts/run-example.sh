#!/usr/bin/env bash
# Quick start 1: install dependencies, build the library and the example
# program only (Release; no tests, no benchmarks) and run it against a
# throwaway redis-server (or $THOONK_REDIS_URL).
# Arguments are passed to the example. THOONK_JOBS overrides the build's -j.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$THOONK_ROOT"

ensure_deps
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release \
  -DTHOONK_BUILD_TESTS=OFF -DTHOONK_BUILD_BENCHMARKS=OFF -DTHOONK_BUILD_EXAMPLES=ON
cmake --build build -j"${THOONK_JOBS:-$(nproc)}" --target example

example=build/examples/example
[ -x "$example" ] || thoonk_die "$example was not built: is there an examples/example.cpp?"

start_redis
# Not exec: the EXIT trap must stop redis-server after the example ends.
status=0
"$example" "$@" || status=$?
exit "$status"
