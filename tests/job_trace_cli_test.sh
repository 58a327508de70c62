#!/usr/bin/env bash
# dump_viewer --trace as a user runs it: a job of 4 ranks from sim_run
# --ranks, its trace (one process per rank, one slice per task, checked by
# a JSON parser: tests/check_trace.py), one rank's capture alone, a filter,
# and the refusals (a file that cannot be written, flags that do not go
# with --trace).
set -uo pipefail
sim_run="$(realpath "$1")"
viewer="$(realpath "$2")"
check_trace="$(realpath "$3")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name="$1" want_rc="$2" pattern="$3"
  shift 4
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc (want $want_rc), output:"; echo "$out"; fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
kernels="matmul,scale,relu,softmax,accumulate,copy,mix_sum+mix_prod+mix_max"

# mixed_example: 7 tasks a step; 3 steps on each of 4 ranks.
check "4 ranks" 0 "job: traced, 4 ranks, 4 exited 0" -- \
  "$sim_run" --ranks 4 --job traced --workload mixed_example --dump-args 2 --steps 3 \
  --output-prefix "$tmp/out"
check "the job's trace" 0 "trace: 84 tasks \(0 without a completion, 0 without times\) of 4 processes" -- \
  "$viewer" --job "$tmp/out/traced" --trace "$tmp/job.json"
check "one slice per task per rank, a process per rank" 0 "" -- \
  python3 "$check_trace" "$tmp/job.json" 84 "$kernels" 4
check "one rank's capture" 0 "trace: 21 tasks .* of 1 process" -- \
  "$viewer" "$tmp/out/traced/rank2/args_dump" --trace "$tmp/rank2.json"
check "its trace" 0 "" -- python3 "$check_trace" "$tmp/rank2.json" 21 "$kernels" 1
check "--ranks" 0 "trace: 42 tasks .* of 2 processes" -- \
  "$viewer" --job "$tmp/out/traced" --ranks 1,3 --trace "$tmp/ranks.json"
check "--ranks' trace" 0 "" -- python3 "$check_trace" "$tmp/ranks.json" 42 "$kernels" 2
check "a filter" 0 "trace: 12 tasks" -- \
  "$viewer" --job "$tmp/out/traced" --func matmul --trace "$tmp/matmul.json"
check "only matmul" 0 "" -- python3 "$check_trace" "$tmp/matmul.json" 12 matmul 4
# Without args.index the manifest gives the same tasks.
cp -r "$tmp/out/traced/rank2/args_dump" "$tmp/no_index"
rm "$tmp/no_index/args.index"
check "from the manifest" 0 "trace: 21 tasks" -- \
  "$viewer" "$tmp/no_index" --trace "$tmp/manifest.json"
check "its trace too" 0 "" -- python3 "$check_trace" "$tmp/manifest.json" 21 "$kernels" 1

check "a file that cannot be written" 2 "--trace $tmp/none/t.json: cannot write it" -- \
  "$viewer" --job "$tmp/out/traced" --trace "$tmp/none/t.json"
check "--trace with --export" 2 "--trace goes alone, or with --job" -- \
  "$viewer" "$tmp/out/traced/rank0/args_dump" --trace "$tmp/x.json" --export
check "--trace with --compare-ranks" 2 "--trace goes alone, or with --job" -- \
  "$viewer" --job "$tmp/out/traced" --compare-ranks 0 --trace "$tmp/x.json"
check "--trace without a file" 2 "--trace '': expected a file to write" -- \
  "$viewer" --job "$tmp/out/traced" --trace=

[ "$fails" -eq 0 ] || { echo "$fails checks failed"; exit 1; }
echo "all checks passed"
