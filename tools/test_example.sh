#!/usr/bin/env bash
# The SDK example (examples/custom_kernels, a workspace of its own that
# depends on argsdump through local_repository) the way its users run it:
#   1. bazel test //... --test_arg=--dump-args=2: passes, and every test's
#      outputs.zip holds a capture dump_viewer opens;
#   2. bazel test //... --test_env=ARGSDUMP_LEVEL=0: passes, no capture;
#   3. bazel test //... --test_env=ARGSDUMP_CAPTURE_SERVER=<a capture_server
#      started here on 127.0.0.1, port 0>: passes, and the service lists a
#      capture per test target, labelled with it.
# Uses the main workspace's capture_server and dump_viewer, built here in
# the plain configuration (after tools/test.sh's sanitizer passes, .bazel/bin
# would otherwise hold their TSan builds, which report Debian's
# uninstrumented gRPC as racing). Prints "example: N passed, N failed".
set -uo pipefail
cd "$(dirname "$0")/.."
main=$(pwd)
bazel build //viewer:dump_viewer //server:capture_server >/dev/null 2>&1 ||
  { echo "example: FAILED: cannot build dump_viewer and capture_server"; exit 1; }
bin="$main/.bazel/bin"
viewer="$bin/viewer/dump_viewer"
server_bin="$bin/server/capture_server"
example="$main/examples/custom_kernels"
targets=(crash_test layer_norm_test markers_test signature_mismatch_test streaming_test views_and_bf16_test)
passed=0; failed=0
ok() { echo "example: ok: $*"; passed=$((passed + 1)); }
bad() { echo "example: FAILED: $*"; failed=$((failed + 1)); }

run() {  # bazel test in the example with these flags; its summary lines
  (cd "$example" && bazel test //... "$@" 2>&1) | tee "$log" | grep -E '^//|^Executed|^ERROR|FAILED'
  return "${PIPESTATUS[0]}"
}
log=$(mktemp)
tmp=$(mktemp -d)
trap 'rm -rf "$log" "$tmp"; [ -n "${server_pid:-}" ] && kill "$server_pid" 2>/dev/null' EXIT

echo "=== examples/custom_kernels: bazel test //... --test_arg=--dump-args=2"
if run --test_arg=--dump-args=2; then ok "tests pass at level 2"; else bad "tests at level 2"; fi
testlogs="$example/bazel-testlogs/tests"
for t in "${targets[@]}"; do
  zip="$testlogs/$t/test.outputs/outputs.zip"
  if [ ! -f "$zip" ]; then bad "$t left no outputs.zip"; continue; fi
  if out=$("$viewer" "$zip" 2>&1) && grep -qE '^[0-9]+ args$' <<<"$out"; then
    ok "$t: $(grep -E '^[0-9]+ args$' <<<"$out") in $(grep -m1 '^capture:' <<<"$out" | sed 's/ (.*//')"
    # What sharing equal payloads saved there (the manifest's counters).
    python3 - "$zip" <<'PY' || true
import json, sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
for n in z.namelist():
    if n.endswith("args_dump/args_dump.json"):
        m = json.loads(z.read(n))
        p, s = m.get("payload_bytes", 0), m.get("payload_bytes_stored", 0)
        print("example:   %s: payload bytes %d, stored %d (%.0f %% saved, %d args shared)"
              % (n, p, s, 100.0 * (p - s) / p if p else 0, m.get("deduplicated_args", 0)))
PY
  else
    bad "$t: dump_viewer on its outputs.zip: $out"
  fi
done
# The capture names its kernels: dump_viewer --func NAME selects by name, and
# a name it does not have is exit 2 listing the ones it has.
zip="$testlogs/layer_norm_test/test.outputs/outputs.zip"
if out=$("$viewer" "$zip" --func layer_norm -s before -a 0 2>&1) && grep -qE '^3 args$' <<<"$out" \
    && grep -qE '^ +[0-9]+  layer_norm ' <<<"$out"; then
  ok "layer_norm_test: dump_viewer --func layer_norm lists its 3 steps' inputs"
else
  bad "layer_norm_test: dump_viewer --func layer_norm: $out"
fi
out=$("$viewer" "$zip" --func layer_nrom 2>&1); rc=$?
if [ "$rc" -eq 2 ] && grep -q "\-\-func 'layer_nrom': no kernel named \"layer_nrom\" in this capture; its kernels: .*axpb.*layer_norm" <<<"$out"; then
  ok "layer_norm_test: an unknown --func name is exit 2 naming the kernels"
else
  bad "layer_norm_test: dump_viewer --func layer_nrom (rc $rc): $out"
fi

echo "=== examples/custom_kernels: bazel test //... --test_env=ARGSDUMP_LEVEL=0"
if run --test_env=ARGSDUMP_LEVEL=0; then ok "tests pass with the dump off"; else bad "tests with the dump off"; fi
for t in "${targets[@]}"; do
  zip="$testlogs/$t/test.outputs/outputs.zip"
  where="$zip"
  # crash_test's exception dump is written at every level, even 0; its
  # session folder must hold no capture.
  [ "$t" = crash_test ] && where="$zip/CrashTest.TheCrashingKernelsInputsAreKept"
  if [ -f "$zip" ] && "$viewer" "$where" >/dev/null 2>&1; then
    bad "$t wrote a capture at level 0"
  else
    ok "$t wrote no capture at level 0"
  fi
done

echo "=== examples/custom_kernels: bazel test //... --test_env=ARGSDUMP_CAPTURE_SERVER=..."
mkfifo "$tmp/server.out"
"$server_bin" --listen=127.0.0.1:0 --root="$tmp/root" >"$tmp/server.out" 2>"$tmp/server.err" &
server_pid=$!
exec 3<"$tmp/server.out"
line=""
read -r -t 60 line <&3 || true  # its first line says where it listens (EOF if it died)
address=$(sed -nE 's/.*listening on (127\.0\.0\.1:[0-9]+).*/\1/p' <<<"$line")
if [ -z "$address" ]; then
  bad "capture_server did not start: $(cat "$tmp/server.err")"
else
  if run --test_env=ARGSDUMP_CAPTURE_SERVER="$address" --test_env=ARGSDUMP_LABELS=ci=example; then
    ok "tests pass streaming to $address"
  else
    bad "tests streaming to $address"
  fi
  for t in crash_test layer_norm_test markers_test signature_mismatch_test; do
    out=$("$viewer" --server "$address" --captures --label "target=//tests:$t" --label ci=example 2>&1)
    if grep -qE '^[1-9][0-9]* captures?$' <<<"$out"; then
      ok "$t: $(grep -E '^[0-9]+ captures?$' <<<"$out") on the service labelled target=//tests:$t"
    else
      bad "$t: no capture on the service labelled target=//tests:$t: $out"
    fi
  done
  kill -TERM "$server_pid"; wait "$server_pid" 2>/dev/null; server_pid=""
  exec 3<&-
fi
(cd "$example" && bazel shutdown >/dev/null 2>&1)
echo "example: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
