#!/usr/bin/env bash
# sim_run's progress line: on stderr only, on a terminal by default,
# --progress / --noprogress to force; stdout is the same either way.
set -uo pipefail
sim_run="$(realpath "$1")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
line_re='sim_run: [0-9]+/[0-9]+ tasks done, [0-9]+ records, [0-9.]+ (B|KiB|MiB)'
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

# On a terminal (script(1) gives the run one): on by default, redrawn in place.
script -qec "'$sim_run' --dump-args 2 --output-prefix '$tmp/tty' > '$tmp/tty.out'" \
  "$tmp/tty.typescript" > /dev/null || fail "terminal: rc=$?"
grep -aqE $'\r'"$line_re[^"$'\r'"]*"$'\033''\[K' "$tmp/tty.typescript" \
  || { fail "terminal: no line redrawn in place"; cat -v "$tmp/tty.typescript"; }
! grep -q 'tasks done' "$tmp/tty.out" || fail "terminal: a progress line on stdout"
script -qec "'$sim_run' --noprogress --dump-args 2 --output-prefix '$tmp/tty_off' > /dev/null" \
  "$tmp/tty_off.typescript" > /dev/null || fail "terminal --noprogress: rc=$?"
! grep -q 'tasks done' "$tmp/tty_off.typescript" || fail "terminal --noprogress: a progress line"

"$sim_run" --help > "$tmp/help.out" || fail "--help: rc=$?"
grep -q -- '--\[no\]progress' "$tmp/help.out" || fail "--help does not list --progress"
grep -q -- '--a-b and --a_b are the same flag' "$tmp/help.out" || fail "--help: spellings"

echo "$fails failure(s)"
[ "$fails" -eq 0 ]
