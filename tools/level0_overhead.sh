#!/usr/bin/env bash
# Level 0 against the dump compiled out, by instruction count (callgrind
# counts instructions, not seconds: the machine's noise does not enter).
# Runs each build of the sim runtime twice on the same 20,000-task workload
# and prints the ratio of total instructions (level 0 / compiled out).
set -euo pipefail
cd "$(dirname "$0")/.."
command -v valgrind >/dev/null || { echo "level0_overhead: needs valgrind (apt-get install valgrind)" >&2; exit 2; }
bazel build -c opt //device:sim_runtime_benchmark >/dev/null 2>&1
bin=$(bazel info -c opt bazel-bin 2>/dev/null)/device/sim_runtime_benchmark
count() {
  valgrind --tool=callgrind --callgrind-out-file=/dev/null "$bin" \
    --benchmark_filter="$1" --benchmark_min_time=0.000001 2>&1 >/dev/null |
    sed -nE 's/.*refs: +([0-9,]+).*/\1/p' | tr -d ,
}
l0=0; out=0
for run in 1 2; do
  a=$(count BM_SimLevel0); b=$(count BM_SimDumpCompiledOut)
  echo "run $run: level 0 $a instructions, compiled out $b"
  l0=$((l0 + a)); out=$((out + b))
done
awk -v a="$l0" -v b="$out" 'BEGIN { printf "level 0 / compiled out = %.4f\n", a / b }'
