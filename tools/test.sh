#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the packages, then runs
# `bazel test //...` plain, under AddressSanitizer and under ThreadSanitizer,
# the SDK example workspace (tools/test_example.sh: its own `bazel test`
# at level 2, with the dump off, streaming to a capture service) and the
# libFuzzer targets for a while (tools/fuzz.sh).
#   tools/test.sh            all of it
#   tools/test.sh --plain    the plain suite only (quick)
# Ends with one line "N passed, N failed" over every configuration.
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh || { echo "setup failed" >&2; exit 1; }

# No package may depend upward (tools/layers.sh has the layers): checked
# before anything is built.
echo "=== layers at ${SECONDS}s"
bash tools/check_layers.sh || { echo "0 passed, 1 failed"; exit 1; }

configs=(plain asan tsan)
if [ "${1:-}" = "--plain" ]; then configs=(plain); fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
for config in "${configs[@]}"; do
  flags=()
  # Under the sanitizers only what tests run is built (the benchmarks and
  # tools no test runs are built once, in the plain pass): the cold ASan
  # build was the longest phase of CI.
  [ "$config" != plain ] && flags=(--config="$config" --build_tests_only)
  echo "=== bazel test //... ($config) at ${SECONDS}s"
  bazel test "${flags[@]}" //... 2>&1 | tee -a "$log" | grep -E '^//|^Executed|^ERROR|^FAIL' 
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  # What a failed test said, so a CI log alone tells why (its test.log is
  # gone with the machine).
  grep -oE '^FAIL: //[^ ]+ .*\(see [^)]+\)' "$log" | sed -E 's/.*\(see ([^)]+)\)/\1/' | sort -u |
    while read -r testlog; do
      [ -f "$testlog" ] || continue
      echo "--- $testlog"
      grep -E -A6 'Failure$|^\[  FAILED  \]|ERROR: |runtime error|Sanitizer' "$testlog" | cut -c1-400 | head -80
    done
  sed -i 's/^FAIL: /FAIL (reported): /' "$log"
done

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$log")
if [ "${1:-}" != "--plain" ]; then
  echo "=== examples/custom_kernels (a workspace of its own on the SDK) at ${SECONDS}s"
  bash tools/test_example.sh | tee "$log.example" | grep -E '^===|^example:|^ERROR|FAILED'
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
  passed=$((passed + $(grep -c '^example: ok:' "$log.example")))
  failed=$((failed + $(grep -c '^example: FAILED:' "$log.example")))
  echo "=== libFuzzer targets (tools/fuzz.sh 10) at ${SECONDS}s"
  if bash tools/fuzz.sh 10; then passed=$((passed + 1)); else failed=$((failed + 1)); rc=1; fi
  rm -f "$log.example"
fi
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build error
echo "=== done at ${SECONDS}s"
echo "$passed passed, $failed failed"
exit "$rc"
