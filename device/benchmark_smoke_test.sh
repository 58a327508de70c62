#!/usr/bin/env bash
# Smoke-runs a Google Benchmark binary: every benchmark must run and report.
set -euo pipefail
out="$("$1" --benchmark_min_time=0.01 --benchmark_format=console 2>&1)"
echo "$out"
for name in BM_RecordMetadata BM_RecordScalar BM_CaptureContiguous BM_GatherStrided BM_Memcpy; do
  grep -q "$name" <<<"$out" || { echo "missing $name" >&2; exit 1; }
done
! grep -q "ERROR" <<<"$out"
