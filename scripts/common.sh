# shellcheck shell=bash
# Shared helpers for the quick-start scripts. Source it; do not run it.
#
#   ensure_deps   install missing build/test dependencies (Debian 12, apt-get)
#   start_redis   start a throwaway redis-server unless THOONK_REDIS_URL is set
#   run_tsan_tests   build tsan_tests with ThreadSanitizer in build-tsan and run it
#   run_clang_units  build the library and unit_tests with clang in build-clang and run them
#   start_second_builds, finish_second_builds, stop_second_builds   both, their
#                    builds in the background at idle priority while other tests run
#
# The scripts cd to the repository root (THOONK_ROOT) before building.

THOONK_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export THOONK_ROOT

thoonk_log() { printf '==> %s\n' "$*" >&2; }
thoonk_die() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Everything needed to build the library, its tests, examples and benchmarks
# and to run the integration tests against a real server.
THOONK_DEPS=(
  cmake g++ make pkg-config
  libboost1.81-dev libboost-json1.81-dev libboost-system1.81-dev
  catch2 libssl-dev
  redis-server redis-tools
  # The TLS tests make their certificates with the openssl command; the
  # fuzz targets (scripts/fuzz.sh) need clang with libFuzzer.
  openssl clang libclang-rt-14-dev
  # The style check (scripts/check-format.sh, ctest "format").
  clang-format
  # The test builds use Ninja: it schedules the compiler calls of all
  # targets as one graph, where make waits for each target's library
  # first (docs/testing.md, "Build time").
  ninja-build
  # The admin dashboard's browser test (ctest admin_browser): headless
  # Chromium driven through chromedriver.
  chromium chromium-driver
  # Packaging (docs/packaging.md): the API reference, the Debian packages
  # and their checks (scripts/test-packages.sh; dpkg-buildpackage requires
  # build-essential), the HTTP example's client.
  doxygen build-essential debhelper dpkg-dev lintian curl
)

# Installs whatever of THOONK_DEPS is missing. Cheap when all is present: no
# apt-get update, no root needed.
ensure_deps() {
  local missing=() pkg
  for pkg in "${THOONK_DEPS[@]}"; do
    # dpkg -s alone also succeeds for removed packages whose config files
    # remain, so look at the status itself.
    if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
      missing+=("$pkg")
    fi
  done
  if [ "${#missing[@]}" -eq 0 ]; then
    return 0
  fi
  thoonk_log "installing missing packages: ${missing[*]}"
  local sudo=()
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 ||
      thoonk_die "missing packages (${missing[*]}) and not root; install them or make sudo available"
    sudo=(sudo)
  fi
  # env rather than an exported variable: sudo drops the environment.
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -q
  "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
  command -v redis-server >/dev/null 2>&1 ||
    thoonk_die "redis-server is still not on PATH after installing redis-server"
}

# State of the server started by start_redis, used by the EXIT trap.
THOONK_REDIS_PID=""
THOONK_REDIS_DIR=""

_thoonk_stop_redis() {
  # Runs from the EXIT trap: must not fail, must not change the exit status.
  if [ -n "$THOONK_REDIS_PID" ]; then
    # Our own pid only; never pkill by name, other servers may be running.
    kill -TERM "$THOONK_REDIS_PID" 2>/dev/null || true
    local _i
    for _i in $(seq 50); do
      kill -0 "$THOONK_REDIS_PID" 2>/dev/null || break
      sleep 0.1
    done
    kill -KILL "$THOONK_REDIS_PID" 2>/dev/null || true
    wait "$THOONK_REDIS_PID" 2>/dev/null || true
    THOONK_REDIS_PID=""
  fi
  if [ -n "$THOONK_REDIS_DIR" ]; then
    rm -rf -- "$THOONK_REDIS_DIR"
    THOONK_REDIS_DIR=""
  fi
}

# Picks a port nothing on 127.0.0.1 answers on. Another process may still take
# it before redis-server binds, so start_redis retries on failure.
_thoonk_free_port() {
  local port _i
  for _i in $(seq 100); do
    port=$((20000 + RANDOM % 40000))
    # A refused connect means nobody listens there.
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null; then
      echo "$port"
      return 0
    fi
  done
  thoonk_die "no free port found on 127.0.0.1"
}

# Starts a throwaway redis-server (loopback, no persistence) and exports
# THOONK_REDIS_URL for the programs run afterwards. Does nothing when
# THOONK_REDIS_URL is already set (an external server). The server is stopped
# by an EXIT trap, also when the script fails or is interrupted.
start_redis() {
  if [ -n "${THOONK_REDIS_URL:-}" ]; then
    thoonk_log "using external redis at $THOONK_REDIS_URL"
    return 0
  fi
  command -v redis-server >/dev/null 2>&1 || thoonk_die "redis-server not found on PATH (ensure_deps installs it)"
  command -v redis-cli >/dev/null 2>&1 || thoonk_die "redis-cli not found on PATH (ensure_deps installs it)"

  THOONK_REDIS_DIR="$(mktemp -d "${TMPDIR:-/tmp}/thoonk-redis-XXXXXX")"
  trap _thoonk_stop_redis EXIT
  # Turn signals into a normal exit so the EXIT trap runs. (Background jobs of
  # a non-interactive shell ignore SIGINT, so the server would not get a ^C.)
  trap 'exit 130' INT
  trap 'exit 143' TERM
  trap 'exit 129' HUP

  local port _i
  for _ in 1 2 3 4 5; do
    port="$(_thoonk_free_port)"
    redis-server --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
      --daemonize no --protected-mode yes --dir "$THOONK_REDIS_DIR" \
      --logfile "$THOONK_REDIS_DIR/redis.log" >>"$THOONK_REDIS_DIR/redis.stderr" 2>&1 </dev/null &
    THOONK_REDIS_PID=$!
    for _i in $(seq 100); do
      kill -0 "$THOONK_REDIS_PID" 2>/dev/null || break
      if [ "$(redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null)" = "PONG" ] &&
        grep -q 'Ready to accept connections' "$THOONK_REDIS_DIR/redis.log" 2>/dev/null; then
        # The log line proves the PONG came from our process, not from a
        # server that won a race for the port.
        export THOONK_REDIS_URL="redis://127.0.0.1:$port"
        thoonk_log "redis-server (pid $THOONK_REDIS_PID) listening at $THOONK_REDIS_URL"
        return 0
      fi
      sleep 0.1
    done
    if kill -0 "$THOONK_REDIS_PID" 2>/dev/null; then
      # Alive but not answering within 10 s: something is wrong beyond a race.
      tail -n 20 "$THOONK_REDIS_DIR/redis.log" "$THOONK_REDIS_DIR/redis.stderr" >&2 || true
      thoonk_die "redis-server did not answer PING on port $port within 10 s"
    fi
    wait "$THOONK_REDIS_PID" 2>/dev/null || true
    THOONK_REDIS_PID=""
    if ! grep -q 'Address already in use' "$THOONK_REDIS_DIR/redis.log" 2>/dev/null; then
      tail -n 20 "$THOONK_REDIS_DIR/redis.log" "$THOONK_REDIS_DIR/redis.stderr" >&2 || true
      thoonk_die "redis-server exited during startup"
    fi
    thoonk_log "port $port was taken, retrying"
  done
  thoonk_die "redis-server could not bind a free port in 5 attempts"
}

# The tests that use the client from several threads (test target
# tsan_tests), built with ThreadSanitizer in build-tsan (its own build
# directory: TSan and ASan cannot share one) and run. A report fails the
# run. docs/testing.md, "ThreadSanitizer".
run_tsan_tests() {
  local started=$SECONDS
  thoonk_log "ThreadSanitizer: building tsan_tests in build-tsan"
  build_tsan_tests
  run_built_tsan_tests
  thoonk_log "ThreadSanitizer: clean, $((SECONDS - started)) s (build and run)"
}

# The generator argument for a test build directory: -GNinja for a new one
# (when ninja is installed); nothing for one that exists, which keeps the
# generator it was made with (CMake refuses to change it).
thoonk_generator_arg() {
  if [ ! -f "$1/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then
    echo -GNinja
  fi
}

build_tsan_tests() {
  local gen
  gen=$(thoonk_generator_arg "$THOONK_ROOT/build-tsan")
  cmake -S "$THOONK_ROOT" -B "$THOONK_ROOT/build-tsan" ${gen:+"$gen"} -DCMAKE_BUILD_TYPE=Debug -DTHOONK_TSAN=ON \
    -DTHOONK_SANITIZE=OFF -DTHOONK_FUZZ=OFF -DTHOONK_BUILD_EXAMPLES=OFF -DTHOONK_BUILD_BENCHMARKS=OFF \
    -DTHOONK_TEST_UNITY_BATCH=8 -DTHOONK_LIB_UNITY_BATCH=8
  cmake --build "$THOONK_ROOT/build-tsan" -j"${THOONK_JOBS:-$(nproc)}" --target tsan_tests
}

# The library and its unit tests built with clang (Debian's clang 14, the
# fuzzers' compiler) and warnings as errors: the code is C++20, not g++ 12's
# reading of it. No sanitizers: the g++ build has them.
build_clang_units() {
  local gen
  gen=$(thoonk_generator_arg "$THOONK_ROOT/build-clang")
  cmake -S "$THOONK_ROOT" -B "$THOONK_ROOT/build-clang" ${gen:+"$gen"} -DCMAKE_BUILD_TYPE=Debug \
    -DCMAKE_CXX_COMPILER=clang++ -DCMAKE_C_COMPILER=clang -DTHOONK_WERROR=ON \
    -DTHOONK_FUZZ=OFF -DTHOONK_BUILD_EXAMPLES=OFF -DTHOONK_BUILD_BENCHMARKS=OFF \
    -DTHOONK_TEST_UNITY_BATCH=8 -DTHOONK_LIB_UNITY_BATCH=8
  cmake --build "$THOONK_ROOT/build-clang" -j"${THOONK_JOBS:-$(nproc)}" --target unit_tests
}

run_built_clang_units() {
  thoonk_log "clang: running unit_tests"
  "$THOONK_ROOT/build-clang/test/unit_tests" --reporter console
}

run_clang_units() {
  build_clang_units
  run_built_clang_units
}

# The second builds (ThreadSanitizer's tests, then clang's) while something
# else runs: in the background, at idle priority (SCHED_IDLE through chrt,
# else nice 19), so they take only CPU time the foreground leaves unused.
# Their output goes to build-second.log; THOONK_SECOND_BUILD_PID is the
# job's process id, for finish_second_builds or stop_second_builds.
THOONK_SECOND_BUILD_PID=""
start_second_builds() {
  local idle=(nice -n 19)
  if command -v chrt >/dev/null 2>&1 && chrt --idle 0 true 2>/dev/null; then
    idle=(chrt --idle 0)
  fi
  thoonk_log "building tsan_tests (ThreadSanitizer, build-tsan) and unit_tests (clang, build-clang) in the background (${idle[*]}; log: build-second.log)"
  # setsid: a session and process group of its own, so stop_second_builds
  # stops the compilers with it. A background job of this script is no
  # group leader, so setsid runs the build itself (its pid is the group's
  # id); should it have to fork, --wait keeps `wait` on the build.
  # set -e as in the foreground: a failed configure must not go on to build.
  setsid --wait "${idle[@]}" bash -c 'set -euo pipefail; source "$THOONK_ROOT/scripts/common.sh"; build_tsan_tests; build_clang_units' \
    >"$THOONK_ROOT/build-second.log" 2>&1 &
  THOONK_SECOND_BUILD_PID=$!
}

# Stops the background builds started by start_second_builds: their whole
# process group, by the id setsid gave it (the build's own pid, or its
# child's when setsid forked).
stop_second_builds() {
  [ -n "$THOONK_SECOND_BUILD_PID" ] || return 0
  local group
  for group in "$THOONK_SECOND_BUILD_PID" $(pgrep -P "$THOONK_SECOND_BUILD_PID" 2>/dev/null); do
    kill -TERM -- "-$group" 2>/dev/null || true
  done
  wait "$THOONK_SECOND_BUILD_PID" 2>/dev/null || true
  THOONK_SECOND_BUILD_PID=""
}

# Waits for the background builds, then runs their tests; a failed build
# prints its log and fails.
finish_second_builds() {
  local started=$SECONDS status=0
  thoonk_log "waiting for the background builds (ThreadSanitizer, clang)"
  wait "$THOONK_SECOND_BUILD_PID" || status=$?
  THOONK_SECOND_BUILD_PID=""
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$THOONK_ROOT/build-second.log" >&2
    thoonk_die "a background build failed (exit $status): build-second.log"
  fi
  thoonk_log "background builds done (waited $((SECONDS - started)) s)"
  run_built_tsan_tests
  thoonk_log "ThreadSanitizer: clean"
  run_built_clang_units
  thoonk_log "clang unit tests passed, $((SECONDS - started)) s after the other tests"
}

run_built_tsan_tests() {
  thoonk_log "ThreadSanitizer: running tsan_tests"
  # Kernels with 32 bits of mmap randomness place memory where the TSan
  # runtime of GCC 12 does not expect it ("unexpected memory mapping"):
  # run without address randomization (setarch -R) when possible.
  local runner=()
  if command -v setarch >/dev/null 2>&1 && setarch "$(uname -m)" -R true 2>/dev/null; then
    runner=(setarch "$(uname -m)" -R)
  fi
  TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 ${TSAN_OPTIONS:-}" \
    "${runner[@]}" "$THOONK_ROOT/build-tsan/test/tsan_tests" --reporter console
}

# The Debian packages (scripts/test-packages.sh, docs/packaging.md): built in
# the background at idle priority while ctest runs (log: build-packages.log),
# then checked (lintian, exports, install, consumer, removal) by
# finish_package_build. THOONK_PACKAGE_BUILD_PID is the build's process id.
THOONK_PACKAGE_BUILD_PID=""
start_package_build() {
  local idle=(nice -n 19)
  if command -v chrt >/dev/null 2>&1 && chrt --idle 0 true 2>/dev/null; then
    idle=(chrt --idle 0)
  fi
  thoonk_log "building the Debian packages in the background (${idle[*]}; log: build-packages.log)"
  setsid --wait "${idle[@]}" bash "$THOONK_ROOT/scripts/test-packages.sh" build \
    >"$THOONK_ROOT/build-packages.log" 2>&1 &
  THOONK_PACKAGE_BUILD_PID=$!
}

stop_package_build() {
  [ -n "$THOONK_PACKAGE_BUILD_PID" ] || return 0
  local group
  for group in "$THOONK_PACKAGE_BUILD_PID" $(pgrep -P "$THOONK_PACKAGE_BUILD_PID" 2>/dev/null); do
    kill -TERM -- "-$group" 2>/dev/null || true
  done
  wait "$THOONK_PACKAGE_BUILD_PID" 2>/dev/null || true
  THOONK_PACKAGE_BUILD_PID=""
}

finish_package_build() {
  local started=$SECONDS status=0
  thoonk_log "waiting for the Debian package build"
  wait "$THOONK_PACKAGE_BUILD_PID" || status=$?
  THOONK_PACKAGE_BUILD_PID=""
  if [ "$status" -ne 0 ]; then
    tail -n 60 "$THOONK_ROOT/build-packages.log" >&2
    thoonk_die "the Debian package build failed (exit $status): build-packages.log"
  fi
  thoonk_log "package build done (waited $((SECONDS - started)) s)"
  bash "$THOONK_ROOT/scripts/test-packages.sh" check
  thoonk_log "Debian packages checked, $((SECONDS - started)) s after the other tests"
}
