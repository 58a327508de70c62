#!/bin/bash
# --//bazel:dump_markers=false compiles CoreTaskArgs::dump(...) to nothing:
# the probe function, which holds only marker calls, is a bare return in the
# build with the markers off (and is not in the build with them on: the
# check can fail). Both builds are -c opt (bazel/dump_markers.bzl).
set -u
off="$1"
on="$2"
fail=0

# The probe's instructions, one mnemonic (with operands) a line.
body() {
  objdump -d --no-show-raw-insn --disassemble=argsdump_marker_probe "$1" |
    awk '/<argsdump_marker_probe>:$/ { inside = 1; next }
         inside && NF == 0 { exit }
         inside { sub(/^[ \t]*[0-9a-f]+:[ \t]*/, ""); print }'
}

# Instructions that do nothing: the return, a CET landing pad, padding.
only_return() {
  local text="$1"
  [ -n "$text" ] || return 1
  ! grep -Evq '^(endbr64|ret|rep ret|repz ret|nop.*|xchg +%ax,%ax|data16.*)$' <<<"$text"
}

for build in off on; do
  bin=$off
  [ "$build" = on ] && bin=$on
  if ! "$bin" "$build"; then
    echo "FAIL: the probe built with the markers $build does not behave so" >&2
    fail=1
  fi
done

off_body="$(body "$off")"
on_body="$(body "$on")"
echo "markers off: argsdump_marker_probe is:"
sed 's/^/  /' <<<"$off_body"
echo "markers on: argsdump_marker_probe has $(grep -c . <<<"$on_body") instructions"

if [ -z "$off_body" ] || [ -z "$on_body" ]; then
  echo "FAIL: argsdump_marker_probe not found in a build (objdump)" >&2
  fail=1
fi
if ! only_return "$off_body"; then
  echo "FAIL: with --//bazel:dump_markers=false the markers still compile to code" >&2
  fail=1
fi
if only_return "$on_body"; then
  echo "FAIL: with the markers on the probe is empty too: the probe shows nothing" >&2
  fail=1
fi
exit $fail
