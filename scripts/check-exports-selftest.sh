#!/usr/bin/env bash
# The export check (scripts/check-exports.sh) must refuse a library that
# exports an implementation symbol: builds a stand-in libthoonk.so.0 that
# has the public symbols it looks for plus thoonk::detail::leaked(), and
# expects the check to fail naming it, then passes the same library without
# the leak.
set -euo pipefail
work=${1:?usage: check-exports-selftest.sh WORK_DIR}
rm -rf -- "$work"
mkdir -p "$work"
check="$(dirname "${BASH_SOURCE[0]}")/check-exports.sh"

cat >"$work/lib.cpp" <<'CPP'
#include <stdexcept>
namespace thoonk {
const char* version() noexcept { return "0"; }
struct client { client(int); };
client::client(int) {}
int category() { return 0; }
int condition_of(int) { return 0; }
namespace resp3 { struct parser { int f(); }; int parser::f() { return 0; } }
struct permanent_job_error : std::runtime_error { using std::runtime_error::runtime_error; };
void throw_it() { throw permanent_job_error("x"); }
struct job_queue { void start_run(int); };
void job_queue::start_run(int) {}
struct feed { void start_publish(int); };
void feed::start_publish(int) {}
namespace detail {
struct feed_core { void start_length(int); };
void feed_core::start_length(int) {}
#ifdef LEAK
void leaked(int) {}
#endif
}  // namespace detail
}  // namespace thoonk
CPP
c++ -shared -fPIC -Wl,-soname,libthoonk.so.0 -o "$work/leak.so" -DLEAK "$work/lib.cpp"
c++ -shared -fPIC -Wl,-soname,libthoonk.so.0 -o "$work/clean.so" "$work/lib.cpp"

if bash "$check" "$work/leak.so" 0 >"$work/leak.out" 2>&1; then
  cat "$work/leak.out" >&2
  echo "FAIL: the check passed a library exporting thoonk::detail::leaked" >&2
  exit 1
fi
grep -q 'thoonk::detail::leaked(int)' "$work/leak.out" || {
  cat "$work/leak.out" >&2
  echo "FAIL: the check did not name thoonk::detail::leaked" >&2
  exit 1
}
bash "$check" "$work/clean.so" 0
# A wrong SONAME is refused too.
if bash "$check" "$work/clean.so" 1 >"$work/soname.out" 2>&1; then
  echo "FAIL: the check passed SONAME libthoonk.so.0 for SOVERSION 1" >&2
  exit 1
fi
echo "export check self-test: ok"
