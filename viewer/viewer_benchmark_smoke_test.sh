#!/usr/bin/env bash
# Smoke-runs the viewer benchmark on the small manifest (10 000 entries; it
# also runs under the sanitizers), a task query with and without args.index,
# and the text export: every variant runs,
# none errs.
set -euo pipefail
out="$("$1" --benchmark_filter='BM_List/10000/|BM_Task/10000/|BM_TextExport' --benchmark_min_time=0.01 2>&1)"
echo "$out"
for name in BM_List/10000/1 BM_List/10000/2 BM_List/10000/3 BM_List/10000/0 BM_Task/10000/1 \
    BM_Task/10000/0 BM_TextExport/0 BM_TextExport/1; do
  grep -q "$name" <<<"$out" || { echo "missing $name" >&2; exit 1; }
done
! grep -qiE "error|failed" <<<"$out"
