#!/usr/bin/env bash
# An argsdump_sim_test binary given a bad dump flag, flag by flag: each is
# taken off argv and the tests run (exit 0), never exit 2.
set -uo pipefail
test_bin="$(realpath "$1")"
fails=0
for flags in "--dump-args=7" "--dump-args=x" "--dump-args 7" "--dump-args=" \
             "--dump-args-default=9" "--dump-args-default" "--dump-config" \
             "--output-prefix=" "--capture-server nohost" "--capture-server=h:99999" \
             "--dump-verbose=loud" "--dump-snapshot-inputs=maybe"; do
  # shellcheck disable=SC2086
  out="$("$test_bin" $flags --gtest_filter=DumpFlagsTest.EveryFormIsRecognisedAndRemoved 2>&1)"; rc=$?
  if [ "$rc" -ne 0 ] || ! grep -q "1 test.*PASSED\|PASSED.*1 test" <<<"$out"; then
    echo "FAIL $flags: rc=$rc"; echo "$out"; fails=$((fails + 1))
  else
    echo "ok   $flags"
  fi
done
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
