#!/usr/bin/env bash
# Quick start 2: install dependencies, build with sanitizers (Debug) and run
# the unit and integration tests with ctest. Arguments are passed to ctest
# (e.g. -R unit). THOONK_JOBS overrides the build's -j.
#
# A run without arguments also builds and runs the multi-threaded tests
# under ThreadSanitizer (build-tsan, target tsan_tests) and the library's
# unit tests built with clang (build-clang), both built in the background
# while ctest runs and run after it; THOONK_SECOND_BUILDS=0 skips that step.
# With them, the Debian packages are built (and linted) in the background
# and, after ctest, installed, used by test/consumer and removed
# (scripts/test-packages.sh, docs/packaging.md); THOONK_PACKAGES=0 skips that.
#
# No redis-server is started here: the integration test binary starts its own
# through the harness (test/support/redis_server.hpp), or uses
# $THOONK_REDIS_URL when set. This script only makes sure one is installed.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$THOONK_ROOT"

ensure_deps
command -v redis-server >/dev/null 2>&1 || thoonk_die "redis-server not found on PATH"

# Unity batches of 8 files, for the tests (16 minutes instead of 27 on 2
# cores) and the library; the benchmarks are not built here (Release builds
# of them are what scripts/bench-compare.sh and benchmarks/peers/run.sh
# run); the fuzz entry runs each target 10 s; a new build directory uses
# Ninja (docs/testing.md, "Build time").
generator=$(thoonk_generator_arg build-tests)
cmake -S . -B build-tests ${generator:+"$generator"} -DCMAKE_BUILD_TYPE=Debug -DTHOONK_SANITIZE=ON -DTHOONK_TEST_UNITY_BATCH=8 \
  -DTHOONK_LIB_UNITY_BATCH=8 -DTHOONK_BUILD_BENCHMARKS=OFF -DTHOONK_FUZZ_SECONDS=10 -DTHOONK_WERROR=ON
cmake --build build-tests -j"${THOONK_JOBS:-$(nproc)}"

# Leaks are failures; UB stops the test at the first report, with a stack.
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# A run without arguments builds the ThreadSanitizer tests and clang's
# unit tests meanwhile, in the background at idle priority: the entries
# below wait on servers and timers much of the time (docs/testing.md,
# "Second builds").
second=0
if [ "$#" -eq 0 ] && [ "${THOONK_SECOND_BUILDS:-1}" != "0" ]; then
  second=1
  start_second_builds
  trap stop_second_builds EXIT
  # The Debian packages too (docs/packaging.md); THOONK_PACKAGES=0 skips them.
  if [ "${THOONK_PACKAGES:-1}" != "0" ]; then
    start_package_build
    trap 'stop_second_builds; stop_package_build' EXIT
  fi
fi
# Two entries at a time (THOONK_CTEST_JOBS): each integration file is an
# entry with its own redis-server; the entries that need the whole machine
# (the clusters, the fault suite) are RUN_SERIAL (test/CMakeLists.txt).
ctest --test-dir build-tests --output-on-failure -j"${THOONK_CTEST_JOBS:-2}" "$@"

if [ "$second" = 1 ]; then
  finish_second_builds
  if [ -n "$THOONK_PACKAGE_BUILD_PID" ]; then
    finish_package_build
  fi
fi
