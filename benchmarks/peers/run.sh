#!/usr/bin/env bash
# Benchmarks this library against BullMQ and bee-queue (and the server's
# redis-benchmark ceilings) in one run, against one redis-server. Each round
# also measures the machine floor (scenario hop_floor_1k): one PUBLISH hop
# between two processes at 1,000 messages/s through hop_floor.cpp (plain
# sockets, blocking read, no library), next to the put -> handler latency.
#
#   bash benchmarks/peers/run.sh [--quick|--full] [--rounds N] [--no-report]
#
#   --quick      small counts, 1 round, under 3 minutes once built: for
#                development; writes only benchmarks/peers/results/
#   --full       the report's profile (3 rounds, 100,000-job phases); also
#                rewrites the peers section of docs/benchmarks.md, the
#                charts docs/bench-peers-*.svg and
#                benchmarks/peers/results/report.json
#   --rounds N   override the profile's number of rounds
#   --no-report  with --full: leave the docs and report.json alone
#   --no-runner  leave out the rows through the job runner even when the
#                library has one (the report says so)
#
# Steps: installs the Node.js packages from package-lock.json (npm ci,
# when node_modules is missing or older than the lock file); builds
# peer_scenarios (this library's side) Release, without sanitizers, in
# $THOONK_PEERS_BUILD (default build-peers), and hop_floor there with one
# compiler call (${CXX:-c++} -O2, a second or two); starts its own
# redis-server on a free 127.0.0.1 port without persistence (stopped by its
# pid on exit, also on failure or ^C; THOONK_REDIS_URL is ignored: the
# report needs a server nothing else uses); runs bench.js, then report.js
# for --full.
# Needs node (18 or later), npm, cmake, g++, redis-server, redis-benchmark.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/common.sh
source "$here/../../scripts/common.sh"
cd "$THOONK_ROOT"

profile=quick
rounds=
report=1
use_runner=1
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) profile=quick; shift ;;
    --full) profile=full; shift ;;
    --rounds) rounds="$2"; shift 2 ;;
    --no-report) report=0; shift ;;
    --no-runner) use_runner=0; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) thoonk_die "unknown argument: $1 (see --help)" ;;
  esac
done
command_line="bash benchmarks/peers/run.sh --$profile${rounds:+ --rounds $rounds}"
if [ "$use_runner" = 0 ]; then command_line="$command_line --no-runner"; fi

for tool in node npm cmake redis-server redis-benchmark; do
  command -v "$tool" >/dev/null 2>&1 || thoonk_die "$tool not found on PATH"
done
node -e 'process.exit(Number(process.versions.node.split(".")[0]) >= 18 ? 0 : 1)' ||
  thoonk_die "node 18 or later is needed (found $(node --version))"

# Node.js packages, exactly as locked.
if [ ! -d "$here/node_modules" ] || [ "$here/package-lock.json" -nt "$here/node_modules" ]; then
  thoonk_log "npm ci in benchmarks/peers"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error)
  touch "$here/node_modules"
fi

# This library's side: Release, no sanitizers, its own build directory.
build="${THOONK_PEERS_BUILD:-build-peers}"
thoonk_log "building peer_scenarios (Release) in $build"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DTHOONK_SANITIZE=OFF -DTHOONK_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"${THOONK_JOBS:-2}" --target peer_scenarios >/dev/null
cxx="$build/benchmarks/peer_scenarios"
[ -x "$cxx" ] || thoonk_die "$cxx was not built"

# The machine floor: one small standalone program, no CMake, no library.
hop_floor="$build/hop_floor"
compiler="${CXX:-c++}"
command -v "$compiler" >/dev/null 2>&1 || thoonk_die "$compiler not found (set CXX)"
thoonk_log "building hop_floor in $build"
"$compiler" -O2 -std=c++17 -Wall -Wextra -o "$hop_floor" "$here/hop_floor.cpp" ||
  thoonk_die "hop_floor did not build"

# The runner rows exist when the library has job_queue::run.
runner=()
if "$cxx" has-runner >/dev/null 2>&1; then
  if [ "$use_runner" = 1 ]; then runner=(--runner); else runner=(--runner-skipped); fi
fi

unset THOONK_REDIS_URL
start_redis
mkdir -p "$here/results"
out="$here/results/peers-$profile-$(date -u +%Y%m%dT%H%M%SZ).json"
rounds_arg=()
if [ -n "$rounds" ]; then rounds_arg=(--rounds "$rounds"); fi
node "$here/bench.js" --url "$THOONK_REDIS_URL" --cxx "$cxx" --hop-floor "$hop_floor" --profile "$profile" \
  "${rounds_arg[@]}" "${runner[@]}" --out "$out" --command "$command_line"
thoonk_log "results: $out"

if [ "$profile" = full ] && [ "$report" = 1 ]; then
  cp "$out" "$here/results/report.json"
  node "$here/report.js" "$here/results/report.json"
  thoonk_log "report: docs/benchmarks.md (peers section), docs/bench-peers-*.svg"
fi
