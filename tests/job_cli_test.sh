#!/usr/bin/env bash
# A job of many ranks as a user runs one on this machine: sim_run --ranks
# with a fault planted on one rank, then dump_viewer --job over the job's
# folder: the ranks, the first non-finite record, job against job, rank
# against rank, a crashed rank, missing ranks, and bad job values refused.
set -uo pipefail
sim_run="$(realpath "$1")"
viewer="$(realpath "$2")"
capture_server="$(realpath "$3")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
check() {  # check NAME EXPECTED_RC PATTERN -- command...
  local name="$1" want_rc="$2" pattern="$3"
  shift 4
  local out rc
  out="$("$@" 2>&1)"; rc=$?
  if [ "$rc" -ne "$want_rc" ] || ! grep -qE -- "$pattern" <<<"$out"; then
    echo "FAIL $name: rc=$rc (want $want_rc), output:"; echo "$out"; fails=$((fails + 1))
  else
    echo "ok   $name"
  fi
}
run=(--workload mixed_example --dump-args 2 --steps 5 --output-prefix "$tmp/out")

# 16 ranks, a NaN planted in rank 11's first task of step 3.
check "16 ranks" 0 "job: nan16, 16 ranks, 16 exited 0" -- \
  "$sim_run" "${run[@]}" --ranks 16 --job nan16 --fault 11:3:0:nan
for k in $(seq 0 15); do
  [ -s "$tmp/out/nan16/rank$k/args_dump/args_dump.json" ] \
    || { echo "FAIL 16 ranks: no capture for rank $k"; fails=$((fails + 1)); }
done
grep -q '"job": {"job": "nan16", "rank": 11, "world_size": 16' "$tmp/out/nan16/rank11/args_dump/args_dump.json" \
  || { echo "FAIL 16 ranks: rank 11's manifest does not name its job"; fails=$((fails + 1)); }
check "job listing" 0 "^ +11 +100 +[1-9][0-9]* " -- "$viewer" --job "$tmp/out/nan16"
check "first non-finite names rank 11, step 3" 0 \
  "first non-finite: rank 11, step 3  task 0x0000000100000015 before input arg 0.*nonfinite" -- \
  "$viewer" --job "$tmp/out/nan16" --first-nonfinite
check "its kernel" 0 "kernel: matmul" -- "$viewer" --job "$tmp/out/nan16" --first-nonfinite
check "ranks agree but rank 11" 1 "first divergence: rank 11, step 3  task 0x0000000100000015" -- \
  "$viewer" --job "$tmp/out/nan16" --compare-ranks 0
check "--ranks leaves rank 11 out" 0 "all match" -- \
  "$viewer" --job "$tmp/out/nan16" --compare-ranks 0 --ranks 1,2,12
check "--ranks lists only those" 0 "job .*: 2 ranks" -- "$viewer" --job "$tmp/out/nan16" --ranks 3,4

# Two jobs that differ in one scalar on one rank.
check "night 1" 0 "4 exited 0" -- "$sim_run" "${run[@]}" --ranks 4 --job night1
check "night 2" 0 "4 exited 0" -- "$sim_run" "${run[@]}" --ranks 4 --job night2 --fault 2:4:6:scalar=0.75
check "jobs compared" 1 "first divergence: rank 2, step 4  task 0x0000000100000022 before input arg 2" -- \
  "$viewer" --job "$tmp/out/night2" --compare-job "$tmp/out/night1"
check "a job against itself" 0 "4 ranks, 400 args compared, all match" -- \
  "$viewer" --job "$tmp/out/night1" --compare-job "$tmp/out/night1"

# A rank that crashes mid-job: reported, the other ranks whole.
check "crash on rank 1" 3 "job crash4 rank 1 .* exited with status 3" -- \
  "$sim_run" "${run[@]}" --ranks 4 --job crash4 --fault 1:2:1:crash
check "crash listed" 0 "^ +1 +[0-9]+ .* SIGSEGV " -- "$viewer" --job "$tmp/out/crash4"
check "others whole" 0 "^ +3 +100 +0 +0 +- " -- "$viewer" --job "$tmp/out/crash4"

# Missing ranks: a job whose rank 1 never ran.
check "rank 0 alone" 0 "records:" -- "$sim_run" "${run[@]}" --job gap --rank 0 --world-size 3
check "rank 2 alone" 0 "records:" -- "$sim_run" "${run[@]}" --job gap --rank 2 --world-size 3
check "missing rank" 0 "missing ranks .*: 1$" -- "$viewer" --job "$tmp/out/gap"

# Identity from the environment and launchers; flags win.
check "env identity" 0 "records:" -- env ARGSDUMP_JOB=envjob ARGSDUMP_RANK=1 "$sim_run" "${run[@]}"
[ -s "$tmp/out/envjob/rank1/args_dump/args_dump.json" ] || { echo "FAIL env identity: no rank1"; fails=$((fails + 1)); }
check "slurm identity" 0 "records:" -- env SLURM_JOB_ID=77 SLURM_PROCID=2 SLURM_NTASKS=4 "$sim_run" "${run[@]}"
grep -q '"job": {"job": "77", "rank": 2, "world_size": 4, "source": "launcher:slurm"}' \
  "$tmp/out/77/rank2/args_dump/args_dump.json" || { echo "FAIL slurm identity"; fails=$((fails + 1)); }
check "flag beats env" 0 "records:" -- env ARGSDUMP_JOB=envjob ARGSDUMP_RANK=1 "$sim_run" "${run[@]}" --rank 3
[ -s "$tmp/out/envjob/rank3/args_dump/args_dump.json" ] || { echo "FAIL flag beats env"; fails=$((fails + 1)); }
check "a rank run again goes to <job>_2" 0 "records:" -- env ARGSDUMP_JOB=envjob ARGSDUMP_RANK=1 "$sim_run" "${run[@]}"
[ -s "$tmp/out/envjob_2/rank1/args_dump/args_dump.json" ] || { echo "FAIL rerun: no envjob_2/rank1"; fails=$((fails + 1)); }

# Bad values: exit 2 naming the flag or the variable.
check "bad job name" 2 "--job: job name 'a/b' has '/' at byte 1" -- "$sim_run" --job a/b
check "rank past world size" 2 "rank 4 is not below the world size 4" -- "$sim_run" --job j --rank 4 --world-size 4
check "bad rank" 2 "--rank: rank 'x' is not a decimal number" -- "$sim_run" --job j --rank x
check "bad env rank" 2 "ARGSDUMP_RANK: rank '-1' is not a decimal number" -- env ARGSDUMP_JOB=j ARGSDUMP_RANK=-1 "$sim_run"
check "world size 0" 2 "--world-size: world size 0 is out of range" -- "$sim_run" --job j --world-size 0
check "ranks and rank" 2 "--rank: each rank of --ranks gets its own" -- "$sim_run" --ranks 2 --rank 1
check "ranks and world size" 2 "--world-size: 3 is not --ranks 2" -- "$sim_run" --ranks 2 --world-size 3
check "too many ranks" 2 "--ranks" -- "$sim_run" --ranks 5000
check "bad fault" 2 "--fault: 'x': not four parts" -- "$sim_run" --fault x
check "fault past the tasks" 2 "--fault: task 99: the workload mixed_example has" -- \
  "$sim_run" --workload mixed_example --fault 0:0:99:nan
check "viewer: no job folder" 2 "no such job folder" -- "$viewer" --job "$tmp/none"
check "viewer: not a job folder" 2 "no rank<k>/args_dump in it" -- "$viewer" --job "$tmp/out/nan16/rank0"
check "viewer: --ranks without --job" 2 "go with --job" -- "$viewer" --ranks 1
check "viewer: bad --compare-ranks" 2 "--compare-ranks 'x'" -- "$viewer" --job "$tmp/out/nan16" --compare-ranks x
check "viewer: two questions" 2 "one at a time" -- "$viewer" --job "$tmp/out/nan16" --compare-ranks 0 --first-nonfinite

# The same job streamed to a capture service: its rpcs answer, over gRPC
# (dump_viewer --server) and HTTP.
"$capture_server" --listen 127.0.0.1:0 --http_listen 127.0.0.1:0 --root "$tmp/srv" \
  > "$tmp/srv.out" 2> "$tmp/srv.err" &
srv_pid=$!
timeout 60 tail -n +1 -f "$tmp/srv.out" | grep -m1 -q "http on"
addr=$(sed -n 's/^capture_server listening on \([^ ]*\) .*/\1/p' "$tmp/srv.out")
http=$(sed -n 's/^capture_server http on \(.*\)$/\1/p' "$tmp/srv.out")
check "16 ranks streamed" 0 "job: s16, 16 ranks, 16 exited 0" -- \
  "$sim_run" "${run[@]}" --ranks 16 --job s16 --fault 11:3:0:nan --capture-server "$addr"
check "first non-finite over gRPC" 0 \
  "first non-finite: rank 11, step 3  task 0x0000000100000015 before input arg 0.*nonfinite" -- \
  "$viewer" --server "$addr" --job s16 --first-nonfinite
check "its kernel over gRPC" 0 "kernel: matmul; capture $addr/s16.rank11" -- \
  "$viewer" --server "$addr" --job s16 --first-nonfinite
check "ranks over gRPC" 1 "first divergence: rank 11, step 3  task 0x0000000100000015" -- \
  "$viewer" --server "$addr" --job s16 --compare-ranks 0
check "listing over gRPC" 0 "^ +11 +100 +[1-9]" -- "$viewer" --server "$addr" --job s16
check "first non-finite over HTTP" 0 '"rank": ?11.*"capture": ?"s16.rank11"' -- \
  curl -sS --fail "${http}v1/jobs/s16/first_nonfinite"
check "the job over HTTP" 0 '"ranksPresent": ?16|"ranks_present": ?16' -- curl -sS --fail "${http}v1/jobs/s16"
check "the same rank twice is refused" 0 "refused the capture .*capture s16.rank3 exists" -- \
  "$sim_run" "${run[@]}" --job s16 --rank 3 --world-size 16 --capture-server "$addr"
kill "$srv_pid"; wait "$srv_pid" 2>/dev/null

if [ "$fails" -ne 0 ]; then echo "$fails failed"; exit 1; fi
echo "all passed"
