#!/usr/bin/env bash
# Runs one example program (examples/) against a throwaway redis-server on
# a free loopback port (start_redis, scripts/common.sh) and checks what it
# does. The ctest entries example.<name> call it.
#
#   scripts/test-example.sh NAME BINDIR
#
# Every program this script starts in the background is stopped by its own
# pid, and each wait is bounded.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

[ "$#" -eq 2 ] || thoonk_die "usage: test-example.sh NAME BINDIR"
name=$1
bindir=$2
[ -x "$bindir/$name" ] || thoonk_die "$bindir/$name is not built"

work=$(mktemp -d "${TMPDIR:-/tmp}/thoonk-example-XXXXXX")
bg_pid=""
cleanup() {
  if [ -n "$bg_pid" ]; then
    kill -KILL "$bg_pid" 2>/dev/null || true
    wait "$bg_pid" 2>/dev/null || true
  fi
  rm -rf -- "$work"
  _thoonk_stop_redis
}
unset THOONK_REDIS_URL
start_redis
trap cleanup EXIT

fail() {
  printf 'FAIL: %s\n' "$*" >&2
  for f in "$work"/*.log; do
    [ -f "$f" ] && { printf -- '--- %s\n' "$f" >&2; cat "$f" >&2; }
  done
  exit 1
}

# Waits up to $3 seconds for the pattern $2 in the file $1.
wait_for() {
  for _ in $(seq $(($3 * 10))); do
    grep -q -- "$2" "$1" 2>/dev/null && return 0
    sleep 0.1
  done
  fail "no \"$2\" in $1 within $3 s"
}

# Sends SIGTERM to the background program and expects it to exit with 0
# within 20 s.
stop_bg() {
  kill -TERM "$bg_pid"
  local status=0
  for _ in $(seq 200); do
    kill -0 "$bg_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -0 "$bg_pid" 2>/dev/null && fail "$name did not exit within 20 s of SIGTERM"
  wait "$bg_pid" || status=$?
  bg_pid=""
  [ "$status" -eq 0 ] || fail "$name exited with $status after SIGTERM"
}

case "$name" in
example)
  "$bindir/example" >"$work/example.log" 2>&1 || fail "example failed"
  grep -q 'feed demo: deleted' "$work/example.log" || fail "the feed demo did not finish"
  grep -q 'maintenance: ran' "$work/example.log" || fail "the job demo did not finish"
  ;;
producer)
  "$bindir/producer" ex.jobs 3 >"$work/producer.log" 2>&1 || fail "producer failed"
  [ "$(grep -c '^producer: put job-' "$work/producer.log")" -eq 3 ] || fail "producer did not put 3 jobs"
  grep -q '^producer: 3 jobs waiting in ex.jobs' "$work/producer.log" || fail "3 jobs should wait"
  # A bad count is refused before any I/O.
  if "$bindir/producer" ex.jobs 0 >"$work/bad.log" 2>&1; then fail "producer accepted a count of 0"; fi
  grep -q 'count must be a positive number' "$work/bad.log" || fail "no message for a bad count"
  ;;
worker)
  "$bindir/producer" ex.work 5 >"$work/producer.log" 2>&1 || fail "producer failed"
  "$bindir/worker" ex.work 2 >"$work/worker.log" 2>&1 &
  bg_pid=$!
  wait_for "$work/worker.log" 'running on ex.work' 20
  # All five are finished before the stop: wait for the fifth.
  for _ in $(seq 200); do
    [ "$(grep -c '^worker: finished' "$work/worker.log")" -ge 5 ] && break
    sleep 0.1
  done
  [ "$(grep -c '^worker: finished' "$work/worker.log")" -eq 5 ] || fail "the worker did not finish 5 jobs"
  stop_bg
  grep -q '^worker: signal 15, stopping' "$work/worker.log" || fail "SIGTERM was not seen"
  grep -q 'stopped gracefully as .*: 5 finished, 0 failed' "$work/worker.log" || fail "no graceful stop report"
  ;;
feed_publisher)
  "$bindir/feed_publisher" ex.news one two three >"$work/publisher.log" 2>&1 || fail "feed_publisher failed"
  [ "$(grep -c '^publisher: published' "$work/publisher.log")" -eq 3 ] || fail "3 items should be published"
  grep -q '^publisher: ex.news holds 3 items' "$work/publisher.log" || fail "the feed should hold 3 items"
  ;;
feed_subscriber)
  cursor="$work/cursor"
  # First run: from now; gets the two items published while it runs.
  "$bindir/feed_subscriber" ex.feed "$cursor" 2 >"$work/sub1.log" 2>&1 &
  bg_pid=$!
  wait_for "$work/sub1.log" 'subscribed to ex.feed (from now)' 20
  "$bindir/feed_publisher" ex.feed live-1 live-2 >"$work/pub1.log" 2>&1 || fail "feed_publisher failed"
  wait "$bg_pid" || fail "the first subscriber run failed"
  bg_pid=""
  grep -q '"live-2" (live)' "$work/sub1.log" || fail "the first run did not get live-2 live"
  [ -s "$cursor" ] || fail "no cursor saved"
  # Published while no subscriber runs...
  "$bindir/feed_publisher" ex.feed away-1 away-2 away-3 >"$work/pub2.log" 2>&1 || fail "feed_publisher failed"
  # ...and replayed, in order, by the second run, which resumes from the cursor.
  timeout 30 "$bindir/feed_subscriber" ex.feed "$cursor" 3 >"$work/sub2.log" 2>&1 || fail "the second subscriber run failed"
  grep -q 'resuming from cursor' "$work/sub2.log" || fail "the second run did not resume"
  [ "$(grep -o '"away-[123]" (replayed)' "$work/sub2.log" | tr '\n' ' ')" = '"away-1" (replayed) "away-2" (replayed) "away-3" (replayed) ' ] ||
    fail "the second run should replay away-1..3 in order"
  grep -q 'live-' "$work/sub2.log" && fail "the second run replayed items it had seen"
  grep -q 'caught up 3 items' "$work/sub2.log" || fail "no catch-up report"
  ;;
http_server)
  "$bindir/http_server" 0 ex.http >"$work/http.log" 2>&1 &
  bg_pid=$!
  wait_for "$work/http.log" 'listening on 127.0.0.1:' 20
  port=$(sed -n 's/.*listening on 127.0.0.1:\([0-9]*\).*/\1/p' "$work/http.log")
  url="http://127.0.0.1:$port"
  [ "$(curl -sS --max-time 10 "$url/health")" = ok ] || fail "GET /health"
  body=$(curl -sS --max-time 10 -w ' %{http_code}' -X POST --data 'resize cat.jpg' "$url/jobs")
  [[ "$body" =~ ^\{\"id\":\"[^\"]+\"\}\ 201$ ]] || fail "POST /jobs answered: $body"
  body=$(curl -sS --max-time 10 "$url/counts")
  [[ "$body" == *'"waiting":1'* ]] || fail "GET /counts answered: $body"
  [ "$(curl -sS --max-time 10 -o /dev/null -w '%{http_code}' "$url/nowhere")" = 404 ] || fail "an unknown path should be 404"
  stop_bg
  ;;
*)
  thoonk_die "no scenario for example '$name'"
  ;;
esac
printf 'example %s: ok\n' "$name"
