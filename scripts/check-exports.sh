#!/usr/bin/env bash
# Checks what libthoonk.so exports (docs/packaging.md, "Exported symbols"):
#   * its SONAME is libthoonk.so.<SOVERSION>;
#   * the public API is there (a few symbols of each kind);
#   * no symbol of the implementation (thoonk::detail) is exported except
#     those the public headers call from their inline templates, listed
#     below with the reason.
#
#   scripts/check-exports.sh path/to/libthoonk.so[.N[.M.P]] [SOVERSION]
set -euo pipefail

[ "$#" -ge 1 ] || { echo "usage: check-exports.sh LIBTHOONK_SO [SOVERSION]" >&2; exit 2; }
lib=$1
soversion=${2:-0}
[ -f "$lib" ] || { echo "error: $lib does not exist" >&2; exit 2; }

status=0
soname=$(readelf -d "$lib" | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
if [ "$soname" != "libthoonk.so.$soversion" ]; then
  echo "FAIL: SONAME is '$soname', expected libthoonk.so.$soversion" >&2
  status=1
fi

symbols=$(nm -D --defined-only -C "$lib" | sed 's/^[0-9a-f]* [A-Za-z] //')

# The public API, one or two of each kind: classes, free functions, the
# error category, the version, and the type information of
# permanent_job_error, which a handler compiled into the program throws and
# the runner inside the library catches.
for want in 'thoonk::version()' 'thoonk::client::client(' 'thoonk::category()' \
  'thoonk::condition_of(' 'thoonk::resp3::parser::' 'typeinfo for thoonk::permanent_job_error' \
  'thoonk::job_queue::start_run(' 'thoonk::feed::start_publish('; do
  if ! grep -qF -- "$want" <<<"$symbols"; then
    echo "FAIL: the public symbol '$want' is not exported" >&2
    status=1
  fi
done

# Symbols of thoonk::detail the public headers need, as patterns of the
# symbol's own name (its parameter list removed):
#   feed_core::       base class of feed and sorted_feed: their inline
#                     async_* templates call its start_* functions
#   feed_base<        the same for the operations typed by the handle
#                     (open, create_or_open, read_settings), instantiated
#                     for feed and sorted_feed in the library
#   queue_base::      base class of queue and job_queue: constructor, name()
#                     and the start_put* functions of the inline async_put*
#   executor_of, check_durability, wait_for_replicas
#                     called by the inline completion-token adapters of
#                     detail/async.hpp (with_durability, capture_diagnostics)
#   start_subscribe_feed_admin
#                     called by the inline async_subscribe_feed_admin
allowed='^((typeinfo|typeinfo name|vtable) for )?thoonk::detail::(feed_core::|feed_core$|feed_base<|queue_base::|queue_base$|(executor_of|check_durability|wait_for_replicas|start_subscribe_feed_admin)$)'

# A symbol belongs to thoonk::detail when its own name (not its parameter
# list) names it: the entity itself, or a template instantiated for one of
# its types (then it starts with a return type or another namespace, and
# is reported).
unexpected=$(while IFS= read -r sym; do
  own=${sym%%(*}
  case "$own" in
  *thoonk::detail::*)
    [[ "$own" =~ $allowed ]] || echo "$sym"
    ;;
  esac
done <<<"$symbols")
if [ -n "$unexpected" ]; then
  echo "FAIL: libthoonk.so exports symbols of thoonk::detail no public header needs:" >&2
  echo "$unexpected" | head -n 40 >&2
  status=1
fi

total=$(wc -l <<<"$symbols")
detail=$(grep -c 'thoonk::detail::' <<<"$symbols" || true)
if [ "$status" -eq 0 ]; then
  echo "exports ok: $soname, $total symbols, $detail naming thoonk::detail (all allowed)"
fi
exit "$status"
