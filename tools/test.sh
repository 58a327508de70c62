#!/usr/bin/env bash
# The whole test suite, from a fresh machine: installs the packages, then runs
# `bazel test //...` plain, under AddressSanitizer and under ThreadSanitizer.
#   tools/test.sh            all three
#   tools/test.sh --plain    the plain suite only (quick)
# Ends with one line "N passed, N failed" over every configuration.
set -uo pipefail
cd "$(dirname "$0")/.."

bash tools/setup.sh || { echo "setup failed" >&2; exit 1; }

configs=(plain asan tsan)
if [ "${1:-}" = "--plain" ]; then configs=(plain); fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
for config in "${configs[@]}"; do
  flags=()
  [ "$config" != plain ] && flags=(--config="$config")
  echo "=== bazel test //... ($config)"
  bazel test "${flags[@]}" //... 2>&1 | tee -a "$log" | grep -E '^//|^Executed|^ERROR|^FAIL' 
  [ "${PIPESTATUS[0]}" -eq 0 ] || rc=1
done

passed=$(grep -cE '^//[^ ]+ +(\(cached\) )?PASSED' "$log")
failed=$(grep -cE '^//[^ ]+ +(\(cached\) )?(FAILED|TIMEOUT|NO STATUS|FAILED TO BUILD|INCOMPLETE)' "$log")
if [ "$rc" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi  # a build error
echo "$passed passed, $failed failed"
exit "$rc"
