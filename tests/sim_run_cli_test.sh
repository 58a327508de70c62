#!/usr/bin/env bash
# sim_run as a user runs it: good runs, and bad input that must be refused
# with a message naming the flag, the file or the field.
set -uo pipefail
sim_run="$1"
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
check "bare --dump-args is level 1" 0 "dump level 1" -- "$sim_run" --dump-args --output-prefix "$tmp/partial"
grep -q '"dump_args_level": 1' "$tmp/partial/args_dump/args_dump.json" \
  || { echo "FAIL bare --dump-args: manifest level"; fails=$((fails + 1)); }
check "level 0 writes nothing" 0 "dump: off" -- "$sim_run" --dump-args 0 --output-prefix "$tmp/off"
[ ! -e "$tmp/off" ] || { echo "FAIL level 0 created $tmp/off"; fails=$((fails + 1)); }
check "a5sim" 0 "on a5sim" -- "$sim_run" --dump-args 3 --platform a5sim --workload mixed_example --output-prefix "$tmp/a5"
check "bad level" 2 "--dump-args: 7" -- "$sim_run" --dump-args 7
check "bad platform" 2 "--platform: 'a9'" -- "$sim_run" --platform a9
check "bad arena" 2 "--arena-bytes: 0" -- "$sim_run" --dump-args 2 --arena-bytes 0
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

# A run that died before its manifest: the journal brings every record back.
cp -r "$tmp/full" "$tmp/died"
rm "$tmp/died/args_dump/args_dump.json"
check "recover" 0 "capture: $tmp/died/args_dump/args_dump.json" -- "$sim_run" --recover "$tmp/died/args_dump"
grep -q '"total_args": 6' "$tmp/died/args_dump/args_dump.json" \
  || { echo "FAIL recover: manifest not rebuilt"; fails=$((fails + 1)); }
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
check "bad steps flag" 2 "--steps: 0" -- "$sim_run" --steps 0
printf '{"name": "failing", "buffers": [{"name": "a", "dtype": "FLOAT32", "shape": [8], "init": {"fill": 2}},\n {"name": "b", "dtype": "FLOAT32", "shape": [8]}, {"name": "c", "dtype": "FLOAT32", "shape": [8]}],\n "tasks": [{"func": "relu", "args": [{"tensor": "a", "role": "input"}, {"tensor": "b", "role": "output"}]},\n {"func": "fail", "args": [{"tensor": "b", "role": "input"}, {"tensor": "c", "role": "output"}]},\n {"func": "relu", "args": [{"tensor": "c", "role": "input"}, {"tensor": "a", "role": "output"}]}]}' > "$tmp/failing.json"
check "a failing kernel stops the run with an exception dump" 1 "exception dump: $tmp/exc/exception_dump/exception_failing_fail_0_[0-9]+_0x0000000100000001 " -- \
  "$sim_run" --workload "$tmp/failing.json" --dump-args 2 --output-prefix "$tmp/exc"
[ -s "$tmp/exc/exception_dump/"exception_failing_fail_0_*_0x0000000100000001/context.json ] \
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
check "workload is a directory" 2 "workload file $tmp: is a directory" -- "$sim_run" --workload "$tmp"
printf '{"name": "huge", "buffers": [{"name": "big", "dtype": "FLOAT64", "shape": [65535, 65535]}, {"name": "also", "dtype": "FLOAT64", "shape": [65535, 65535]}], "tasks": []}' > "$tmp/huge.json"
check "buffers that cannot be allocated" 2 "buffers\[0\] 'big': FLOAT64 4294836225 elements: device buffer: out of memory for 34358689856 bytes" -- \
  "$sim_run" --workload "$tmp/huge.json"

# --recover: 0 when nothing acknowledged was lost, 1 when a damaged journal
# cost entries (named), 2 when nothing can be recovered.
"$sim_run" --dump-args 2 --workload mixed_example --output-prefix "$tmp/rec" >/dev/null 2>&1
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

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
