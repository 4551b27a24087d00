#!/usr/bin/env bash
# Builds test/consumer against an installed thoonk-asio both ways a user
# would, with CMake's find_package(thoonk) and with
# `pkg-config --cflags --libs thoonk`, and runs each build against a
# throwaway redis-server on a free loopback port (start_redis; or
# THOONK_REDIS_URL): it puts, claims and finishes a job.
#
#   scripts/test-consumer.sh [options] WORK_DIR
#     --install BUILD_DIR   first `cmake --install BUILD_DIR` into WORK_DIR/prefix and use that
#     --prefix DIR          an installed prefix (default: none, the system's, as the Debian packages install)
#     --static              link statically (pkg-config --static; the prefix holds libthoonk.a only)
#     --flags "FLAGS"       extra compile and link flags (the sanitizers of an ASan build)
#     --static-target       also build with find_package's thoonk::thoonk_static (the static
#                           library installed beside the shared one) and check it links no libthoonk.so
#
# The ctest entry `consumer` runs it on the test build's own install;
# scripts/test-packages.sh on the installed Debian packages.
set -euo pipefail
# shellcheck source=scripts/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

install_from="" prefix="" static=0 flags="" static_target=0
while [ "$#" -gt 1 ]; do
  case "$1" in
  --install) install_from=$2; shift 2 ;;
  --prefix) prefix=$2; shift 2 ;;
  --static) static=1; shift ;;
  --static-target) static_target=1; shift ;;
  --flags) flags=$2; shift 2 ;;
  *) thoonk_die "unknown option $1" ;;
  esac
done
[ "$#" -eq 1 ] || thoonk_die "usage: test-consumer.sh [--install BUILD_DIR] [--prefix DIR] [--static] [--static-target] [--flags FLAGS] WORK_DIR"
work=$1
rm -rf -- "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)

if [ -n "$install_from" ]; then
  prefix="$work/prefix"
  cmake --install "$install_from" --prefix "$prefix" >"$work/install.log"
fi

start_redis

cmake_args=()
pc_path=""
if [ -n "$prefix" ]; then
  cmake_args+=("-DCMAKE_PREFIX_PATH=$prefix")
  pc_path=$(find "$prefix" -name thoonk.pc -printf '%h\n' | head -n 1)
  [ -n "$pc_path" ] || thoonk_die "no thoonk.pc under $prefix"
fi

# 1. CMake: find_package(thoonk), target thoonk::thoonk.
thoonk_log "consumer: find_package(thoonk)${prefix:+ in $prefix}"
cmake -S "$THOONK_ROOT/test/consumer" -B "$work/cmake" "${cmake_args[@]}" \
  "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" >"$work/cmake-configure.log" ||
  { cat "$work/cmake-configure.log" >&2; thoonk_die "configuring the consumer failed"; }
cmake --build "$work/cmake" >"$work/cmake-build.log" 2>&1 ||
  { cat "$work/cmake-build.log" >&2; thoonk_die "building the consumer with find_package failed"; }
"$work/cmake/consumer"

# 2. pkg-config: the compiler alone, with the flags thoonk.pc gives.
pc_args=(--cflags --libs)
[ "$static" = 1 ] && pc_args+=(--static)
pc_flags=$(PKG_CONFIG_PATH="$pc_path${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}" pkg-config "${pc_args[@]}" thoonk) ||
  thoonk_die "pkg-config does not find thoonk${pc_path:+ in $pc_path}"
thoonk_log "consumer: pkg-config ${pc_args[*]} thoonk: $pc_flags"
# shellcheck disable=SC2086 # the flags are words
c++ -std=c++20 $flags -o "$work/consumer-pc" "$THOONK_ROOT/test/consumer/main.cpp" $pc_flags
# ldd's output in a variable first: `ldd | grep -q` fails under pipefail
# when grep quits early and ldd gets SIGPIPE.
libs=$(ldd "$work/consumer-pc")
if [ "$static" = 1 ] && grep -q libthoonk <<<"$libs"; then
  thoonk_die "the --static consumer links libthoonk.so"
elif [ "$static" = 0 ] && ! grep -q 'libthoonk\.so\.' <<<"$libs"; then
  thoonk_die "the pkg-config consumer does not link libthoonk.so"
fi
"$work/consumer-pc"

# 3. Optionally the static library beside the shared one, through CMake.
if [ "$static_target" = 1 ]; then
  thoonk_log "consumer: find_package(thoonk), target thoonk::thoonk_static"
  cmake -S "$THOONK_ROOT/test/consumer" -B "$work/cmake-static" "${cmake_args[@]}" \
    -DTHOONK_CONSUMER_TARGET=thoonk::thoonk_static \
    "-DCMAKE_CXX_FLAGS=$flags" "-DCMAKE_EXE_LINKER_FLAGS=$flags" >"$work/cmake-static-configure.log" ||
    { cat "$work/cmake-static-configure.log" >&2; thoonk_die "configuring the static consumer failed"; }
  cmake --build "$work/cmake-static" >"$work/cmake-static-build.log" 2>&1 ||
    { cat "$work/cmake-static-build.log" >&2; thoonk_die "building the consumer with thoonk::thoonk_static failed"; }
  libs=$(ldd "$work/cmake-static/consumer")
  if grep -q libthoonk <<<"$libs"; then
    thoonk_die "the thoonk::thoonk_static consumer links libthoonk.so"
  fi
  "$work/cmake-static/consumer"
fi
thoonk_log "consumer: every build ran"
