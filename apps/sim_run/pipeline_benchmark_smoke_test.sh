#!/usr/bin/env bash
# Smoke-runs the pipeline benchmark briefly: every benchmark runs, none errs.
set -euo pipefail
# The small sizes only: this also runs under the sanitizers.
out="$("$1" --benchmark_min_time=0.01 \
  --benchmark_filter='BM_PipelineMetadata/1024|BM_PipelinePayload/64|BM_RawWrite/64|BM_PayloadRatios/64|BM_StatsRatios/64|BM_DedupRatios/64|BM_NonfiniteRatios/64|BM_StatsPass|BM_SimJob|BM_DeviceProcessRatios/0/1024/1' 2>&1)"
echo "$out"
for name in BM_PipelineMetadata BM_PipelinePayload BM_RawWrite BM_PayloadRatios BM_StatsRatios BM_NonfiniteRatios BM_StatsPass BM_SimJob/0 BM_SimJob/2 BM_DeviceProcessRatios/0/1024/1; do
  grep -q "$name" <<<"$out" || { echo "missing $name" >&2; exit 1; }
done
! grep -qiE "error|lost" <<<"$out"
