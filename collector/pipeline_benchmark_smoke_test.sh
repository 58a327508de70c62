#!/usr/bin/env bash
# Smoke-runs the pipeline benchmark briefly: every benchmark runs, none errs.
set -euo pipefail
out="$("$1" --benchmark_min_time=0.01 --benchmark_filter='Pipeline|RawWrite|SimJob' 2>&1)"
echo "$out"
for name in BM_PipelineMetadata BM_PipelinePayload BM_RawWrite BM_SimJob/0 BM_SimJob/2; do
  grep -q "$name" <<<"$out" || { echo "missing $name" >&2; exit 1; }
done
! grep -qiE "error|lost" <<<"$out"
