#!/usr/bin/env bash
# Smoke-runs the job scaling benchmark at its smallest size: two runs
# against the baseline of eight, every record acknowledged.
set -euo pipefail
out="$("$1" --sim_run="$(realpath "$2")" --capture_server="$(realpath "$3")" \
  --benchmark_filter='BM_JobScaling/runs:2/steps:2' 2>&1)"
echo "$out"
grep -q "BM_JobScaling/runs:2/steps:2" <<<"$out"
grep -q "failed_runs=0" <<<"$out"
! grep -qiE "error" <<<"$out"
