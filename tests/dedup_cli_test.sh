#!/usr/bin/env bash
# Sharing equal payloads as a user meets it: on by default,
# off by --dedup=false, ARGSDUMP_DEDUP or the config file's "dedup"; a bad
# value is a WARNING and the default; dump_viewer lists, exports and
# compares a shared capture exactly as the same run written without sharing.
set -uo pipefail
sim_run="$(realpath "$1")"
viewer="$(realpath "$2")"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
fails=0
fail() { echo "FAIL $1"; fails=$((fails + 1)); }
# The manifest's top-level counter $2 of capture $1.
counter() { grep -oE "^  \"$2\": [0-9]+" "$tmp/$1/args_dump/args_dump.json" | grep -oE '[0-9]+$'; }
bin_size() { stat -c %s "$tmp/$1/args_dump/args.bin"; }

run() {  # run NAME [env...] -- [flags...]
  local name="$1"; shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  env "${envs[@]}" "$sim_run" --dump-args 2 --workload mixed_example --output-prefix "$tmp/$name" "$@" \
    > "$tmp/$name.out" 2>&1 || fail "$name: rc=$?"
}

run shared --
run flag_off -- --dedup=false
run env_off ARGSDUMP_DEDUP=false --
printf '{"dedup": false}\n' > "$tmp/off.json"
run file_off -- --dump-config "$tmp/off.json"
run env_bad ARGSDUMP_DEDUP=maybe --
grep -q 'WARNING.*ARGSDUMP_DEDUP.*maybe' "$tmp/env_bad.out" || { fail "a bad ARGSDUMP_DEDUP: no warning"; cat "$tmp/env_bad.out"; }
# The API (the flag) over the environment, as for every item.
run flag_over_env ARGSDUMP_DEDUP=false -- --dedup=true

logical=$(counter shared payload_bytes)
for off in flag_off env_off file_off; do
  [ "$(bin_size $off)" = "$logical" ] || fail "$off: args.bin $(bin_size $off) bytes, want all $logical"
  [ "$(counter $off deduplicated_args)" = 0 ] || fail "$off: deduplicated_args $(counter $off deduplicated_args)"
  [ "$(counter $off payload_bytes_stored)" = "$logical" ] || fail "$off: payload_bytes_stored"
done
for on in shared env_bad flag_over_env; do
  [ "$(counter $on deduplicated_args)" -gt 0 ] || fail "$on: nothing shared"
  [ "$(bin_size $on)" = "$(counter $on payload_bytes_stored)" ] || fail "$on: args.bin is not payload_bytes_stored"
  [ "$(bin_size $on)" -lt "$logical" ] || fail "$on: args.bin not smaller than $logical"
done
# (Two runs may order a workload's parallel branches differently: the same
# payloads, at other offsets.)
[ "$(bin_size shared)" = "$(bin_size flag_over_env)" ] || fail "two shared runs store different bytes"

# dump_viewer: the listing, the export and the values are the same.
"$viewer" "$tmp/shared/args_dump" > "$tmp/list_shared" || fail "viewer lists the shared capture: rc=$?"
"$viewer" "$tmp/flag_off/args_dump" > "$tmp/list_off" || fail "viewer lists the plain capture: rc=$?"
cmp -s "$tmp/list_shared" "$tmp/list_off" || { fail "the listings differ"; diff "$tmp/list_shared" "$tmp/list_off"; }
"$viewer" "$tmp/shared/args_dump" --export > /dev/null || fail "export of the shared capture: rc=$?"
"$viewer" "$tmp/flag_off/args_dump" --export > /dev/null || fail "export of the plain capture: rc=$?"
diff -r "$tmp/shared/args_dump/txt" "$tmp/flag_off/args_dump/txt" > /dev/null || fail "the exported values differ"
[ "$(ls "$tmp/shared/args_dump/txt" | wc -l)" -ge 20 ] || fail "export wrote fewer than 20 files"
"$viewer" "$tmp/shared/args_dump" --compare "$tmp/flag_off/args_dump" > "$tmp/cmp.out" \
  || { fail "--compare shared vs plain: rc=$?"; cat "$tmp/cmp.out"; }
grep -q "20 match, 0 differ" "$tmp/cmp.out" || { fail "--compare: not all 20 match"; cat "$tmp/cmp.out"; }

# A run that died before its manifest (the journal kept, manifest and
# index gone): --recover places every shared payload again.
run died -- --keep-journal
rm -f "$tmp/died/args_dump/args_dump.json" "$tmp/died/args_dump/args.index"
"$sim_run" --recover "$tmp/died/args_dump" > "$tmp/recover.out" 2>&1 || { fail "--recover: rc=$?"; cat "$tmp/recover.out"; }
[ "$(counter died deduplicated_args)" = "$(counter shared deduplicated_args)" ] || fail "--recover: deduplicated_args $(counter died deduplicated_args)"
"$viewer" "$tmp/died/args_dump" --compare "$tmp/flag_off/args_dump" > "$tmp/cmp_died.out" \
  || { fail "--compare recovered vs plain: rc=$?"; cat "$tmp/cmp_died.out"; }
grep -q "20 match, 0 differ" "$tmp/cmp_died.out" || { fail "--compare recovered: not all 20 match"; cat "$tmp/cmp_died.out"; }

echo "mixed_example level 2: args.bin $(bin_size shared) of $logical bytes ($(counter shared deduplicated_args) entries shared)"
echo "$fails failure(s)"
[ "$fails" -eq 0 ]
