#!/usr/bin/env bash
# Both builds of the runtime run in the one benchmark binary; the step
# benchmark at its smallest size only (10^6 tasks is for bazel run -c opt).
set -euo pipefail
out="$("$1" --benchmark_min_time=0.01 \
  --benchmark_filter='BM_SimLevel0|BM_SimDumpCompiledOut|BM_StepOfTasks/10000/|BM_SnapshotInputsRatio/16/1' 2>&1)"
echo "$out"
grep -q BM_SimLevel0 <<<"$out"
grep -q BM_SimDumpCompiledOut <<<"$out"
grep -q BM_StepOfTasks/10000 <<<"$out"
grep -q BM_SnapshotInputsRatio/16/1 <<<"$out"
