#!/usr/bin/env bash
# Where the time goes on this library's side of the peer comparison: one
# scenario at a time against a fresh redis-server, with the server's
# commands per job (INFO commandstats), the server's and the client's CPU
# per job, and perf profiles of both processes.
#
#   bash benchmarks/peers/profile.sh [--jobs N] [--out DIR]
#
# Needs run.sh's build (build-peers/benchmarks/peer_scenarios, or
# $THOONK_PEERS_BUILD) and, for the Node.js systems, benchmarks/peers/
# node_modules (run.sh installs it). perf is optional: without it only the
# counters are printed. Writes DIR/*.txt (default /tmp/thoonk-peers-profile).
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=scripts/common.sh
source "$here/../../scripts/common.sh"
cd "$THOONK_ROOT"

jobs=50000
out=/tmp/thoonk-peers-profile
while [ $# -gt 0 ]; do
  case "$1" in
    --jobs) jobs="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) thoonk_die "unknown argument: $1 (see --help)" ;;
  esac
done
cxx="${THOONK_PEERS_BUILD:-build-peers}/benchmarks/peer_scenarios"
[ -x "$cxx" ] || thoonk_die "$cxx is missing: run bash benchmarks/peers/run.sh --quick first"
mkdir -p "$out"
have_perf=0
if command -v perf >/dev/null 2>&1 && perf stat -e task-clock true >/dev/null 2>&1; then have_perf=1; fi

unset THOONK_REDIS_URL
start_redis
url="$THOONK_REDIS_URL"
port="${url##*:}"
cli() { redis-cli -h 127.0.0.1 -p "$port" "$@"; }

# The server's commands during one scenario, per job: calls and the
# server's time inside them (commandstats), and its CPU (INFO cpu).
server_cpu() { cli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {printf "%.3f", s}'; }
report_commands() {  # label jobs cpu0
  local label="$1" n="$2" cpu0="$3" cpu1
  cpu1="$(server_cpu)"
  {
    echo "== $label: $n jobs"
    echo "server CPU per job: $(awk -v a="$cpu0" -v b="$cpu1" -v n="$n" 'BEGIN {printf "%.2f us", (b - a) * 1e6 / n}')"
    cli info commandstats | tr -d '\r' | awk -F'[:,=]' -v n="$n" '/^cmdstat_/ {
        printf "  %-28s %8.3f calls/job %9.2f us/call\n", substr($1, 9), $3 / n, $7 }'
  } | tee -a "$out/commands.txt"
}

# c1 and c64 backlogs and end to end, per system: what each asks of the server.
: >"$out/commands.txt"
for sys in thoonk bullmq beequeue; do
  if [ "$sys" = thoonk ]; then cmd=("$cxx"); else cmd=(node "$here/driver.js" "$sys"); fi
  for conc in 1 64; do
    n=$((conc == 1 ? jobs / 10 : jobs))
    cli flushall >/dev/null
    "${cmd[@]}" enqueue --mode bulk --jobs "$n" --url "$url" >/dev/null
    cli config resetstat >/dev/null
    cpu0="$(server_cpu)"
    "${cmd[@]}" work --jobs "$n" --concurrency "$conc" --url "$url" | tail -n 1 >"$out/work-$sys-c$conc.json"
    report_commands "$sys backlog at concurrency $conc" "$n" "$cpu0"
  done
done

# The feed publish script against a plain PUBLISH: server time per message.
for sys in thoonk_feed pubsub; do
  if [ "$sys" = thoonk_feed ]; then cmd=("$cxx"); else cmd=(node "$here/driver.js" pubsub); fi
  cli flushall >/dev/null
  "${cmd[@]}" subscribe --subscribers 1 --messages 20000 --url "$url" >"$out/sub-$sys.json" &
  sub=$!
  sleep 1
  cli config resetstat >/dev/null
  cpu0="$(server_cpu)"
  "${cmd[@]}" publish --messages 20000 --rate 5000 --url "$url" >"$out/pub-$sys.json"
  wait "$sub" || true
  report_commands "$sys publish at 5,000/s, 1 subscriber" 20000 "$cpu0"
done

[ "$have_perf" = 1 ] || { thoonk_log "perf not usable: counters only ($out/commands.txt)"; exit 0; }

# perf: the worker (client) and the server during the end to end run at 64.
cli flushall >/dev/null
"$cxx" work --jobs "$jobs" --concurrency 64 --url "$url" >"$out/e2e-work.json" &
worker=$!
sleep 0.5
perf record -q -g -o "$out/server.perf" -p "$THOONK_REDIS_PID" -- sleep 4 >/dev/null 2>&1 &
perf_server=$!
perf record -q -g -o "$out/worker.perf" -p "$worker" -- sleep 4 >/dev/null 2>&1 &
perf_worker=$!
"$cxx" produce --jobs "$jobs" --url "$url" >"$out/e2e-produce.json"
wait "$worker" || true
wait "$perf_server" "$perf_worker" || true
perf report -i "$out/server.perf" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -40 >"$out/server-top.txt" || true
perf report -i "$out/worker.perf" --no-children --sort dso,symbol --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -40 >"$out/worker-top.txt" || true
perf report -i "$out/server.perf" --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -15 >"$out/server-dso.txt" || true
perf report -i "$out/worker.perf" --no-children --sort dso --stdio 2>/dev/null | grep -v '^#' | grep '%' | head -15 >"$out/worker-dso.txt" || true
thoonk_log "wrote $out (commands.txt, *-top.txt, *-dso.txt, *.perf)"
