#!/usr/bin/env bash
# Smoke-runs the object store benchmark at its smallest sizes: every
# benchmark runs to the end with its counters and none reports an error.
set -euo pipefail
out="$("$1" --smoke 2>&1)"
echo "$out"
for name in BM_IngestVsPut/0 BM_IngestVsPut/1 BM_AckLatency/kind:0/group_commit_ms:50 \
    BM_AckLatency/kind:1/group_commit_ms:0 BM_QueryByTask/cold:1 BM_QueryByTask/cold:0 \
    BM_QueryByTaskWarming BM_ReadPayload; do
  grep -q "^$name" <<<"$out"
done
grep -q "ratio=" <<<"$out"
grep -q "ack_p99_ms=" <<<"$out"
grep -q "read_payload_p50_ms=" <<<"$out"
grep -q "fetching_pct=" <<<"$out"
! grep -qiE "error|differs|wrong answer|short read" <<<"$out"
