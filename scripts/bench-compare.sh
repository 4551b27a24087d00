#!/usr/bin/env bash
# Compares the benchmarks of an old commit with the working tree.
#
#   scripts/bench-compare.sh [--old COMMIT] [--rounds N] [--only LIST] [--quick] [--json FILE]
#
#   --old      commit to compare against (default a5ce862)
#   --rounds   rounds of old/new runs (default 3); the order alternates
#              (old-new, new-old, ...) so a drifting machine hits both alike
#   --only     comma list of core, feed, job, worker: build and run only
#              those benchmarks (default core,feed,job)
#   --quick    feed_bench --quick (smaller counts): a smoke run, not figures
#   --json     also write every run's output and the medians to FILE
#
# Both sides are Release builds with -DTHOONK_BUILD_TESTS=OFF, targets
# core_bench feed_bench job_bench. The old commit is built in a git worktree
# under /tmp that is removed afterwards; its three binaries are kept in
# $THOONK_BENCH_CACHE (default /tmp/thoonk-bench-compare/<commit>) so a
# second comparison does not rebuild it. The working tree is built in
# $THOONK_BENCH_BUILD (default build-rel). Each round runs, per side:
#
#   core_bench --coroutines 1,256     SET and EVALSHA, with their ceilings
#   feed_bench                        publish throughput, ceiling, latency
#   job_bench --e2e 64 200000         jobs end to end, server CPU per job
#   peer_scenarios (worker)           a backlog of 20,000 jobs worked at
#                                     concurrency 1 by the raw claim/finish
#                                     loop and, where the build has it, by
#                                     the runner (job_queue::run)
#
# and the script prints a markdown table of the medians over the rounds of
# every headline figure both sides report, with new/old. Machine noise on a
# small VM is 10-20 %: read the medians, not one run.
#
# Builds and each benchmark run hold $THOONK_BENCH_LOCK (default
# /tmp/thoonk-build.lock, flock) so parallel compiles do not skew figures;
# set it empty to run without a lock. A full run (3 rounds, old binaries
# cached) takes about 8 minutes; building the old commit adds 3-5.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$THOONK_ROOT"

old=a5ce862
rounds=3
quick=0
json_out=
only=core,feed,job
while [ $# -gt 0 ]; do
  case "$1" in
    --old) old="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --quick) quick=1; shift ;;
    --json) json_out="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d'; exit 0 ;;
    *) thoonk_die "unknown argument: $1 (see --help)" ;;
  esac
done

command -v redis-server >/dev/null 2>&1 || thoonk_die "redis-server not found on PATH"
command -v python3 >/dev/null 2>&1 || thoonk_die "python3 is needed for the summary"
old_sha="$(git rev-parse --verify "$old^{commit}")" || thoonk_die "no such commit: $old"
jobs="${THOONK_JOBS:-2}"
lock="${THOONK_BENCH_LOCK-/tmp/thoonk-build.lock}"
cache="${THOONK_BENCH_CACHE:-/tmp/thoonk-bench-compare}/$old_sha"
new_build="${THOONK_BENCH_BUILD:-build-rel}"
benches=()
IFS=, read -r -a only_list <<<"$only"
for b in "${only_list[@]}"; do
  case "$b" in
    core|feed|job) benches+=("${b}_bench") ;;
    worker) benches+=(peer_scenarios) ;;
    *) thoonk_die "--only takes core, feed, job and worker, not: $b" ;;
  esac
done
has_bench() { [[ " ${benches[*]} " == *" $1_bench "* ]]; }
has_worker() { [[ " ${benches[*]} " == *" peer_scenarios "* ]]; }

# Runs "$@" holding the lock (if any).
locked() {
  if [ -n "$lock" ]; then flock "$lock" "$@"; else "$@"; fi
}

build_release() {  # source dir, build dir
  locked cmake -S "$1" -B "$2" -DCMAKE_BUILD_TYPE=Release -DTHOONK_BUILD_TESTS=OFF >/dev/null
  locked cmake --build "$2" -j"$jobs" --target "${benches[@]}" >/dev/null
}

work="$(mktemp -d /tmp/thoonk-bench-compare.XXXXXX)"
worktree=
cleanup() {
  if [ -n "$worktree" ] && [ -d "$worktree" ]; then
    git worktree remove --force "$worktree" >/dev/null 2>&1 || rm -rf "$worktree"
    git worktree prune >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# ---- old build (cached by commit) ----
missing_old=0
for b in "${benches[@]}"; do [ -x "$cache/$b" ] || missing_old=1; done
if [ "$missing_old" = 1 ]; then
  thoonk_log "building old commit ${old_sha:0:12} (Release) in a worktree"
  worktree="/tmp/thoonk-bench-wt-${old_sha:0:12}"
  rm -rf "$worktree"
  git worktree add --detach "$worktree" "$old_sha" >/dev/null
  build_release "$worktree" "$worktree/build-rel"
  mkdir -p "$cache"
  for b in "${benches[@]}"; do cp "$worktree/build-rel/benchmarks/$b" "$cache/$b"; done
  git worktree remove --force "$worktree"
  git worktree prune
  worktree=
else
  thoonk_log "old binaries from $cache"
fi

# ---- new build (the working tree) ----
thoonk_log "building the working tree (Release) in $new_build"
build_release . "$new_build"
new_bin="$new_build/benchmarks"
old_bin="$cache"

feed_args=()
[ "$quick" = 1 ] && feed_args=(--quick)

run_side() {  # side, round
  local side="$1" round="$2" bin
  if [ "$side" = old ]; then bin="$old_bin"; else bin="$new_bin"; fi
  thoonk_log "round $round: $side"
  if has_bench core; then
    locked "$bin/core_bench" --coroutines 1,256 >"$work/$side.$round.core.json"
  fi
  if has_bench feed; then
    locked "$bin/feed_bench" "${feed_args[@]}" >"$work/$side.$round.feed.json"
  fi
  if has_bench job; then
    locked "$bin/job_bench" --e2e 64 200000 >"$work/$side.$round.job.json"
  fi
  if has_worker; then
    locked bash -c "$(declare -f worker_c1); worker_c1 '$bin/peer_scenarios' '$side$round'" \
      >"$work/$side.$round.worker.json"
  fi
}

# A backlog of 20,000 jobs worked at concurrency 1 against a private
# redis-server: the raw claim/finish loop, and the runner when the binary
# has it (peer_scenarios has-runner). Prints one JSON object of jobs/s.
worker_c1() {  # binary, queue-name tag
  local bin="$1" tag="$2" n=20000 port dir pid out raw runner=
  port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
  dir="$(mktemp -d)"
  redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no --dir "$dir" \
    >"$dir/log" 2>&1 &
  pid=$!
  for _ in $(seq 50); do redis-cli -p "$port" ping >/dev/null 2>&1 && break; sleep 0.1; done
  rate() {  # extra work arguments...
    "$bin" enqueue --mode bulk --jobs $n --queue "c1-$tag-$#" --url "redis://127.0.0.1:$port" >/dev/null
    out="$("$bin" work --jobs $n --concurrency 1 --queue "c1-$tag-$#" \
      --url "redis://127.0.0.1:$port" "$@" | tail -n 1)"
    python3 -c 'import json, sys; w = json.loads(sys.argv[1]); print(int(sys.argv[2]) / ((w["t_last_ns"] - w["t_start_ns"]) / 1e9))' "$out" "$n"
  }
  raw="$(rate)"
  if "$bin" has-runner >/dev/null 2>&1; then runner="$(rate --runner)"; fi
  kill "$pid"; wait "$pid" 2>/dev/null || true
  rm -rf "$dir"
  if [ -n "$runner" ]; then
    printf '{"c1_raw_per_s": %s, "c1_runner_per_s": %s}\n' "$raw" "$runner"
  else
    printf '{"c1_raw_per_s": %s}\n' "$raw"
  fi
}

for ((r = 1; r <= rounds; r++)); do
  if (( r % 2 == 1 )); then run_side old "$r"; run_side new "$r"
  else run_side new "$r"; run_side old "$r"; fi
done

# ---- summary ----
python3 - "$work" "$rounds" "${old_sha:0:12}" "${json_out:-}" "$only" <<'EOF'
import json, re, statistics, sys

work, rounds, old_sha, json_out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
only = sys.argv[5].split(",")
# Leaves worth comparing; counts, durations and booleans are left out.
HEADLINE = re.compile(
    r"(rps|_per_s|per_s_mean|ratio|ratio_to_server|_us|_us_per_job|p50_ms|p99_ms)$")
# Keys that name an element of an array (so paths match across builds even
# if the order of the array changes).
IDS = ("op", "coroutines", "workers", "rate_target", "subscriber_clients")


def flatten(v, path, out):
    if isinstance(v, dict):
        for k, x in v.items():
            flatten(x, f"{path}.{k}" if path else k, out)
    elif isinstance(v, list):
        for i, x in enumerate(v):
            tag = str(i)
            if isinstance(x, dict) and any(k in x for k in IDS):
                tag = ",".join(f"{k}={x[k]}" for k in IDS if k in x)
            flatten(x, f"{path}[{tag}]", out)
    elif isinstance(v, (int, float)) and not isinstance(v, bool):
        out[path] = float(v)


runs = {}
for side in ("old", "new"):
    for bench in only:
        for r in range(1, rounds + 1):
            fn = f"{work}/{side}.{r}.{bench}.json"
            try:
                with open(fn) as f:
                    doc = json.load(f)
            except (OSError, ValueError) as e:
                print(f"warning: {fn}: {e}", file=sys.stderr)
                continue
            flat = {}
            flatten(doc, "", flat)
            for k, x in flat.items():
                runs.setdefault((bench, k), {}).setdefault(side, []).append(x)

rows = []
for (bench, key), sides in sorted(runs.items()):
    if not HEADLINE.search(key.split(".")[-1]) or "old" not in sides or "new" not in sides:
        continue
    o, n = statistics.median(sides["old"]), statistics.median(sides["new"])
    rows.append({"bench": bench, "figure": key, "old_median": o, "new_median": n,
                 "new_over_old": n / o if o else None,
                 "old_runs": sides["old"], "new_runs": sides["new"]})

def fmt(x):
    if x is None:
        return "-"
    return f"{x:,.0f}" if abs(x) >= 100 else f"{x:.3g}"

print(f"\nold = {old_sha}, new = working tree, {rounds} rounds, medians\n")
print("| benchmark | figure | old | new | new/old |")
print("|---|---|---|---|---|")
for row in rows:
    print(f"| {row['bench']} | {row['figure']} | {fmt(row['old_median'])} | "
          f"{fmt(row['new_median'])} | {fmt(row['new_over_old'])} |")
# The runner finishes a job and claims the next in one call where the raw
# loop needs two: its rate at concurrency 1 against the old build's raw loop.
runner = runs.get(("worker", "c1_runner_per_s"), {}).get("new")
old_raw = runs.get(("worker", "c1_raw_per_s"), {}).get("old")
if runner and old_raw:
    r, o = statistics.median(runner), statistics.median(old_raw)
    print(f"\nconcurrency 1: runner (new) {fmt(r)} jobs/s against raw claim/finish (old) "
          f"{fmt(o)} jobs/s: {r / o:.2f}x")
if json_out:
    with open(json_out, "w") as f:
        json.dump({"old": old_sha, "rounds": rounds, "rows": rows}, f, indent=1)
EOF
