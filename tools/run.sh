#!/usr/bin/env bash
# The main job, from a fresh machine: installs the packages, builds sim_run,
# and runs a workload with the args dump at level 2 (full) end to end on the
# embedded local store. Extra arguments go to sim_run, e.g.
#   tools/run.sh --workload mixed_example --platform a5sim
#   tools/run.sh --workload my_workload.json --dump-args 3
# The capture lands in outputs/<workload>_<YYYYMMDD_HHMMSS>/args_dump/.
set -euo pipefail
cd "$(dirname "$0")/.."
bash tools/setup.sh
exec bazel run -c opt //apps/sim_run:sim_run -- --dump-args 2 "$@"
