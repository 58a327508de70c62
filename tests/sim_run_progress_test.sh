#!/usr/bin/env bash
# sim_run's progress line: on stderr only, on a terminal by default,
# --progress / --noprogress to force; stdout is the same either way.
set -uo pipefail
sim_run="$(realpath "$1")"
forty_tasks="$(realpath "$2")"  # a workload of 40 relu tasks, two records each
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
# tools/progress's line: each counter with its rate, then the time.
rate='\([0-9.]+ ?(B|KiB|MiB|GiB)?/s\)'
line_re="sim_run: [0-9]+/[0-9]+ tasks done $rate, [0-9]+ records $rate, [0-9.]+ (B|KiB|MiB) $rate, [0-9.]+ s"
# Polls `$@` until it holds (at most 120 s): a wait for an event.
wait_until() {
  local i
  for i in $(seq 1 2400); do
    "$@" && return 0
    sleep 0.05
  done
  return 1
}
# stdout without what differs between two runs: the time and the folder.
normalized() { sed -E -e 's/ in [0-9.]+ s / in T s /' -e "s#$tmp/[a-z]+#PREFIX#g" "$1"; }

"$sim_run" --progress --dump-args 2 --workload mixed_example --output-prefix "$tmp/on" \
  > "$tmp/on.out" 2> "$tmp/on.err" || fail "--progress: rc=$?"
grep -qE "^$line_re" "$tmp/on.err" || { fail "--progress: no progress line on stderr"; cat "$tmp/on.err"; }
# The last line has every task done.
grep -E "^$line_re" "$tmp/on.err" | tail -1 | grep -qE '^sim_run: ([0-9]+)/\1 tasks done' \
  || { fail "--progress: the last line does not have every task done"; cat "$tmp/on.err"; }
! grep -q 'tasks done' "$tmp/on.out" || fail "--progress: a progress line on stdout"
! grep -q $'\r' "$tmp/on.err" || fail "--progress into a file: carriage returns"

"$sim_run" --noprogress --dump-args 2 --workload mixed_example --output-prefix "$tmp/off" \
  > "$tmp/off.out" 2> "$tmp/off.err" || fail "--noprogress: rc=$?"
! grep -q 'tasks done' "$tmp/off.err" || fail "--noprogress: a progress line"
diff <(normalized "$tmp/on.out") <(normalized "$tmp/off.out") \
  || fail "stdout differs between --progress and --noprogress"
grep -q '^records: ' "$tmp/off.out" || fail "no summary on stdout"

# Not a terminal, nothing said: no progress.
"$sim_run" --dump-args 2 --output-prefix "$tmp/auto" > "$tmp/auto.out" 2> "$tmp/auto.err" \
  || fail "default: rc=$?"
! grep -q 'tasks done' "$tmp/auto.err" || fail "default into a file: a progress line"
# The negation is one flag with either spelling.
"$sim_run" --no-progress --dump-args 2 --output-prefix "$tmp/neg" > /dev/null 2> "$tmp/neg.err" \
  || fail "--no-progress: rc=$?"
! grep -q 'tasks done' "$tmp/neg.err" || fail "--no-progress: a progress line"

# On a terminal (script(1) gives the run one), forced: one line redrawn in
# place, ended once the device finished.
script -qec "'$sim_run' --progress --dump-args 2 --output-prefix '$tmp/tty' > '$tmp/tty.out'" \
  "$tmp/tty.typescript" > /dev/null || fail "terminal: rc=$?"
grep -aqE $'\r'"$line_re"$'\033''\[K' "$tmp/tty.typescript" \
  || { fail "terminal: no line redrawn in place"; cat -v "$tmp/tty.typescript"; }
! grep -q 'tasks done' "$tmp/tty.out" || fail "terminal: a progress line on stdout"

# On a terminal by default: once the run outlasts a moment. The run is held
# until the line is there: its capture's args.bin is a FIFO, so the host
# blocks opening it and the device waits for the host (the wait bound is
# far away); reading the FIFO lets the run finish.
mkdir -p "$tmp/held/args_dump" && mkfifo "$tmp/held/args_dump/args.bin"
script -qfec "'$sim_run' --dump-args 2 --workload '$forty_tasks' --schedulers 2 --records-per-buffer 1 \
  --buffers-per-thread 1 --ready-queue-depth 1 --arena-bytes 1024 --wait-bound-ms 600000 \
  --output-prefix '$tmp/held' > '$tmp/held.out'" "$tmp/held.typescript" > /dev/null &
held_pid=$!
held_line() { grep -aqE $'\r'"$line_re"$'\033''\[K' "$tmp/held.typescript" 2> /dev/null; }
wait_until held_line || fail "terminal by default: no line redrawn in place while the run was held"
timeout 120 cat "$tmp/held/args_dump/args.bin" > /dev/null  # the host can write again
wait "$held_pid" || fail "terminal by default: rc=$?"
# Redrawn: a line erased and drawn again without a newline between; the
# last one has every task done.
grep -aq $'\033''\[K'$'\r''sim_run: ' "$tmp/held.typescript" \
  || { fail "terminal by default: the line was not redrawn"; cat -v "$tmp/held.typescript"; }
grep -aqE $'\r''sim_run: 40/40 tasks done [^'$'\r'']*'$'\033''\[K'$'\r''?$' "$tmp/held.typescript" \
  || { fail "terminal by default: the last line does not have every task done"; cat -v "$tmp/held.typescript"; }
! grep -q 'tasks done' "$tmp/held.out" || fail "terminal by default: a progress line on stdout"
script -qec "'$sim_run' --noprogress --dump-args 2 --output-prefix '$tmp/tty_off' > /dev/null" \
  "$tmp/tty_off.typescript" > /dev/null || fail "terminal --noprogress: rc=$?"
! grep -q 'tasks done' "$tmp/tty_off.typescript" || fail "terminal --noprogress: a progress line"

"$sim_run" --help > "$tmp/help.out" || fail "--help: rc=$?"
grep -q -- '--\[no\]progress' "$tmp/help.out" || fail "--help does not list --progress"
grep -q -- '--a-b and --a_b are the same flag' "$tmp/help.out" || fail "--help: spellings"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
