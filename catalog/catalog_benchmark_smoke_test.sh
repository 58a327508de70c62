#!/usr/bin/env bash
# The catalog benchmark runs end to end on a small catalog (its numbers are
# not looked at: a smoke test of the code path, not a measurement).
set -euo pipefail
"$1" --captures=2000 --benchmark_min_time=0.01 >/dev/null
