#!/usr/bin/env bash
# Client instructions per request, from callgrind: a noiseless figure to
# compare changes with. Runs the SET workload at 256 coroutines twice, with
# N1 and N2 requests, and divides the difference in instructions by N2-N1
# so that start-up and connection setup cancel out.
#
#   scripts/callgrind-core.sh [build-dir]      (default: build, a Release tree)
#
# Needs valgrind; uses THOONK_REDIS_URL or starts its own redis-server.
set -euo pipefail
build=${1:-build}
bench="$build/benchmarks/core_bench"
[ -x "$bench" ] || { echo "missing $bench: build first (scripts/run-example.sh builds it)" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "valgrind is not installed (apt-get install valgrind)" >&2; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
count() {  # $1 = op, $2 = requests -> total instructions (Ir)
  valgrind --tool=callgrind --callgrind-out-file="$tmp/cg.out" \
    "$bench" --no-ceiling --op "$1" --coroutines 256 --requests "$2" >/dev/null 2>"$tmp/vg.err"
  grep -E '^summary:|^totals:' "$tmp/cg.out" | head -1 | awk '{print $2}'
}
for op in set evalsha; do
  n1=20000 n2=120000
  i1=$(count "$op" $n1)
  i2=$(count "$op" $n2)
  echo "{\"op\": \"$op\", \"coroutines\": 256, \"instructions_per_request\": $(( (i2 - i1) / (n2 - n1) ))}"
done
