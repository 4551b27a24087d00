#!/usr/bin/env bash
# Builds the libFuzzer targets (fuzz/, with clang) and runs each for the
# given number of seconds (default 20), starting from the seed corpus in
# fuzz/corpus/<target>. New inputs go to build-fuzz/corpus/<target>; a
# finding stops the run, is saved as build-fuzz/artifacts/<target>-crash-*
# and fails the script: replay it with
#   build-fuzz/<target>_fuzz build-fuzz/artifacts/<target>-crash-...
# and turn it into a unit test (docs/testing.md, "Fuzzing").
#
#   scripts/fuzz.sh [seconds] [target...]     targets: resp3_parser request_queue config_url
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$THOONK_ROOT"

seconds="${1:-20}"
shift || true
case "$seconds" in
  '' | *[!0-9]*) thoonk_die "usage: scripts/fuzz.sh [seconds] [target...] (seconds: a whole number)" ;;
esac
targets=("$@")
if [ "${#targets[@]}" -eq 0 ]; then
  targets=(resp3_parser request_queue config_url)
fi

command -v clang++ >/dev/null 2>&1 ||
  thoonk_die "clang++ not found: the fuzz targets need clang with libFuzzer (scripts/run-tests.sh installs clang and libclang-rt-14-dev through ensure_deps)"

build="${THOONK_FUZZ_BUILD:-build-fuzz}"
launcher=()
if command -v ccache >/dev/null 2>&1; then
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake -S fuzz -B "$build" -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"${THOONK_JOBS:-$(nproc)}" --target "${targets[@]/%/_fuzz}"

mkdir -p "$build/artifacts"
status=0
for t in "${targets[@]}"; do
  [ -d "fuzz/corpus/$t" ] || thoonk_die "unknown fuzz target '$t' (no fuzz/corpus/$t)"
  mkdir -p "$build/corpus/$t"
  thoonk_log "fuzzing $t for ${seconds}s"
  # The first directory receives new inputs; the seeds are only read.
  if ! ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=1" \
    "$build/${t}_fuzz" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
    -print_final_stats=1 -artifact_prefix="$build/artifacts/$t-" \
    "$build/corpus/$t" "fuzz/corpus/$t" 2>"$build/$t.log"; then
    tail -n 40 "$build/$t.log" >&2
    thoonk_log "FINDING in $t: see $build/artifacts/ and make it a unit test"
    status=1
  else
    grep -E '^stat::number_of_executed_units|^stat::peak_rss_mb' "$build/$t.log" | sed "s/^/  $t /" >&2 || true
  fi
done
exit "$status"
