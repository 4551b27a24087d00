#!/usr/bin/env bash
# The fault-injection suite (test/faults/, docs/reliability.md): worker
# processes and redis-server killed with SIGKILL, CLIENT PAUSE past the
# lease, a fault proxy between client and server. Every process it starts
# listens on 127.0.0.1 only and is stopped by its pid.
#
#   bash scripts/run-faults.sh            # the CI profile (about 25 s)
#   bash scripts/run-faults.sh --full     # the full profile (the table in docs/reliability.md)
#   bash scripts/run-faults.sh "[proxy]"  # arguments after the profile go to the test binary
#
# Builds build-tests (Debug, ASan+UBSan, as scripts/run-tests.sh does), runs
# the suite, prints the summary table and writes it to
# build-tests/faults-<profile>.md. THOONK_JOBS overrides the build's -j.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
cd "$THOONK_ROOT"

profile=ci
if [ "${1:-}" = "--full" ]; then
  profile=full
  shift
fi

ensure_deps
cmake -S . -B build-tests -DCMAKE_BUILD_TYPE=Debug -DTHOONK_SANITIZE=ON
cmake --build build-tests -j"${THOONK_JOBS:-$(nproc)}" --target fault_tests fault_worker

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
thoonk_log "fault-injection suite, profile $profile"
THOONK_FAULTS_PROFILE="$profile" THOONK_FAULTS_REPORT="build-tests/faults-$profile.md" \
  build-tests/test/fault_tests "$@"
thoonk_log "summary table written to build-tests/faults-$profile.md"
