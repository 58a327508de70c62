#!/usr/bin/env bash
# sim_run as a user runs it: good runs, and bad input that must be refused
# with a message naming the flag, the file or the field.
set -uo pipefail
sim_run="$(realpath "$1")"
forty_tasks="$(realpath "$2")"  # a workload of 40 relu tasks, two records each
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

check "level 2 run" 0 "records: 6 " -- "$sim_run" --dump-args 2 --output-prefix "$tmp/full"
[ -s "$tmp/full/args_dump/args_dump.json" ] && [ -s "$tmp/full/args_dump/args.bin" ] \
  || { echo "FAIL level 2 run: files missing"; fails=$((fails + 1)); }
# Every capture carries the built-in kernel table: names, types, directions, dtypes.
grep -q '{"func_id": 0, "name": "add", "type": "elementwise", "signature": \[{"direction": "in", "dtype": "FLOAT32"}' \
  "$tmp/full/args_dump/args_dump.json" \
  && grep -q '{"func_id": 21, "name": "crash_wait", "type": "test"' "$tmp/full/args_dump/args_dump.json" \
  || { echo "FAIL level 2 run: no kernel table in the manifest"; fails=$((fails + 1)); }
check "bare --dump-args is level 1" 0 "dump level 1" -- "$sim_run" --dump-args --output-prefix "$tmp/partial"
grep -q '"dump_args_level": 1' "$tmp/partial/args_dump/args_dump.json" \
  || { echo "FAIL bare --dump-args: manifest level"; fails=$((fails + 1)); }
check "level 0 writes nothing" 0 "dump: off" -- "$sim_run" --dump-args 0 --output-prefix "$tmp/off"
[ ! -e "$tmp/off" ] || { echo "FAIL level 0 created $tmp/off"; fails=$((fails + 1)); }
check "a5sim" 0 "on a5sim" -- "$sim_run" --dump-args 3 --platform a5sim --workload mixed_example --output-prefix "$tmp/a5"
check "bad level warns and runs at the next entry's level" 0 \
  "WARNING: the command line: --dump-args: '7' is not a dump level.*falls back to the next entry \(ARGSDUMP_LEVEL" -- \
  env ARGSDUMP_LEVEL=2 "$sim_run" --dump-args 7 --output-prefix "$tmp/bad_level"
grep -q '"dump_args_level": 2' "$tmp/bad_level/args_dump/args_dump.json" \
  || { echo "FAIL bad level: not the environment's level 2"; fails=$((fails + 1)); }
check "a level that is no number warns too" 0 "--dump-args: 'x' is not a dump level" -- \
  "$sim_run" --dump-args=x --output-prefix "$tmp/bad_level_x"
check "bad platform" 2 "--platform: 'a9'" -- "$sim_run" --platform a9
check "bad arena" 2 "--arena-bytes: '0' is under the minimum of 64B" -- "$sim_run" --dump-args 2 --arena-bytes 0
check "unknown workload" 2 "no built-in workload 'nope'" -- "$sim_run" --workload nope
check "missing file" 2 "workload file $tmp/missing.json: cannot open" -- "$sim_run" --workload "$tmp/missing.json"
printf '{"buffers": [{"name": "a", "dtype": "FLOAT32", "shape": [4]}],\n "tasks": [{"func": "relu", "args": [{"tensor": "q", "role": "input"}]}]}' > "$tmp/bad_ref.json"
check "unknown tensor" 2 "bad_ref.json: tasks\[0\]\.args\[0\]\.tensor: no buffer or view named 'q'" -- "$sim_run" --workload "$tmp/bad_ref.json"
printf '{"buffers": [{"name": "a", "dtype": "FLOAT99", "shape": [4]}]}' > "$tmp/bad_dtype.json"
check "bad dtype" 2 "buffers\[0\]\.dtype: 'FLOAT99'" -- "$sim_run" --workload "$tmp/bad_dtype.json"
printf '{"buffers": [{"name": "a", "dtype": "FLOAT32", "shape": [4], "colour": 1}]}' > "$tmp/bad_field.json"
check "unknown field" 2 "bad_field.json: not a valid workload.*colour" -- "$sim_run" --workload "$tmp/bad_field.json"
printf '{"buffers": [' > "$tmp/torn.json"
check "torn json" 2 "torn.json: not a valid workload" -- "$sim_run" --workload "$tmp/torn.json"
printf '{"name": "filetask", "buffers": [{"name": "a", "dtype": "INT32", "shape": [2, 3], "init": {"values": [1, -2, 3, -4, 5, -6]}},\n {"name": "b", "dtype": "INT32", "shape": [3, 2]}],\n "views": [{"name": "at", "buffer": "a", "shape": [3, 2], "strides": [1, 3]}],\n "tasks": [{"func": "copy", "args": [{"tensor": "at", "role": "input"}, {"tensor": "b", "role": "output"}]}]}' > "$tmp/good.json"
check "workload file" 0 "1 of 1 tasks" -- "$sim_run" --workload "$tmp/good.json" --dump-args 2 --output-prefix "$tmp/file"
grep -q '"strides": \[1, 3\]' "$tmp/file/args_dump/args_dump.json" \
  || { echo "FAIL workload file: view geometry not in manifest"; fails=$((fails + 1)); }
check "hang returns non-zero with a capture" 1 "scheduler timeout" -- \
  env SIMPLER_SCHEDULER_TIMEOUT_MS=200 "$sim_run" --workload hang_example --dump-args 2 --output-prefix "$tmp/hang"
grep -q '"in_flight_snapshot": true' "$tmp/hang/args_dump/args_dump.json" \
  || { echo "FAIL hang: no in-flight snapshot"; fails=$((fails + 1)); }

# A run that died before its manifest: the journal brings every record back
# (--keep-journal keeps the journal of a finished run to stand for one).
"$sim_run" --dump-args 2 --keep-journal --output-prefix "$tmp/died" >/dev/null 2>&1
rm "$tmp/died/args_dump/args_dump.json"
check "recover" 0 "capture: $tmp/died/args_dump/args_dump.json" -- "$sim_run" --recover "$tmp/died/args_dump"
grep -q '"total_args": 6' "$tmp/died/args_dump/args_dump.json" \
  || { echo "FAIL recover: manifest not rebuilt"; fails=$((fails + 1)); }
grep -q '"name": "softmax", "type": "activation"' "$tmp/died/args_dump/args_dump.json" \
  || { echo "FAIL recover: the kernel table was not kept"; fails=$((fails + 1)); }
check "recover nothing" 2 "--recover $tmp/nothing: .*no journal" -- "$sim_run" --recover "$tmp/nothing"

# Dump control: flags > ARGSDUMP_* > --dump-config; mistakes warn, never abort.
check "mode from the environment" 0 "records: 2 " -- \
  env ARGSDUMP_MODE=output "$sim_run" --dump-args 2 --output-prefix "$tmp/mode_out"
! grep -q '"before_dispatch",' "$tmp/mode_out/args_dump/args_dump.json" \
  || { echo "FAIL mode output: before_dispatch records"; fails=$((fails + 1)); }
check "bad mode warns and runs" 0 "WARNING: environment: ARGSDUMP_MODE='sideways' is not valid" -- \
  env ARGSDUMP_MODE=sideways "$sim_run" --dump-args 2 --output-prefix "$tmp/mode_bad"
printf '{"level": 2, "funcs": "add_scalar", "colour": 1}' > "$tmp/dump.json"
check "config file, env over it" 0 "ERROR: level: the environment sets 3 and the config file sets 2; using the environment's" -- \
  env ARGSDUMP_LEVEL=3 "$sim_run" --dump-config "$tmp/dump.json" --output-prefix "$tmp/cfg"
grep -q '"dump_args_level": 3' "$tmp/cfg/args_dump/args_dump.json" \
  || { echo "FAIL config file: level not 3"; fails=$((fails + 1)); }
check "config file warns about unknown keys" 0 'colour.*not a dump setting' -- \
  "$sim_run" --dump-config "$tmp/dump.json" --output-prefix "$tmp/cfg2"
check "funcs from the config file" 0 "records: 3 " -- \
  "$sim_run" --dump-config "$tmp/dump.json" --output-prefix "$tmp/cfg3"
check "missing config file warns and runs" 0 "nope.json: cannot read it" -- \
  "$sim_run" --dump-args 2 --dump-config "$tmp/nope.json" --output-prefix "$tmp/cfg4"
check "steps" 0 "records: 18 " -- "$sim_run" --dump-args 2 --steps 3 --output-prefix "$tmp/steps"
grep -q '"step": 2' "$tmp/steps/args_dump/args_dump.json" \
  || { echo "FAIL steps: no step 2 in the manifest"; fails=$((fails + 1)); }
check "step list from the environment" 0 "records: 12 " -- \
  env ARGSDUMP_STEPS="0|2" "$sim_run" --dump-args 2 --steps 3 --output-prefix "$tmp/steps2"
check "bad steps flag" 2 "--steps: '0' is under the minimum of 1" -- "$sim_run" --steps 0
printf '{"name": "failing", "buffers": [{"name": "a", "dtype": "FLOAT32", "shape": [8], "init": {"fill": 2}},\n {"name": "b", "dtype": "FLOAT32", "shape": [8]}, {"name": "c", "dtype": "FLOAT32", "shape": [8]}],\n "tasks": [{"func": "relu", "args": [{"tensor": "a", "role": "input"}, {"tensor": "b", "role": "output"}]},\n {"func": "fail", "args": [{"tensor": "b", "role": "input"}, {"tensor": "c", "role": "output"}]},\n {"func": "relu", "args": [{"tensor": "c", "role": "input"}, {"tensor": "a", "role": "output"}]}]}' > "$tmp/failing.json"
check "a failing kernel stops the run with an exception dump" 1 "exception dump: $tmp/exc/exception_dump/exception_failing_fail_test_0_[0-9]+_0x0000000100000001 " -- \
  "$sim_run" --workload "$tmp/failing.json" --dump-args 2 --output-prefix "$tmp/exc"
[ -s "$tmp/exc/exception_dump/"exception_failing_fail_test_0_*_0x0000000100000001/context.json ] \
  || { echo "FAIL exception dump: no context.json"; fails=$((fails + 1)); }
grep -q '"task_id": "0x0000000100000000"' "$tmp/exc/args_dump/args_dump.json" \
  || { echo "FAIL exception dump: the records before the failure are not in the manifest"; fails=$((fails + 1)); }
! grep -q '"task_id": "0x0000000100000002"' "$tmp/exc/args_dump/args_dump.json" \
  || { echo "FAIL exception dump: a task after the failure ran"; fails=$((fails + 1)); }

# Bad flags are exit 2 naming the flag (absl would exit 1, the code for a
# hang); a directory for a workload says so; buffers that cannot be had are
# named with their size.
check "unknown flag" 2 "--no_such_flag=1: no such flag" -- "$sim_run" --no_such_flag=1
check "bad flag value" 2 "--schedulers: 'many'" -- "$sim_run" --schedulers=many
check "flag without its value" 2 "--workers needs a value" -- "$sim_run" --workers
check "a negative retry deadline" 2 "--capture-retry-deadline-ms: '-1' is negative" -- "$sim_run" --capture-retry-deadline-ms=-1
# A capture name the service would refuse is a WARNING and a name it
# takes is used; a service that cannot be reached (nothing listens on port
# 9) a WARNING naming where the capture went instead, and the run goes on.
check "capture name leaving the root" 0 "WARNING: capture name '../x' cannot be used on the capture service \(capture name may only hold \[A-Za-z0-9._-\]; character 47" -- \
  "$sim_run" --dump-args 2 --capture-server 127.0.0.1:9 --capture-connect-timeout-ms 100 --capture-name ../x --output-prefix "$tmp/name1"
check "capture name .." 0 "WARNING: capture name '..' cannot be used" -- \
  "$sim_run" --dump-args 2 --capture-server 127.0.0.1:9 --capture-connect-timeout-ms 100 --capture-name .. --output-prefix "$tmp/name2"
check "capture name too long" 0 "capture name must be 1-128 characters, got 129\); the capture is named" -- \
  "$sim_run" --dump-args 2 --capture-server 127.0.0.1:9 --capture-connect-timeout-ms 100 --capture-name "$(printf 'a%.0s' $(seq 129))" --output-prefix "$tmp/name3"
check "a service that cannot be reached: a local capture, named" 0 \
  "WARNING: capture service 127.0.0.1:9 cannot be reached .*the capture is kept locally in $tmp/name4/args_dump" -- \
  "$sim_run" --dump-args 2 --capture-server 127.0.0.1:9 --capture-connect-timeout-ms 100 --output-prefix "$tmp/name4"
grep -q '"total_args": 6' "$tmp/name4/args_dump/args_dump.json" \
  || { echo "FAIL unreachable service: no local capture"; fails=$((fails + 1)); }
check "workload is a directory" 2 "workload file $tmp: is a directory" -- "$sim_run" --workload "$tmp"
printf '{"name": "huge", "buffers": [{"name": "big", "dtype": "FLOAT64", "shape": [65535, 65535]}, {"name": "also", "dtype": "FLOAT64", "shape": [65535, 65535]}], "tasks": []}' > "$tmp/huge.json"
check "buffers that cannot be allocated" 2 "buffers\[0\] 'big': FLOAT64 4294836225 elements: device buffer: out of memory for 34358689856 bytes" -- \
  "$sim_run" --workload "$tmp/huge.json"

# --recover: 0 when nothing acknowledged was lost, 1 when a damaged journal
# cost entries (named), 2 when nothing can be recovered.
# A finished capture drops its journal, unless --keep-journal (these keep it
# to stand for a run that died before its manifest).
"$sim_run" --dump-args 2 --workload mixed_example --output-prefix "$tmp/nojournal" >/dev/null 2>&1
if [ -e "$tmp/nojournal/args_dump/args.journal" ] || [ ! -e "$tmp/nojournal/args_dump/args.index" ]; then
  echo "FAIL a finished capture: args.journal left or args.index missing"; fails=$((fails + 1))
fi
"$sim_run" --dump-args 2 --workload mixed_example --keep-journal --output-prefix "$tmp/rec" >/dev/null 2>&1
[ -s "$tmp/rec/args_dump/args.journal" ] || { echo "FAIL --keep-journal: no args.journal"; fails=$((fails + 1)); }
cmp -s "$tmp/rec/args_dump/args.bin" "$tmp/nojournal/args_dump/args.bin" ||
  [ "$(wc -c < "$tmp/rec/args_dump/args.bin")" = "$(wc -c < "$tmp/nojournal/args_dump/args.bin")" ] ||
  { echo "FAIL --keep-journal changed args.bin"; fails=$((fails + 1)); }
cp -r "$tmp/rec" "$tmp/rec_clean"
rm -f "$tmp/rec_clean/args_dump/args_dump.json" "$tmp/rec_clean/args_dump/args.index"
check "recover a whole journal" 0 "^capture: $tmp/rec_clean/args_dump/args_dump.json" -- \
  "$sim_run" --recover "$tmp/rec_clean/args_dump"
rm -f "$tmp/rec/args_dump/args_dump.json" "$tmp/rec/args_dump/args.index"
size=$(stat -c %s "$tmp/rec/args_dump/args.journal")
printf '\xff' | dd of="$tmp/rec/args_dump/args.journal" bs=1 seek=$((size / 2)) conv=notrunc status=none
check "recover past a damaged entry" 1 "recovery: kept [0-9]+ records; dropped [0-9]+ journal bytes at byte" -- \
  "$sim_run" --recover "$tmp/rec/args_dump"
grep -q '"recovery": {"records_kept"' "$tmp/rec/args_dump/args_dump.json" \
  || { echo "FAIL recover: the manifest does not say what was dropped"; fails=$((fails + 1)); }
mkdir -p "$tmp/rec_none/args_dump" && printf 'junk' > "$tmp/rec_none/args_dump/args.journal"
check "recover with no capture header" 2 "no capture header" -- "$sim_run" --recover "$tmp/rec_none/args_dump"

# How the run reports problems. A user configuration error is a
# WARNING with the fix and a fallback; an internal failure an ERROR and a
# run without the dump; losses and kernel failures are graded log lines.
mkdir -p "$tmp/cwd"
check "an unwritable --output-prefix falls back to the default" 0 \
  "WARNING: the command line: path='/proc/argsdump_x' is not valid: /proc is a kernel file system" -- \
  env -C "$tmp/cwd" "$sim_run" --dump-args 2 --output-prefix /proc/argsdump_x
ls "$tmp/cwd"/outputs/vector_example_*/args_dump/args_dump.json >/dev/null 2>&1 \
  || { echo "FAIL unwritable prefix: no capture at the default"; fails=$((fails + 1)); }
check "an unwritable ARGSDUMP_PATH falls back to the default" 0 \
  "WARNING: environment: ARGSDUMP_PATH='/proc/argsdump_y' is not valid" -- \
  env -C "$tmp/cwd" ARGSDUMP_PATH=/proc/argsdump_y "$sim_run" --dump-args 2
check "a path below a file falls back too" 0 "is not a folder|Not a directory" -- \
  env -C "$tmp/cwd" "$sim_run" --dump-args 2 --output-prefix "$tmp/good.json/below"
check "an unknown kernel name warns and names the known ones" 0 \
  "WARNING: funcs: 'nosuchkernel' is no kernel's name or type.*every kernel is dumped.*Known kernels.*add_scalar" -- \
  env ARGSDUMP_FUNCS=nosuchkernel "$sim_run" --dump-args 2 --output-prefix "$tmp/funcs_unknown"
grep -q '"total_args": 6' "$tmp/funcs_unknown/args_dump/args_dump.json" \
  || { echo "FAIL unknown kernel: the run did not dump everything"; fails=$((fails + 1)); }
check "an unknown name beside a known one is left out" 0 "'nosuch' is no kernel's name or type.*it is left out" -- \
  env ARGSDUMP_FUNCS=nosuch,add_scalar "$sim_run" --dump-args 2 --output-prefix "$tmp/funcs_mixed"
# Dump buffers that cannot be had: an ERROR, and the workload still runs.
# (Not under a sanitizer: its shadow memory does not fit under ulimit -v.)
[ -n "${ASAN_OPTIONS:-}${TSAN_OPTIONS:-}" ] || for pattern in "ERROR: the dump buffers cannot be allocated .*Cannot allocate memory.*the run goes on without the dump" \
               "^dump: off \(its buffers could not be allocated"; do
  check "dump buffers that cannot be allocated: ERROR, run without dump" 0 "$pattern" -- \
    bash -c 'ulimit -v 6000000 && exec "$0" --dump-args 2 --arena-bytes 1099511627776 --output-prefix "$1"' \
    "$sim_run" "$tmp/no_region"
done
[ ! -e "$tmp/no_region/args_dump" ] || { echo "FAIL no region: a capture was written"; fails=$((fails + 1)); }
check "a failing kernel is an ERROR line" 1 "\[argsdump sim\] ERROR: task 0x0000000100000001 kernel 'fail'" -- \
  "$sim_run" --workload "$tmp/failing.json" --dump-args 2 --output-prefix "$tmp/exc_err"
check "a hang is an ERROR line" 1 "\[argsdump sim\] ERROR: scheduler timeout" -- \
  env SIMPLER_SCHEDULER_TIMEOUT_MS=200 "$sim_run" --workload hang_example --dump-args 2 --output-prefix "$tmp/hang_err"
check "the flush line" 0 "INFO: dump flush: 4 recording threads wrote 6 records; none dropped or truncated" -- \
  "$sim_run" --dump-args 2 --output-prefix "$tmp/flush_line"
check "truncation is a WARNING at flush" 0 "WARNING: dump flush: thread [0-9]+ cut [0-9]+ tensors larger than the arena" -- \
  "$sim_run" --dump-args 2 --arena-bytes 64 --output-prefix "$tmp/cut"
# A host that cannot write (args.bin a FIFO nobody reads yet: the
# collector blocks opening it): the device drops after its wait bound, and
# the flush says so per thread, as an ERROR, before the host is back.
mkdir -p "$tmp/stall/args_dump" && mkfifo "$tmp/stall/args_dump/args.bin"
# stall.err exists before the run starts, so tail follows it from its first
# line (the background redirect creates it only once that shell gets there).
: > "$tmp/stall.err"
"$sim_run" --dump-args 2 --workload "$forty_tasks" --schedulers 2 --records-per-buffer 1 \
  --buffers-per-thread 1 --ready-queue-depth 1 --arena-bytes 1024 --wait-bound-ms 20 --output-prefix "$tmp/stall" \
  > "$tmp/stall.out" 2> "$tmp/stall.err" &
stall_pid=$!
# The flush line comes once the device gave up on the host (at most 120 s).
timeout 120 tail -n +1 -f "$tmp/stall.err" | grep -m1 -q "INFO: dump flush: 2 recording threads"
saw_flush=${PIPESTATUS[1]}
timeout 120 cat "$tmp/stall/args_dump/args.bin" > /dev/null  # the host can write again
wait "$stall_pid"; stall_rc=$?
if [ "$saw_flush" -ne 0 ] || [ "$stall_rc" -ne 0 ] || ! grep -qE "ERROR: dump flush: thread [01] wrote [0-9]+ records and lost [0-9]+ \((arena ack timeout|free queue empty|ready queue full)" "$tmp/stall.err" \
   || ! grep -qE "^losses: dropped [1-9]" "$tmp/stall.out"; then
  echo "FAIL dropped records: rc=$stall_rc, flush line seen while held: $([ "$saw_flush" -eq 0 ] && echo yes || echo no)"
  cat "$tmp/stall.err" "$tmp/stall.out"; fails=$((fails + 1))
else
  echo "ok   dropped records are an ERROR line per thread at flush"
fi

# Default prefixes never collide: the folders of this second and the next
# few are taken (by "other runs"); the run takes a free _k sibling.
mkdir -p "$tmp/cwd2/outputs"
now=$(date +%s)
for d in 0 1 2 3 4 5; do
  mkdir -p "$tmp/cwd2/outputs/vector_example_$(date -d "@$((now + d))" +%Y%m%d_%H%M%S)"
done
check "a default prefix taken by another run" 0 "^capture: outputs/vector_example_[0-9]+_[0-9]+_2/args_dump/args_dump.json" -- \
  env -C "$tmp/cwd2" "$sim_run" --dump-args 2
pids=()
for i in 1 2 3 4; do
  env -C "$tmp/cwd2" "$sim_run" --dump-args 2 > "$tmp/cwd2/run_$i.out" 2>&1 & pids+=($!)
done
for pid in "${pids[@]}"; do wait "$pid" || { echo "FAIL concurrent default prefixes: a run failed"; fails=$((fails + 1)); }; done
n=$(grep -h "^capture: " "$tmp/cwd2"/run_*.out | sort -u | wc -l)
[ "$n" -eq 4 ] || { echo "FAIL concurrent default prefixes: $n distinct captures of 4"; cat "$tmp/cwd2"/run_*.out; fails=$((fails + 1)); }
for f in $(grep -h "^capture: " "$tmp/cwd2"/run_*.out | sed 's/^capture: //'); do
  grep -q '"total_args": 6' "$tmp/cwd2/$f" || { echo "FAIL concurrent default prefixes: $f"; fails=$((fails + 1)); }
done
# A level-0 run claims no folder; a run that captured nothing leaves none.
mkdir -p "$tmp/cwd3"
check "level 0 with the default prefix" 0 "dump: off" -- env -C "$tmp/cwd3" "$sim_run" --dump-args 0
check "level 1 with nothing marked leaves no folder" 0 "capture: none" -- \
  env -C "$tmp/cwd3" "$sim_run" --dump-args 1 --workload "$tmp/good.json"
[ -z "$(ls -A "$tmp/cwd3/outputs" 2>/dev/null)" ] || { echo "FAIL nothing captured: a folder was left"; ls -R "$tmp/cwd3"; fails=$((fails + 1)); }

# Every entry point of a dump setting is honoured: the flag, ARGSDUMP_* and
# the config file (one resolution, the SDK's); an output prefix that holds
# a capture, from any of them, gets a fresh sibling with a WARNING.
for entry in flag env file; do
  p="$tmp/taken_$entry"
  "$sim_run" --dump-args 2 --output-prefix "$p" >/dev/null 2>&1
  case $entry in
    flag) run=("$sim_run" --dump-args 2 --output-prefix "$p") ;;
    env) run=(env ARGSDUMP_PATH="$p" "$sim_run" --dump-args 2) ;;
    file) printf '{"path": "%s"}' "$p" > "$tmp/path_$entry.json"
          run=("$sim_run" --dump-args 2 --dump-config "$tmp/path_$entry.json") ;;
  esac
  check "an output prefix holding a capture ($entry): a fresh sibling" 0 \
    "WARNING: path: $p/args_dump holds a capture already; this run's capture goes to ${p}_2/args_dump instead" -- "${run[@]}"
  grep -q '"total_args": 6' "${p}_2/args_dump/args_dump.json" \
    || { echo "FAIL prefix taken ($entry): no capture in ${p}_2"; fails=$((fails + 1)); }
  case $entry in
    flag) run=("$sim_run" --dump-args 2 --labels "via=$entry" --output-prefix "$tmp/labels_$entry") ;;
    env) run=(env ARGSDUMP_LABELS="via=$entry" "$sim_run" --dump-args 2 --output-prefix "$tmp/labels_$entry") ;;
    file) printf '{"labels": "via=%s"}' "$entry" > "$tmp/labels_$entry.json"
          run=("$sim_run" --dump-args 2 --dump-config "$tmp/labels_$entry.json" --output-prefix "$tmp/labels_$entry") ;;
  esac
  check "labels ($entry)" 0 "records: 6 " -- "${run[@]}"
  grep -q "\"labels\": {\"via\": \"$entry\"}" "$tmp/labels_$entry/args_dump/args_dump.json" \
    || { echo "FAIL labels ($entry): not in the manifest"; fails=$((fails + 1)); }
done

# A capture service, set through each entry point, gets the capture.
"$capture_server" --listen 127.0.0.1:0 --root "$tmp/srv" > "$tmp/srv.out" 2> "$tmp/srv.err" &
srv_pid=$!
timeout 60 tail -n +1 -f "$tmp/srv.out" | grep -m1 -q "listening on"
addr=$(sed -n 's/^capture_server listening on \([^ ]*\) .*/\1/p' "$tmp/srv.out")
for entry in flag env file; do
  case $entry in
    flag) run=("$sim_run" --dump-args 2 --capture-server "$addr") ;;
    env) run=(env ARGSDUMP_CAPTURE_SERVER="$addr" "$sim_run" --dump-args 2) ;;
    file) printf '{"capture_server": "%s"}' "$addr" > "$tmp/server_$entry.json"
          run=("$sim_run" --dump-args 2 --dump-config "$tmp/server_$entry.json") ;;
  esac
  check "capture_server ($entry) streams to the service" 0 "^capture: $addr/via_$entry on the capture service \(6 records sent, 6 acknowledged" -- \
    "${run[@]}" --capture-name "via_$entry" --output-prefix "$tmp/stream_$entry"
  [ -s "$tmp/srv/via_$entry/args_dump/args_dump.json" ] && [ ! -e "$tmp/stream_$entry/args_dump" ] \
    || { echo "FAIL capture_server ($entry): not on the service, or written locally"; fails=$((fails + 1)); }
done
# A name taken on the service: _2, with a WARNING naming both.
check "a capture name taken on the service" 0 "WARNING: capture service $addr: capture name 'via_flag' is taken; the capture is named 'via_flag_2' instead" -- \
  "$sim_run" --dump-args 2 --capture-server "$addr" --capture-name via_flag --output-prefix "$tmp/stream_again"
[ -s "$tmp/srv/via_flag_2/args_dump/args_dump.json" ] \
  || { echo "FAIL taken name: no via_flag_2 on the service"; fails=$((fails + 1)); }
kill "$srv_pid"; wait "$srv_pid" 2>/dev/null

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
