#!/usr/bin/env bash
# Both builds of the runtime run in the one benchmark binary.
set -euo pipefail
out="$("$1" --benchmark_min_time=0.01 2>&1)"
echo "$out"
grep -q BM_SimLevel0 <<<"$out"
grep -q BM_SimDumpCompiledOut <<<"$out"
